/*
 * The validated problem every driver works from, and the view of one
 * sequence of it that every driver takes. Built only by api/validate.c (and
 * plan/fwd_route.c, which hands a forward to the decode driver), so drivers
 * never re-check user input.
 *
 * A problem is a batch of sequences. seq_q and seq_k are the most any
 * sequence has (they size the workspace); fa_seq_of gives one sequence's
 * own lengths, where its rows lie and its mask. Today sequence b is batch
 * entry b of every tensor with seq_q queries, and seq_k keys or, with
 * kv_lens (decode), kv_lens[b] + kv_add keys.
 */
#ifndef FA_CORE_PROBLEM_H
#define FA_CORE_PROBLEM_H

#include <stdint.h>

#include "core/mask.h"
#include "flashattn.h"

typedef struct fa_problem {
    const flashattn_tensor *q, *k, *v, *o;
    float *lse;                 /* [batch, heads_q, seq_q] or NULL */
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    int64_t head_dim_pad;       /* head_dim rounded up to FA_COL_ALIGN */
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
} fa_problem;

/* One sequence: its lengths, where its rows lie, which keys each query sees. */
typedef struct fa_seq {
    int64_t b;            /* batch coordinate of its rows in q, k, v, o, lse */
    int64_t q0, k0;       /* its first query row (q, o, lse) and key row (k, v) */
    int64_t seq_q, seq_k;
    fa_mask mask;
} fa_seq;

/* Rows of sequence b's keys that are given (decode: in the cache before
 * the append), before kv_add more. */
static inline int64_t fa_kv_given(const fa_problem *pb, int64_t b) {
    return pb->kv_lens_i32   ? (int64_t)pb->kv_lens_i32[b]
           : pb->kv_lens_i64 ? pb->kv_lens_i64[b]
                             : pb->seq_k - pb->kv_add;
}

static inline fa_seq fa_seq_of(const fa_problem *pb, int64_t b) {
    fa_seq s;
    s.b = b;
    s.q0 = s.k0 = 0;
    s.seq_q = pb->seq_q;
    s.seq_k = fa_kv_given(pb, b) + pb->kv_add;
    s.mask.seq_k = s.seq_k;
    s.mask.diag = pb->top_left ? 0 : s.seq_k - s.seq_q;
    s.mask.left = pb->left;
    s.mask.right = pb->right;
    return s;
}

/* The LSE of query row i of sequence s, head h (pb->lse set). */
static inline float *fa_lse_at(const fa_problem *pb, float *lse, const fa_seq *s, int64_t h, int64_t i) {
    return lse + (s->b * pb->heads_q + h) * pb->seq_q + s->q0 + i;
}

/* The backward pass's problem: the forward's (o is an input here, f.lse is
 * unused) plus the gradients. Built by fa_validate_bwd. */
typedef struct fa_bwd_problem {
    fa_problem f;
    const flashattn_tensor *dout, *dq, *dk, *dv;
    const float *lse;           /* the forward's, [batch, heads_q, seq_q] */
    float scale;                /* the natural-log softmax scale */
} fa_bwd_problem;

#endif
