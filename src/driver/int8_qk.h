/*
 * The forward's 8-bit Q K^T (params.precision FLASHATTN_PRECISION_INT8_QK,
 * flashattn.h "Precision"; SageAttention's scheme): K packed once per
 * group as int8 panels for the kernels' gemm_i8, each chunk of keys
 * smoothed by its mean; each q-block's rows quantised as they load; the
 * mean's term q . m added back per chunk, so S is that of the rounded Q
 * and K, shift included.
 */
#ifndef FA_DRIVER_INT8_QK_H
#define FA_DRIVER_INT8_QK_H

#include "core/problem.h"
#include "kernels/kernels.h"
#include "plan/tiles.h" /* fa_pack_chunk */

/* A group's packed keys (the plan's FA_FWD_GROUP_K8.. regions):
 *   panels  [ceil(seq_k / nr)][k4][nr][4] int8, k4 = ceil(head_dim / 4):
 *           gemm_i8's B, zero past head_dim and past seq_k;
 *   sum     [.. * nr] int32, each key's sum of its bytes (gemm_i8's bsum);
 *   scale   [.. * nr] f32, each key's sk (0 past seq_k);
 *   mean    [ceil(seq_k / chunk)][head_dim] f32, each chunk's m. */
typedef struct fa_i8_keys {
    int8_t *panels;
    int32_t *sum;
    float *scale, *mean;
} fa_i8_keys;

static inline fa_i8_keys fa_i8_keys_of(const fa_fwd_plan *plan, void *area) {
    fa_i8_keys k;
    k.panels = (int8_t *)fa_region_at(&plan->group, area, FA_FWD_GROUP_K8, 0);
    k.sum = (int32_t *)fa_region_at(&plan->group, area, FA_FWD_GROUP_KSUM, 0);
    k.scale = (float *)fa_region_at(&plan->group, area, FA_FWD_GROUP_KSCALE, 0);
    k.mean = (float *)fa_region_at(&plan->group, area, FA_FWD_GROUP_KMEAN, 0);
    return k;
}

static inline int64_t fa_i8_k4(const fa_problem *pb) { return (pb->head_dim + 3) / 4; }

/* Keys [j0, j1) of one chunk (j0 a multiple of fa_pack_chunk, j1 its end
 * or seq->seq_k): the chunk's mean, then its rows. tmp holds head_dim
 * doubles, then fa_pack_chunk * head_dim floats (8-byte aligned). */
void fa_pack_k_i8(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                  int64_t j0, int64_t j1, const fa_i8_keys *dst, void *tmp);

/* A group's values for the 8-bit P V (FLASHATTN_PRECISION_INT8_QK_INT8_PV;
 * the plan's FA_FWD_GROUP_V8 and _VSCALE regions):
 *   panels  V's column panels of w <= nr channels, as gemm_u8's B: panel c
 *           (its first channel) at panels + c * rows4, key j of channel x
 *           at (j / 4) * 4 w + 4 x + j % 4; rows4 = seq_k rounded up to 4,
 *           zero past seq_k and past head_dim_v;
 *   scale   [ceil(seq_k / chunk)][head_dim_v_pad] f32, each chunk's
 *           channel scales sv (0 past head_dim_v). */
typedef struct fa_i8_values {
    int8_t *panels;
    float *scale;
} fa_i8_values;

static inline fa_i8_values fa_i8_values_of(const fa_fwd_plan *plan, void *area) {
    fa_i8_values v;
    v.panels = (int8_t *)fa_region_at(&plan->group, area, FA_FWD_GROUP_V8, 0);
    v.scale = (float *)fa_region_at(&plan->group, area, FA_FWD_GROUP_VSCALE, 0);
    return v;
}

/* Rows [j0, j1) of one chunk of V (as fa_pack_k_i8's) quantised per
 * channel into dst. tmp: fa_pack_chunk * head_dim_v_pad floats, then
 * 2 head_dim_v_pad words. */
void fa_pack_v_i8(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                  int64_t j0, int64_t j1, const fa_i8_values *dst, void *tmp);

/* x[0..n) rounded to bf16 values in place (nearest even, by the table's
 * exact store and load): P and V of pb->bf16_pv on a table without
 * bf16 dot products. */
static inline void fa_round_bf16(const fa_kernels *kern, float *x, int64_t n) {
    uint16_t b[64];
    for (int64_t i = 0; i < n; i += 64) {
        const int64_t m = n - i < 64 ? n - i : 64;
        kern->store(b, FLASHATTN_BF16, x + i, m, 1.0f);
        kern->load(x + i, b, FLASHATTN_BF16, m, 1.0f);
    }
}

/* Rows [j0, j1) of V packed by fa_pack_v, rounded to bf16 values. */
void fa_round_v_bf16(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t j0,
                     int64_t j1, float *dst);

/* Query row x (head_dim floats, already scaled; left as it is) as
 * gemm_i8's A row (4 k4 bytes, q + 128, 128 past head_dim) and its scale,
 * on kern's quant_i8_row. */
void fa_i8_q_row(const fa_problem *pb, const fa_kernels *kern, float *x, uint8_t *a, float *scale);

#endif
