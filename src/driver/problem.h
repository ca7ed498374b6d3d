/*
 * The validated problem every driver works from: sizes, the mask as one
 * pair of diagonal bounds, and the folded softmax scale. Built only by
 * api/validate.c, so drivers never re-check user input.
 */
#ifndef FA_PROBLEM_H
#define FA_PROBLEM_H

#include <stdint.h>

#include "flashattn.h"

typedef struct fa_problem {
    const flashattn_tensor *q, *k, *v, *o;
    float *lse;                 /* [batch, heads_q, seq_q] or NULL */
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    int64_t head_dim_pad;       /* head_dim rounded up to FA_COL_ALIGN */
    int64_t group;              /* heads_q / heads_kv */
    float scale_log2;           /* softmax scale * log2(e): scores live in base 2 */
    /* Query i sees key j iff lo(i) <= j <= hi(i), where
     *   lo(i) = i + diag - left   (left < 0: no lower bound)
     *   hi(i) = i + diag + right  (right < 0: no upper bound)
     * causal is already folded into right. */
    int64_t diag, left, right;
} fa_problem;

static inline int64_t fa_key_lo(const fa_problem *pb, int64_t i) {
    int64_t lo = pb->left < 0 ? 0 : i + pb->diag - pb->left;
    return lo < 0 ? 0 : lo;
}

/* One past the last key row i sees (clamped to [0, seq_k]). */
static inline int64_t fa_key_end(const fa_problem *pb, int64_t i) {
    int64_t end = pb->right < 0 ? pb->seq_k : i + pb->diag + pb->right + 1;
    if (end > pb->seq_k) end = pb->seq_k;
    return end < 0 ? 0 : end;
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
