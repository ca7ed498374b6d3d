/*
 * Double-precision reference gradients of attention, by the textbook
 * formulas with each query row's scores materialised (tests and `flashattn
 * check` only: O(seq_k) scratch per row, not tiled, not fast). They are the
 * exact gradients of the inputs' function: O and LSE are not inputs here,
 * P is recomputed from scratch and D = sum_j P_j dP_j.
 *
 * Per query row i (of query head h, kv-head h / group), over the keys j it
 * sees, with s_j = scale q_i . k_j and p = softmax(s):
 *     dp_j = dO_i . v_j       D = sum_j p_j dp_j       ds_j = p_j (dp_j - D)
 *     dQ_i = scale sum_j ds_j k_j
 *     dK_j += scale ds_j q_i   dV_j += p_j dO_i        (summed over the group)
 * A row that sees no key contributes nothing.
 */
#ifndef FA_ATTN_BWD_F64_H
#define FA_ATTN_BWD_F64_H

#include "flashattn.h"

/* dq: [batch, seq_q, heads_q, head_dim], dk and dv: [batch, seq_k,
 * heads_kv, head_dim] (dv: v's head_dim), contiguous doubles. dout has
 * o's shape (q's, with v's head_dim).
 * Returns the validation status of the inputs, or OUT_OF_MEMORY. */
flashattn_status fa_reference_bwd_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                      const flashattn_tensor *v, const flashattn_tensor *dout,
                                      const flashattn_params *p, double *dq, double *dk,
                                      double *dv);

/* The same on double inputs, for finite differences: q, k, v only give the
 * shapes (they are validated as flashattn_fwd would); the values are qd, kd,
 * vd, dod, contiguous [batch, seq, heads, head_dim] doubles (each its
 * tensor's head_dim). */
flashattn_status fa_reference_bwd_f64_dbl(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_params *p,
                                          const double *qd, const double *kd, const double *vd,
                                          const double *dod, double *dq, double *dk, double *dv);

/* The forward on double inputs (shapes and values as above): o is
 * [batch, seq_q, heads_q, v's head_dim]. What the gradients above are the
 * derivatives of: L = sum(o * dout) has dL/dq = dq, and so on. */
flashattn_status fa_reference_fwd_f64_dbl(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_params *p,
                                          const double *qd, const double *kd, const double *vd,
                                          double *o);

/* dL/dsinks [heads_q] with L = sum(o * dout): -sum over the rows of head h
 * of exp(sink_h - LSE_i) D_i, D_i = dO_i . O_i, from this file's forward
 * in double (params.sinks must be set). */
/* dL/dbias of p's bias, whole: [batch, heads_q, seq_q, seq_k] doubles, the
 * logit's gradient after the bias (0 where a key is hidden). Dense only. */
flashattn_status fa_reference_dbias_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                        const flashattn_tensor *v, const flashattn_tensor *dout,
                                        const flashattn_params *p, double *dbias);

flashattn_status fa_reference_dsinks_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                         const flashattn_tensor *v, const flashattn_tensor *dout,
                                         const flashattn_params *p, double *dsinks);

#endif
