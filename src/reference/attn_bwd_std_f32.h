/*
 * The backward computed plainly in f32: the yardstick of the pass rules in
 * tests/test_backward.c and `flashattn check` (an exact backward should be
 * about as accurate as this), not a fast path.
 *
 * The same function of the same inputs as flashattn_bwd (q, k, v, dout and
 * the o and lse the forward returned): per query row, scores materialised in
 * f32, P = exp(s - LSE), dP = dO V^T, D = rowsum(dO * O), dS = P (dP - D),
 * every sum accumulated in f32, each gradient rounded once to out_dtype.
 * It takes LSE as given because P = exp(s - LSE) is the algorithm: any
 * backward fed an f32 LSE of ~100 carries ~1e-6 relative error in P from
 * LSE's own rounding, which a softmax recomputed from scratch would not.
 */
#ifndef FA_ATTN_BWD_STD_F32_H
#define FA_ATTN_BWD_STD_F32_H

#include "flashattn.h"

/* dq: contiguous [batch, seq_q, heads_q, head_dim] doubles, dk and dv:
 * [batch, seq_k, heads_kv, head_dim] (dv: v's), holding the values rounded to
 * out_dtype. terms[g] receives, for gradient g (dq, dk, dv), the largest sum
 * of the absolute values of the terms making up one element (P |dP - D| |K|
 * scale for dq, and so on): the scale of any f32 evaluation's rounding,
 * even where the terms cancel to 0. Returns the validation status of the
 * inputs, or OUT_OF_MEMORY for its O(seq_k * heads_kv * head_dim) scratch. */
flashattn_status fa_reference_bwd_std_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const flashattn_tensor *dout, const float *lse,
                                          const flashattn_params *p, flashattn_dtype out_dtype,
                                          double *dq, double *dk, double *dv, double terms[3]);

/* The pass rule of tests/test_backward.c and `flashattn check` for one
 * gradient, from the plain backward's max and rms errors against the FP64
 * reference and its terms: the result passes when its max error is at most
 * max_bound and its rms error at most rms_bound.
 *   rms:  twice the plain rms error (floor 1e-6 * terms)
 *   max:  twice the plain max error (FlashAttention's rule); floor 1e-6 *
 *         terms for 16-bit outputs, 1e-5 * terms for f32 ones.
 * Why two measures: with 16-bit outputs both errors are the output's
 * rounding and the max is stable. With f32 ones both are at the f32
 * rounding level and the max over 1e5 elements is a tail event: on one
 * shape (b 2, seq 4 x 396, d 129) over 8 seeds the rms errors agreed within
 * 20% while the ratio of the maxima ranged from 0.45 to 2.3. So in f32 the
 * rms carries the 2x rule, and the max only has to stay within ~100 ulp of
 * the terms (a wrong term is off by the order of the terms themselves). */
typedef struct {
    double max_bound, rms_bound;
} fa_bwd_bounds;

fa_bwd_bounds fa_bwd_pass_bounds(flashattn_dtype out_dtype, double plain_max, double plain_rms,
                                 double terms);

#endif
