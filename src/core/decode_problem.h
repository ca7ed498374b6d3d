/*
 * A validated decode problem: the forward's fa_problem (q, o, lse, sizes,
 * scale, window) with the cache tensors as k and v, seq_k = the cache's
 * capacity and the cache's lengths as kv_lens (kv_add = seq_new), so that
 * fa_seq_of gives each sequence's view over its own keys; plus what
 * addresses the cache. Built only by api/validate.c and plan/fwd_route.c.
 */
#ifndef FA_CORE_DECODE_PROBLEM_H
#define FA_CORE_DECODE_PROBLEM_H

#include "core/dtype.h"
#include "core/problem.h"

typedef struct fa_decode_problem {
    fa_problem base;
    const flashattn_tensor *k_new, *v_new; /* NULL: nothing to append */
    int64_t seq_new;                       /* 0 without k_new; base.kv_add */
    const int32_t *block_table;            /* NULL: contiguous cache */
    int64_t max_pages, page_size;          /* paged only */
} fa_decode_problem;

/* Address of cache row j (logical, within sequence b) of kv-head hk in t,
 * the cache's k or v tensor. */
static inline void *fa_cache_row(const fa_decode_problem *dp, const flashattn_tensor *t, int64_t b,
                                 int64_t j, int64_t hk) {
    int64_t page = b, slot = j;
    if (dp->block_table) {
        page = dp->block_table[b * dp->max_pages + j / dp->page_size];
        slot = j % dp->page_size;
    }
    int64_t off = page * t->stride_batch + slot * t->stride_seq + hk * t->stride_head;
    return (char *)t->data + off * fa_dtype_bytes(t->dtype);
}

#endif
