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
    /* Rotary embedding of q and k_new (rot_cos NULL: none): pairs of the
     * first rot_dim elements, at cache rows: k_new row j at seqlens + j,
     * q row i at seqlens + i * rot_q_step. */
    const float *rot_cos, *rot_sin;
    int64_t rot_dim;
    int rot_interleaved, rot_q_step;
    /* A quantised cache's scales, of k [0] and v [1] (data NULL: a float
     * cache), as flashattn_kv_cache gives them. */
    flashattn_tensor scale[2];
    flashattn_scale_kind scale_kind[2];
} fa_decode_problem;

/* Rotate the first rot_dim elements of row x, at position pos, in place. */
static inline void fa_rotary_row(const fa_decode_problem *dp, float *x, int64_t pos) {
    const int64_t half = dp->rot_dim / 2;
    const float *c = dp->rot_cos + pos * half, *s = dp->rot_sin + pos * half;
    for (int64_t t = 0; t < half; t++) {
        const int64_t a = dp->rot_interleaved ? 2 * t : t, b = dp->rot_interleaved ? 2 * t + 1 : t + half;
        const float x1 = x[a], x2 = x[b];
        x[a] = x1 * c[t] - x2 * s[t];
        x[b] = x1 * s[t] + x2 * c[t];
    }
}

/* Address of key j of sequence s (its row s->k0 + j) of kv-head hk in t,
 * the cache's k or v tensor. */
static inline void *fa_cache_row(const fa_decode_problem *dp, const flashattn_tensor *t,
                                 const fa_seq *s, int64_t j, int64_t hk) {
    int64_t page = s->kb, slot = s->k0 + j;
    if (dp->block_table) {
        page = dp->block_table[s->idx * dp->max_pages + slot / dp->page_size];
        slot %= dp->page_size;
    }
    int64_t off = page * t->stride_batch + slot * t->stride_seq + hk * t->stride_head;
    return (char *)t->data + off * fa_dtype_bytes(t->dtype);
}

/* The per-token scale of key j of sequence s, kv-head hk, in the cache's
 * k (t = 0) or v (t = 1) scales: addressed as the cache row is. */
static inline float *fa_cache_scale(const fa_decode_problem *dp, int t, const fa_seq *s, int64_t j,
                                    int64_t hk) {
    return (float *)fa_cache_row(dp, &dp->scale[t], s, j, hk);
}

/* Whether the cache's k (t = 0) or v (t = 1) has a scale per token; and
 * the fixed scales of kv-head hk (per channel: one per element; per head:
 * the one, *step set to 0). */
static inline int fa_scale_per_token(const fa_decode_problem *dp, int t) {
    return dp->scale[t].data && dp->scale_kind[t] == FLASHATTN_SCALE_PER_TOKEN;
}

static inline const float *fa_scale_fixed(const fa_decode_problem *dp, int t, int64_t hk, int64_t *step) {
    const flashattn_tensor *sc = &dp->scale[t];
    *step = dp->scale_kind[t] == FLASHATTN_SCALE_PER_CHANNEL;
    return (const float *)sc->data + hk * sc->stride_head;
}

#endif
