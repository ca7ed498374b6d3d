/* The 8-bit Q K^T's and P V's packing and quantisation (driver/int8_qk.h). */
#include "driver/int8_qk.h"

#include <string.h>

#include "core/quant.h"

void fa_pack_k_i8(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                  int64_t j0, int64_t j1, const fa_i8_keys *dst, void *tmp) {
    const int64_t d = pb->head_dim, k4 = fa_i8_k4(pb), nr = kern->nr;
    double *sum = (double *)tmp;
    float *rows = (float *)(sum + d); /* the chunk's rows, read once */
    float *mean = dst->mean + j0 / fa_pack_chunk(kern) * d;
    int64_t count = 0;
    memset(sum, 0, (size_t)d * sizeof(double));
    for (int64_t j = j0; j < j1; j++) {
        const void *krow = fa_row_ptr(pb->k, seq->kb, seq->k0 + j, hk);
        fa_prefetch_rows_ahead(pb->k, krow, FA_ROW_AHEAD);
        float *x = rows + (j - j0) * d;
        kern->load(x, krow, pb->k->dtype, d, 1.0f);
        fa_i8_mean_add(sum, &count, x, d);
    }
    fa_i8_mean_get(mean, sum, count, d);
    /* the last panel's keys past seq_k, and every panel's bytes past
     * head_dim, are zero: clear the chunk's panels whole first */
    const int64_t p0 = j0 / nr, p1 = (j1 + nr - 1) / nr;
    memset(dst->panels + p0 * nr * k4 * 4, 0, (size_t)((p1 - p0) * nr * k4 * 4));
    for (int64_t j = j1; j < p1 * nr; j++) dst->sum[j] = 0, dst->scale[j] = 0.0f;
    int8_t row[4 * FLASHATTN_MAX_HEAD_DIM];
    for (int64_t j = j0; j < j1; j++) {
        kern->quant_i8_row(rows + (j - j0) * d, mean, d, row, &dst->scale[j]);
        for (int64_t t = d; t < 4 * k4; t++) row[t] = 0;
        int8_t *panel = dst->panels + (j / nr) * nr * k4 * 4 + (j % nr) * 4;
        for (int64_t g = 0; g < k4; g++) memcpy(panel + g * nr * 4, row + 4 * g, 4);
        int32_t s = 0;
        for (int64_t t = 0; t < d; t++) s += row[t];
        dst->sum[j] = s;
    }
}

void fa_i8_q_row(const fa_problem *pb, const fa_kernels *kern, float *x, uint8_t *a, float *scale) {
    const int64_t d = pb->head_dim, k4 = fa_i8_k4(pb);
    int8_t q[4 * FLASHATTN_MAX_HEAD_DIM];
    kern->quant_i8_row(x, NULL, d, q, scale);
    for (int64_t t = 0; t < d; t++) a[t] = (uint8_t)(q[t] + 128);
    for (int64_t t = d; t < 4 * k4; t++) a[t] = 128;
}

void fa_round_v_bf16(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t j0,
                     int64_t j1, float *dst) {
    const int64_t dp = pb->head_dim_v_pad, rows = seq->seq_k, nr = kern->nr;
    for (int64_t c = 0; c < dp; c += nr) {
        const int64_t w = dp - c < nr ? dp - c : nr;
        fa_round_bf16(kern, dst + c * rows + j0 * w, (j1 - j0) * w);
    }
}

void fa_pack_v_i8(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                  int64_t j0, int64_t j1, const fa_i8_values *dst, void *tmp) {
    const int64_t dv = pb->head_dim_v, dp = pb->head_dim_v_pad, nr = kern->nr;
    const int64_t rows4 = (seq->seq_k + 3) / 4 * 4, n = j1 - j0;
    float *rows = (float *)tmp; /* the chunk's rows, read once */
    uint32_t *amax = (uint32_t *)(rows + fa_pack_chunk(kern) * dp);
    float *inv = (float *)(amax + dp);
    for (int64_t j = j0; j < j1; j++) {
        const void *vrow = fa_row_ptr(pb->v, seq->kb, seq->k0 + j, hk);
        fa_prefetch_rows_ahead(pb->v, vrow, FA_ROW_AHEAD);
        kern->load(rows + (j - j0) * dp, vrow, pb->v->dtype, dv, 1.0f);
    }
    for (int64_t c = 0; c < dv; c++) amax[c] = 0;
    for (int64_t j = 0; j < n; j++) kern->amax_acc(rows + j * dp, dv, amax);
    float *scale = dst->scale + j0 / fa_pack_chunk(kern) * dp;
    int tiny = 0; /* a channel whose factor overflows: fa_i8_put's own path */
    for (int64_t c = 0; c < dp; c++) {
        scale[c] = c < dv ? fa_i8_col_scale(amax[c], &inv[c]) : (inv[c] = 0.0f);
        tiny |= inv[c] > 3.4028234663852886e38f;
    }
    /* the chunk's whole groups of 4 keys (j0 is a multiple of 4), each row
     * quantised whole, then spread into the panels; past seq_k, zeros */
    const int64_t end = j1 == seq->seq_k ? rows4 : j1;
    int8_t q[4][FLASHATTN_MAX_HEAD_DIM + 64]; /* head_dim_v_pad bytes */
    for (int64_t g = j0; g < end; g += 4) {
        for (int64_t r = 0; r < 4; r++) {
            const float *x = rows + (g + r - j0) * dp;
            if (g + r >= j1) memset(q[r], 0, (size_t)dp);
            else if (!tiny) kern->quant_i8_with(x, inv, dp, q[r]);
            else
                for (int64_t c = 0; c < dp; c++) q[r][c] = fa_i8_put(x[c], amax[c], inv[c]);
        }
        for (int64_t c = 0; c < dp; c += nr) {
            const int64_t w = dp - c < nr ? dp - c : nr;
            int8_t *out = dst->panels + c * rows4 + g * w;
            for (int64_t t = 0; t < w; t++)
                for (int64_t r = 0; r < 4; r++) out[4 * t + r] = q[r][c + t];
        }
    }
}
