/*
 * Standard attention computed plainly in f32: materialised scores for one
 * row at a time, an f32 softmax, output rounded once to a dtype. It is the
 * yardstick of the pass rules in tests/test_forward.c and `flashattn check`
 * (an exact kernel should be about as accurate as this), not a fast path.
 */
#ifndef FA_ATTN_STD_F32_H
#define FA_ATTN_STD_F32_H

#include "flashattn.h"

/* out: contiguous [batch, seq_q, heads_q, head_dim] doubles holding the
 * values rounded to out_dtype. Returns the validation status of the inputs
 * (or OUT_OF_MEMORY for its O(seq_k + head_dim) scratch). */
flashattn_status fa_reference_std_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                                      const flashattn_tensor *v, const flashattn_params *p,
                                      flashattn_dtype out_dtype, double *out);

#endif
