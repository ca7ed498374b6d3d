/*
 * A validated decode problem: the forward's fa_problem (q, o, lse, sizes,
 * scale, window) with the cache tensors as k and v and seq_k = the cache's
 * capacity, plus what addresses the cache. Built only by api/validate.c.
 * Each sequence b is then a forward problem of its own with
 * seq_k = fa_decode_len(b) (fa_decode_seq), so the mask helpers of
 * problem.h apply unchanged.
 */
#ifndef FA_DECODE_PROBLEM_H
#define FA_DECODE_PROBLEM_H

#include "driver/problem.h"

typedef struct fa_decode_problem {
    fa_problem base;
    const flashattn_tensor *k_new, *v_new; /* NULL: nothing to append */
    int64_t seq_new;                       /* 0 without k_new */
    const int32_t *block_table;            /* NULL: contiguous cache */
    int64_t max_pages, page_size;          /* paged only */
    const int32_t *seqlens_i32;            /* at most one is set; */
    const int64_t *seqlens_i64;
    int64_t seqlen_all;                    /* neither: every sequence's length (a
                                              forward run as decode, plan/fwd_route.h) */
    int top_left; /* diagonal at 0 instead of len - seq_q */
} fa_decode_problem;

/* Rows in sequence b's cache before the append. */
static inline int64_t fa_decode_cached(const fa_decode_problem *dp, int64_t b) {
    return dp->seqlens_i32   ? (int64_t)dp->seqlens_i32[b]
           : dp->seqlens_i64 ? dp->seqlens_i64[b]
                             : dp->seqlen_all;
}

/* Rows sequence b attends over: the cached ones and the appended ones. */
static inline int64_t fa_decode_len(const fa_decode_problem *dp, int64_t b) {
    return fa_decode_cached(dp, b) + dp->seq_new;
}

/* Sequence b as a forward problem over its own length. */
static inline fa_problem fa_decode_seq(const fa_decode_problem *dp, int64_t b) {
    fa_problem p = dp->base;
    p.seq_k = fa_decode_len(dp, b);
    p.diag = dp->top_left ? 0 : p.seq_k - p.seq_q;
    return p;
}

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
    return (char *)t->data + off * (int64_t)(t->dtype == FLASHATTN_F32 ? 4 : 2);
}

#endif
