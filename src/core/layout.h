/*
 * Workspace layouts. A planner describes each area it needs (the whole
 * workspace, one thread's tiles, one group's packed K and V, ...) as a
 * layout of named regions; the sizes are checked for overflow once, here,
 * and the drivers only read the offsets. A region is an array of `count`
 * items of `bytes` each, `stride` bytes apart, starting at `offset` from
 * the layout's base; every offset and stride is a multiple of
 * FA_LAYOUT_ALIGN (one cache line, what the GEMM kernels' B and C like),
 * except in a region of scalars (fa_layout_scalars), whose items are
 * packed. An item may itself hold a layout: its bytes are that layout's.
 *
 * A workspace the user hands over need not be aligned: fa_layout_base
 * rounds its address up, and fa_layout_workspace_bytes counts the slack.
 */
#ifndef FA_CORE_LAYOUT_H
#define FA_CORE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define FA_LAYOUT_ALIGN 64
#define FA_LAYOUT_MAX_REGIONS 16

typedef struct fa_region {
    const char *name;
    size_t offset, count, stride, bytes;
} fa_region;

typedef struct fa_layout {
    const char *name;
    int n;          /* regions so far; region k was added k-th */
    int overflow;   /* a size did not fit in size_t (or too many regions) */
    size_t size;    /* bytes from the base to the end of the last region, aligned */
    fa_region r[FA_LAYOUT_MAX_REGIONS];
} fa_layout;

void fa_layout_init(fa_layout *l, const char *name);

/* Region `id` (which must be the count of regions added so far: callers
 * name their regions with an enum in that order), `count` items of `bytes`
 * each, every item aligned. */
void fa_layout_array(fa_layout *l, int id, const char *name, size_t count, size_t bytes);

/* Region `id`, `count` scalars of `bytes` each, packed (one aligned block). */
void fa_layout_scalars(fa_layout *l, int id, const char *name, size_t count, size_t bytes);

/* Item i of region id of a layout placed at base. */
static inline void *fa_region_at(const fa_layout *l, void *base, int id, size_t i) {
    return (char *)base + l->r[id].offset + i * l->r[id].stride;
}

/* The aligned base of a workspace, and the bytes a workspace needs to hold
 * l at any address (0 when the layout overflowed). */
static inline void *fa_layout_base(void *ws) {
    return (void *)(((uintptr_t)ws + FA_LAYOUT_ALIGN - 1) & ~(uintptr_t)(FA_LAYOUT_ALIGN - 1));
}
size_t fa_layout_workspace_bytes(const fa_layout *l);

/* Whether l's regions are aligned, pairwise disjoint, hold their items
 * (bytes <= stride, items within their region) and end within `capacity`
 * bytes; 0 with the reason in why otherwise. For the tests. */
int fa_layout_check(const fa_layout *l, size_t capacity, char *why, size_t why_n);

#endif
