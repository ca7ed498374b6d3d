/*
 * One q-block of the forward pass: the loop of the FlashAttention paper.
 *
 *   for each kv-block the rows can see:
 *       S   = Q K^T            (Q pre-scaled by scale*log2(e): base-2 logits)
 *       mask S, only on kv-blocks that cut a row's visible range
 *       m'  = max(m, rowmax S);  P = exp2(S - m');  l = l*2^(m-m') + rowsum P
 *       acc = acc*2^(m-m') + P V  (rescale skipped when m did not change)
 *   O = acc / l;  LSE = ln2 * (m + log2 l)
 *
 * On the bf16 dot-product route (plan->bf16_dot) the products run on
 * gemm_bf16: Q's bf16 rows as given, the scale applied to S in f32 by the
 * GEMM, and P rounded to bf16 after the f32 softmax (the row sums l stay
 * those of the f32 P), like FlashAttention-2 on GPUs.
 */
#include <math.h>
#include <string.h>

#include "driver/fwd.h"
#include "driver/pack.h"
#include "driver/softmax_row.h"

#define FA_LN2 0.69314718055994530942

static size_t round16(size_t x) { return (x + 15) / 16 * 16; }

/* Columns of the kv-block [j0, j1) that query rows [s0, s1) compute: 0
 * when no row sees the block, else up to the last row's end rounded up to
 * FA_EXP2_SUM_GRAIN (key ranges move right with the row). */
static int64_t strip_cols(const fa_problem *pb, int64_t s0, int64_t s1, int64_t j0, int64_t j1) {
    const int64_t s_end = fa_key_end(pb, s1 - 1);
    if (s_end <= j0 || fa_key_lo(pb, s0) >= j1) return 0;
    if (s_end >= j1) return j1 - j0;
    const int64_t g = FA_EXP2_SUM_GRAIN, need = (s_end - j0 + g - 1) / g * g;
    return need < j1 - j0 ? need : j1 - j0;
}

/* The block, for one route: dot is a literal at both call sites below, so
 * each route compiles to its own copy and the f32 one carries no test of
 * it (at seq 16 those tests cost 0.9% of the instructions). */
static inline __attribute__((always_inline)) void block(const fa_problem *pb,
                                                       const fa_fwd_plan *plan,
                                                       const fa_kernels *kern, int64_t b,
                                                       int64_t h, int64_t i0, int64_t i1,
                                                       const float *kp, const float *vp,
                                                       float *tw, const int dot) {
    const int64_t d = pb->head_dim, dp = pb->head_dim_pad;
    const int64_t bm = plan->block_m, bn = plan->block_n;
    const int mr = kern->mr, nr = kern->nr;
    const int m = (int)(i1 - i0);
    float *qt = tw;
    float *st = qt + round16((size_t)(bm * d));
    float *acc = st + round16((size_t)(bm * bn));
    float *mx = acc + round16((size_t)(bm * dp));
    float *ls = mx + round16((size_t)bm);
    /* Dot route: Q rows as bf16 pairs in Q's place, and P's bf16 copy. */
    const int64_t dh = (d + 1) / 2, kh = (pb->seq_k + 1) / 2;
    uint16_t *q16 = (uint16_t *)qt, *p16 = (uint16_t *)(ls + round16((size_t)bm));

    for (int r = 0; r < m; r++) {
        const void *qrow = fa_row_ptr(pb->q, b, i0 + r, h);
        fa_prefetch_rows_ahead(pb->q, qrow, FA_ROW_AHEAD);
        if (dot) {
            memcpy(q16 + r * 2 * dh, qrow, (size_t)d * sizeof(uint16_t));
            if (d & 1) q16[r * 2 * dh + d] = 0;
        } else {
            kern->load(qt + r * d, qrow, pb->q->dtype, d, pb->scale_log2);
        }
        mx[r] = -INFINITY;
        ls[r] = 0.0f;
    }

    /* Under masks each strip of mr rows (one register tile) visits only
     * the kv-blocks its rows see, and in a block only the columns up to
     * its last row's end, rounded up to FA_EXP2_SUM_GRAIN: the columns
     * left out are -inf for every row of the strip, which add exact zeros
     * to the row sums (kernels.h), nothing to the row max, and nothing to
     * P V (acc starts at +0 and is never -0). A row's result therefore
     * depends only on block_n, never on block_m or on its strip. */
    const int64_t j_lo = fa_key_lo(pb, i0), j_end = fa_key_end(pb, i1 - 1);
    /* Each strip's column count in the current kv-block, worked out once
     * per block rather than in each of the loops below (at short
     * sequences those recomputations cost as much as the softmax). At most
     * one strip per row: block_m <= FA_MAX_BLOCK. */
    int32_t cols[FA_MAX_BLOCK];
    uint8_t first[FA_MAX_BLOCK]; /* the strip's first block: it overwrites acc */
    const int strips = (m + mr - 1) / mr;
    for (int64_t j0 = j_lo / bn * bn; j0 < j_end; j0 += bn) {
        const int64_t j1 = j0 + bn < pb->seq_k ? j0 + bn : pb->seq_k;
        int64_t ncols_max = 0;
        for (int s = 0; s < strips; s++) {
            const int r0 = s * mr, mm = m - r0 < mr ? m - r0 : mr;
            cols[s] = (int32_t)strip_cols(pb, i0 + r0, i0 + r0 + mm, j0, j1);
            first[s] = j0 == fa_key_lo(pb, i0 + r0) / bn * bn;
            if (cols[s] > ncols_max) ncols_max = cols[s];
        }
        /* S = Q K^T over whole nr-key panels, each panel for the strips
         * that need it; zero-padded keys give S = 0 in columns past a
         * strip's count, which nothing below reads. */
        for (int64_t c = 0; c < ncols_max; c += nr) {
            const float *panel = kp + (j0 + c) / nr * nr * d;
            const uint32_t *pairs = (const uint32_t *)kp + (j0 + c) / nr * nr * dh;
            for (int s = 0; s < strips; s++) {
                const int r0 = s * mr, mm = m - r0 < mr ? m - r0 : mr;
                const int64_t nc16 = (int64_t)round16((size_t)cols[s]);
                if (c >= nc16) continue;
                const int n = (int)(nc16 - c < nr ? nc16 - c : nr);
                if (dot)
                    kern->gemm_bf16(mm, n, dh, q16 + r0 * 2 * dh, 2 * dh, pairs, nr,
                                    st + r0 * bn + c, bn, 0, pb->scale_log2);
                else
                    kern->gemm(mm, n, d, qt + r0 * d, d, panel, nr, st + r0 * bn + c, bn, 0);
            }
        }
        for (int s = 0; s < strips; s++) {
            const int r0 = s * mr, mm = m - r0 < mr ? m - r0 : mr;
            const int64_t ncols = cols[s];
            if (!ncols) continue;
            /* Only blocks that cut some row's visible range need the mask. */
            const int full = fa_key_lo(pb, i0 + r0 + mm - 1) <= j0 && fa_key_end(pb, i0 + r0) >= j0 + ncols;
            float bmax[FA_MAX_MR];
            for (int r = r0; r < r0 + mm; r++)
                bmax[r - r0] = fa_softmax_row_max(kern, st + r * bn, j0, ncols, !full,
                                                  fa_key_lo(pb, i0 + r), fa_key_end(pb, i0 + r));
            for (int r = r0; r < r0 + mm; r++) {
                fa_softmax_row_exp(kern, st + r * bn, ncols, bmax[r - r0], &mx[r], &ls[r],
                                   acc + r * dp, dp, first[s]);
                if (dot) {
                    /* an odd count (the last keys) gets a zero partner */
                    kern->store(p16 + r * bn, FLASHATTN_BF16, st + r * bn, ncols, 1.0f);
                    if (ncols & 1) p16[r * bn + ncols] = 0;
                }
            }
        }
        /* acc (+)= P V, each strip over its own columns. */
        for (int64_t c = 0; c < dp; c += nr) {
            const int n = (int)(dp - c < nr ? dp - c : nr);
            for (int s = 0; s < strips; s++) {
                const int r0 = s * mr, mm = m - r0 < mr ? m - r0 : mr;
                if (!cols[s]) continue;
                if (dot)
                    kern->gemm_bf16(mm, n, (cols[s] + 1) / 2, p16 + r0 * bn, bn,
                                    (const uint32_t *)vp + c * kh + j0 / 2 * n, n,
                                    acc + r0 * dp + c, dp, !first[s], 1.0f);
                else
                    kern->gemm(mm, n, cols[s], st + r0 * bn, bn,
                               vp + c * pb->seq_k + j0 * n, n, acc + r0 * dp + c, dp, !first[s]);
            }
        }
    }

    if (dot && kern->gemm_bf16_done) kern->gemm_bf16_done();

    for (int r = 0; r < m; r++) {
        void *orow = (void *)fa_row_ptr(pb->o, b, i0 + r, h);
        if (ls[r] == 0.0f) {
            /* The row saw no key: O = 0, LSE = -inf. */
            memset(acc + r * dp, 0, (size_t)d * sizeof(float));
            kern->store(orow, pb->o->dtype, acc + r * dp, d, 1.0f);
        } else {
            kern->store(orow, pb->o->dtype, acc + r * dp, d, 1.0f / ls[r]);
        }
        /* (log2 in double costs as much as a short row's softmax: only when asked) */
        if (pb->lse)
            pb->lse[(b * pb->heads_q + h) * pb->seq_q + i0 + r] =
                ls[r] == 0.0f ? -INFINITY
                              : (float)(FA_LN2 * ((double)mx[r] + log2((double)ls[r])));
    }
}

void fa_fwd_block(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern,
                  int64_t b, int64_t h, int64_t i0, int64_t i1, const float *kp,
                  const float *vp, float *tw) {
    if (plan->bf16_dot)
        block(pb, plan, kern, b, h, i0, i1, kp, vp, tw, 1);
    else
        block(pb, plan, kern, b, h, i0, i1, kp, vp, tw, 0);
}
