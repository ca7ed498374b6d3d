/*
 * The validated problem every driver works from, and the view of one
 * sequence of it that every driver takes. Built only by api/validate.c (and
 * plan/fwd_route.c, which hands a forward to the decode driver), so drivers
 * never re-check user input.
 *
 * A problem is a batch of sequences. seq_q and seq_k are the most any
 * sequence has (they size the workspace); fa_seq_of gives one sequence's
 * own lengths, where its rows lie and its mask. Sequence b is either
 *   dense:  batch entry b of every tensor, with seq_q queries and seq_k
 *           keys or, with kv_lens (decode), kv_lens[b] + kv_add keys;
 *   varlen: rows cu_q[b] .. cu_q[b + 1] - 1 of q's only batch entry, and
 *           keys from row cu_k[b] of k's (used_k[b] of them, or up to
 *           cu_k[b + 1]), or, in decode, the cache's as above.
 * In decode, batch_idx and leftpad move a sequence's keys within the cache.
 */
#ifndef FA_CORE_PROBLEM_H
#define FA_CORE_PROBLEM_H

#include <stdint.h>

#include "core/mask.h"
#include "core/philox.h"
#include "flashattn.h"

typedef struct fa_problem {
    const flashattn_tensor *q, *k, *v, *o;
    float *lse;                 /* [batch, heads_q, seq_q] or NULL */
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    int64_t head_dim_pad;       /* head_dim rounded up to FA_COL_ALIGN */
    /* V's and O's head size (dO's, dV's): head_dim_v may differ from
     * head_dim, Q's and K's, which the scores contract over. */
    int64_t head_dim_v, head_dim_v_pad;
    int64_t group;              /* heads_q / heads_kv */
    float scale_log2;           /* softmax scale * log2(e): scores live in base 2 */
    /* The window of every sequence (core/mask.h), causal folded into
     * right; the diagonal follows from each sequence's lengths. */
    int64_t left, right;
    int top_left;               /* diagonal at 0 instead of seq_k - seq_q */
    /* Keys per sequence: kv_lens[b] + kv_add where one of the two arrays
     * is set (at most one is), else seq_k. */
    const int32_t *kv_lens_i32;
    const int64_t *kv_lens_i64;
    int64_t kv_add;
    /* Varlen (NULL: dense). kv_add_q: each sequence appends as many keys
     * as it has queries (decode with packed queries). */
    const int32_t *cu_q, *cu_k, *used_k;
    int kv_add_q;
    /* Decode's cache: the entry of sequence b, the row its keys start at. */
    const int32_t *batch_idx, *leftpad;
    /* Rows of q, o and LSE per batch entry (the LSE's row length): seq_q
     * dense, total_q varlen; and their batch entries (1 varlen). */
    int64_t rows_q, batch_q;
    /* Score modifiers (driver/score.h), off when 0 / NULL: softcap in
     * base 2 (softcap * log2 e), ALiBi slopes of (sequence b, head h) at
     * alibi[b * alibi_stride + h], sinks [heads_q] (natural log). */
    float softcap2;
    const float *alibi;
    int64_t alibi_stride;
    const float *sinks;
    const flashattn_scores *bias, *mask; /* validated; NULL: off */
    fa_dropout dropout;                  /* scale 0: off */
    /* params.precision: Q K^T on 8 bits (driver/int8_qk.h); and P, V rounded to
     * bf16, or P V on 8 bits too */
    int int8_qk, bf16_pv, int8_pv;
} fa_problem;

/* One sequence: its lengths, where its rows lie, which keys each query sees. */
typedef struct fa_seq {
    int64_t idx;          /* which sequence: index of per-sequence arrays */
    int64_t qb, q0;       /* batch coordinate and first row in q, o, lse (dq, dout) */
    int64_t kb, k0;       /* batch coordinate and first row in k, v (dk, dv; the cache) */
    int64_t seq_q, seq_k;
    fa_mask mask;
} fa_seq;

/* Rows of sequence b's keys that are given (decode: in the cache before
 * the append, counted from its first key), before kv_add more. */
static inline int64_t fa_kv_given(const fa_problem *pb, int64_t b) {
    const int64_t pad = pb->leftpad ? (int64_t)pb->leftpad[b] : 0;
    return pb->kv_lens_i32   ? (int64_t)pb->kv_lens_i32[b] - pad
           : pb->kv_lens_i64 ? pb->kv_lens_i64[b] - pad
                             : pb->seq_k - pb->kv_add;
}

/* Query rows of sequence b. */
static inline int64_t fa_seq_q_of(const fa_problem *pb, int64_t b) {
    return pb->cu_q ? (int64_t)pb->cu_q[b + 1] - pb->cu_q[b] : pb->seq_q;
}

/* Keys sequence b appends (decode). */
static inline int64_t fa_kv_added(const fa_problem *pb, int64_t b) {
    return pb->kv_add_q ? fa_seq_q_of(pb, b) : pb->kv_add;
}

static inline fa_seq fa_seq_of(const fa_problem *pb, int64_t b) {
    fa_seq s;
    s.idx = b;
    s.qb = pb->cu_q ? 0 : b;
    s.q0 = pb->cu_q ? pb->cu_q[b] : 0;
    s.seq_q = fa_seq_q_of(pb, b);
    if (pb->cu_k) {
        s.kb = 0;
        s.k0 = pb->cu_k[b];
        s.seq_k = pb->used_k ? (int64_t)pb->used_k[b] : (int64_t)pb->cu_k[b + 1] - pb->cu_k[b];
    } else {
        s.kb = pb->batch_idx ? (int64_t)pb->batch_idx[b] : b;
        s.k0 = pb->leftpad ? (int64_t)pb->leftpad[b] : 0;
        s.seq_k = fa_kv_given(pb, b) + fa_kv_added(pb, b);
    }
    s.mask.seq_k = s.seq_k;
    s.mask.diag = pb->top_left ? 0 : s.seq_k - s.seq_q;
    s.mask.left = pb->left;
    s.mask.right = pb->right;
    return s;
}

/* The LSE of query row i of sequence s, head h (pb->lse set). */
static inline float *fa_lse_at(const fa_problem *pb, float *lse, const fa_seq *s, int64_t h, int64_t i) {
    return lse + (s->qb * pb->heads_q + h) * pb->rows_q + s->q0 + i;
}

/* The backward pass's problem: the forward's (o is an input here, f.lse is
 * unused) plus the gradients. Built by fa_validate_bwd. */
typedef struct fa_bwd_problem {
    fa_problem f;
    const flashattn_tensor *dout, *dq, *dk, *dv;
    const float *lse;           /* the forward's, [batch, heads_q, seq_q] */
    float scale;                /* the natural-log softmax scale */
    float *dsinks;              /* [heads_q] or NULL (f.sinks set) */
    const flashattn_scores *dbias; /* f32, written; NULL: not asked (f.bias set) */
} fa_bwd_problem;

#endif
