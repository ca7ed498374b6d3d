/*
 * Double-precision reference attention: materialises each row's scores,
 * for tests and `flashattn check` only (it is O(seq_k) per row, not tiled,
 * not fast). Same semantics and descriptors as flashattn_fwd; inputs of any
 * dtype are widened exactly to double.
 */
#ifndef FA_ATTN_F64_H
#define FA_ATTN_F64_H

#include "flashattn.h"

/* o: [batch, seq_q, heads_q, v's head_dim] contiguous doubles; lse (may be NULL):
 * [batch, heads_q, seq_q]. Returns the validation status of the inputs. */
flashattn_status fa_reference_fwd_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                      const flashattn_tensor *v, const flashattn_params *p,
                                      double *o, double *lse);

/* Element (b, s, h, c) of a tensor, widened to double. */
double fa_tensor_get(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c);

/* The whole tensor as contiguous [batch, seqlen, heads, head_dim] doubles
 * (malloc'd; NULL when out of memory), for the references' inner loops:
 * a getter call per element there made them most of a sanitizer test run. */
double *fa_tensor_widen(const flashattn_tensor *t);

/* Index of element (b, s, h, c) in fa_tensor_widen's array of t. */
static inline size_t fa_widened_at(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h,
                                   int64_t c) {
    return (size_t)(((b * t->seqlen + s) * t->heads + h) * t->head_dim + c);
}

#endif
