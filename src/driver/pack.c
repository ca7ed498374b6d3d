/* K/V packing: O(seq_k * head_dim) per group, done once per call. */
#include "driver/pack.h"

#include <string.h>

void fa_pack_k(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
               int64_t j0, int64_t j1, float *dst) {
    const int64_t d = pb->head_dim, nr = kern->nr;
    /* A final partial panel is cleared whole first (the transposing copy
     * writes only its keys): the unused keys must be zero, and one memset
     * of the panel costs less than one per column. */
    if (j1 == seq->seq_k && j1 % nr)
        memset(dst + (j1 / nr) * nr * d, 0, (size_t)(nr * d) * sizeof(float));
    for (int64_t j = j0; j < j1; j += nr) {
        const int rows = (int)(j1 - j < nr ? j1 - j : nr);
        kern->transpose(dst + (j / nr) * nr * d, nr, fa_row_ptr(pb->k, seq->kb, seq->k0 + j, hk),
                        pb->k->stride_seq, pb->k->dtype, rows, d);
    }
}

void fa_pack_v(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
               int64_t j0, int64_t j1, float *dst) {
    /* the sequence's own rows: a short sequence of a varlen batch packs as
     * compactly as a dense call on it */
    const int64_t d = pb->head_dim_v, dp = pb->head_dim_v_pad, rows = seq->seq_k, nr = kern->nr;
    const int64_t es = fa_dtype_bytes(pb->v->dtype);
    const int f32 = pb->v->dtype == FLASHATTN_F32;
    for (int64_t j = j0; j < j1; j++) {
        const char *vrow = (const char *)fa_row_ptr(pb->v, seq->kb, seq->k0 + j, hk);
        fa_prefetch_rows_ahead(pb->v, vrow, FA_ROW_AHEAD);
        /* each panel's piece widened straight into it, not through a row
         * buffer and a memcpy call per panel */
        for (int64_t c = 0; c < dp; c += nr) {
            const int64_t w = dp - c < nr ? dp - c : nr, in = d - c < w ? (d > c ? d - c : 0) : w;
            float *out = dst + c * rows + j * w;
            if (f32 && in == w) fa_panel_row(out, (const float *)vrow + c, w);
            else if (in > 0) kern->load(out, vrow + c * es, pb->v->dtype, in, 1.0f);
            if (in < w) memset(out + in, 0, (size_t)(w - in) * sizeof(float));
        }
    }
}

void fa_pack_k_pairs(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                     int64_t j0, int64_t j1, uint32_t *dst) {
    const int64_t d = pb->head_dim, dh = (d + 1) / 2, nr = kern->nr;
    for (int64_t j = j0; j < j1; j++)
        fa_pairs_down(dst + (j / nr) * nr * dh + j % nr, nr,
                      fa_row_ptr(pb->k, seq->kb, seq->k0 + j, hk), d);
    if (j1 == seq->seq_k && j1 % nr) {
        uint32_t *panel = dst + (j1 / nr) * nr * dh;
        for (int64_t p = 0; p < dh; p++)
            memset(panel + p * nr + j1 % nr, 0, (size_t)(nr - j1 % nr) * sizeof(uint32_t));
    }
}

/* Keys (j, j + 1) of V as pairs into every column panel (fa_pack_v_pairs). */
static void pair_rows(const fa_problem *pb, const fa_kernels *kern, int64_t kh, int64_t j,
                      const uint16_t *r0, const uint16_t *r1, uint32_t keep, uint32_t *dst) {
    const int64_t d = pb->head_dim_v, dp = pb->head_dim_v_pad, nr = kern->nr;
    for (int64_t c = 0; c < dp; c += nr) {
        const int64_t w = dp - c < nr ? dp - c : nr, in = d - c < w ? (d > c ? d - c : 0) : w;
        uint32_t *out = dst + c * kh + (j / 2) * w;
        for (int64_t x = 0; x < in; x++) out[x] = r0[c + x] | (r1[c + x] & keep) << 16;
        for (int64_t x = in; x < w; x++) out[x] = 0;
    }
}

void fa_pack_v_pairs(const fa_problem *pb, const fa_kernels *kern, const fa_seq *seq, int64_t hk,
                     int64_t j0, int64_t j1, uint32_t *dst, void *tmp) {
    const int64_t d = pb->head_dim_v, kh = (seq->seq_k + 1) / 2;
    const int round = pb->v->dtype != FLASHATTN_BF16;
    float *wide = (float *)tmp;
    uint16_t *b0 = round ? (uint16_t *)(wide + d) : NULL, *b1 = round ? b0 + d : NULL;
    for (int64_t j = j0; j < j1; j += 2) {
        /* the key past an odd seq_k reads row j again, masked to zero */
        const int last = j + 1 >= seq->seq_k;
        const void *v0 = fa_row_ptr(pb->v, seq->kb, seq->k0 + j, hk);
        const void *v1 = last ? v0 : fa_row_ptr(pb->v, seq->kb, seq->k0 + j + 1, hk);
        fa_prefetch_rows_ahead(pb->v, v0, FA_ROW_AHEAD);
        if (round) { /* rounded to bf16 (nearest even) from the exact widening */
            kern->load(wide, v0, pb->v->dtype, d, 1.0f);
            kern->store(b0, FLASHATTN_BF16, wide, d, 1.0f);
            kern->load(wide, v1, pb->v->dtype, d, 1.0f);
            kern->store(b1, FLASHATTN_BF16, wide, d, 1.0f);
            v0 = b0, v1 = b1;
        }
        pair_rows(pb, kern, kh, j, (const uint16_t *)v0, (const uint16_t *)v1, last ? 0u : 0xffffu, dst);
    }
}
