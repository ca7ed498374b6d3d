/* Addressing the rows of a tensor descriptor, and prefetching them. */
#ifndef FA_CORE_TENSOR_H
#define FA_CORE_TENSOR_H

#include <stdint.h>

#include "core/dtype.h"
#include "flashattn.h"

/* Address of row (b, s, h) of a tensor. */
static inline const void *fa_row_ptr(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h) {
    int64_t off = b * t->stride_batch + s * t->stride_seq + h * t->stride_head;
    return (const char *)t->data + off * fa_dtype_bytes(t->dtype);
}

/* A prefetch hint: p + off may lie outside any object, so the address is
 * formed as an integer (a prefetch never faults). */
static inline __attribute__((always_inline)) void fa_prefetch(const void *p, int64_t off) {
    __builtin_prefetch((const void *)((uintptr_t)p + (uintptr_t)off), 0, 3);
}

/* Rows of a [batch, seq, heads, dim] tensor lie heads * dim elements
 * apart, often a page or more, so every row is a new stream that the
 * hardware prefetchers pick up only after its first misses. Loops that
 * read rows one at a time call this for the row `ahead` rows on
 * (FA_ROW_AHEAD: the distance measured best, docs/performance.md). */
#define FA_ROW_AHEAD 4

static inline void fa_prefetch_rows_ahead(const flashattn_tensor *t, const void *row, int64_t ahead) {
    const int64_t es = fa_dtype_bytes(t->dtype);
    const int64_t off = ahead * t->stride_seq * es, bytes = t->head_dim * es;
    for (int64_t x = 0; x < bytes; x += 64) fa_prefetch(row, off + x);
}

#endif
