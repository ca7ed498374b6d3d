/*
 * Work items shared by a team in ranges, one range a thread: each thread
 * takes its own range's items in order, then what is left of the others'
 * (from their fronts, the next thread's first). A driver makes a thread's
 * range the items whose K and V that thread packed, so they read the
 * panels from its own L2, not from the other core's through the L3; the
 * leftovers taken at the end let the team finish together, as dynamic
 * scheduling does. Which thread runs an item changes no bit of its result.
 *
 * A range is written by its owner, read by the team after a barrier, and
 * its counter only ever advances while it is in use.
 */
#ifndef FA_CORE_SHARE_H
#define FA_CORE_SHARE_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    _Atomic int64_t next; /* the next item to take */
    int64_t end;
} fa_share_range;

static inline void fa_share_set(fa_share_range *r, int64_t begin, int64_t end) {
    atomic_store_explicit(&r->next, begin, memory_order_relaxed);
    r->end = end;
}

/* Of n items cut into `parts` ranges as even as whole items allow, where
 * range k begins. */
static inline int64_t fa_share_cut(int64_t n, int parts, int k) {
    return n / parts * k + (k < n % parts ? k : n % parts);
}

/* The team's ranges: range t at (char *)ranges + t * stride. */
typedef struct {
    char *ranges;
    size_t stride;
    int team, self;
    int at; /* offset from self of the range taken from last */
} fa_share;

static inline fa_share fa_share_of(void *ranges, size_t stride, int team, int self) {
    fa_share s = {(char *)ranges, stride, team, self, 0};
    return s;
}

static inline fa_share_range *fa_share_range_at(const fa_share *s, int t) {
    return (fa_share_range *)(s->ranges + (size_t)t * s->stride);
}

/* The next item for this thread, or -1 when every range is used up. */
static inline int64_t fa_share_take(fa_share *s) {
    for (; s->at < s->team; s->at++) {
        fa_share_range *r = fa_share_range_at(s, (s->self + s->at) % s->team);
        if (atomic_load_explicit(&r->next, memory_order_relaxed) >= r->end) continue;
        const int64_t i = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (i < r->end) return i;
    }
    return -1;
}

#endif
