/* Packing K and V of one (sequence, kv-head) into the GEMM kernels'
 * layouts, converted to f32 once, so every q-block and every query head of
 * a GQA group reuses them. Keys are counted within the sequence (its rows
 * start at seq->k0); the layouts are sized for pb->seq_k keys, the most any
 * sequence has. */
#ifndef FA_DRIVER_PACK_H
#define FA_DRIVER_PACK_H

#include <string.h>

#include "core/problem.h"
#include "kernels/kernels.h"

/* Keys [j0, j1) of K into panels of nr keys: dst[(j / nr)][d][j % nr],
 * by the kernels' transposing copy; j0 and j1 multiples of nr or
 * j1 = seq->seq_k; keys past seq_k in the last panel are zero. */
void fa_pack_k(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
               int64_t j0, int64_t j1, float *dst);

/* Rows [j0, j1) of V, zero padded to head_dim_v_pad, cut into column
 * panels of nr (the last one narrower): panel c (c a multiple of nr, width
 * w = min(nr, head_dim_v_pad - c)) is [seq->seq_k][w] at dst + c * seq->seq_k,
 * so the P.V tile streams its B operand contiguously. */
void fa_pack_v(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
               int64_t j0, int64_t j1, float *dst);

/* One row of a column panel (nr floats). With nr a literal the copy is
 * inlined: a call per panel and row (memcpy of a run-time length, or the
 * kernels' load) was a visible share of short calls. */
static inline void fa_panel_row(float *to, const float *from, int64_t nr) {
    if (nr == 16) memcpy(to, from, 16 * sizeof(float));
    else if (nr == 32) memcpy(to, from, 32 * sizeof(float));
    else memcpy(to, from, (size_t)nr * sizeof(float));
}

/* Pairs (2p, 2p + 1) of a row of d bf16, one 32-bit pair every `stride`
 * pairs down dst, element 2p in the low half; an odd d's last pair has 0
 * on top. Bits are copied, never rounded. */
static inline void fa_pairs_down(uint32_t *dst, int64_t stride, const void *row, int64_t d) {
    const uint16_t *x = (const uint16_t *)row;
    for (int64_t p = 0; p < d / 2; p++) dst[p * stride] = (uint32_t)x[2 * p] | (uint32_t)x[2 * p + 1] << 16;
    if (d & 1) dst[d / 2 * stride] = x[d - 1];
}

/* The bf16 dot-product route's layouts (gemm_bf16 in kernels.h), with
 * dh = ceil(head_dim / 2) pairs per row; the bf16 bits are copied, never
 * rounded. Keys [j0, j1) of K: panel j / nr is [dh][nr] pairs, pair (p, c)
 * = elements (2p, 2p + 1) of key (j / nr) * nr + c; an odd head_dim's
 * last pair has 0 on top; keys past seq_k in the last panel are zero.
 * Fits in the f32 layout's size. Same j0, j1 rules as fa_pack_k. */
void fa_pack_k_pairs(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                     int64_t j0, int64_t j1, uint32_t *dst);

/* Rows [j0, j1) of V (j0 even) as pairs of keys: with kh = ceil(seq->seq_k
 * / 2), column panel c (as in fa_pack_v, width w) is [kh][w] pairs at
 * dst + c * kh, pair (p, x) = (V[2p][c + x], V[2p + 1][c + x]); zero past
 * head_dim_v, and on top for the key seq->seq_k when it is odd. A bf16 V's
 * bits are copied; another dtype's are rounded to bf16 (nearest even),
 * for the 8-bit route's bf16 P V, through tmp: head_dim_v floats, then
 * 2 head_dim_v bf16 (NULL for a bf16 V). */
void fa_pack_v_pairs(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                     int64_t j0, int64_t j1, uint32_t *dst, void *tmp);

#endif
