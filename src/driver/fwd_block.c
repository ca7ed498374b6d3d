/*
 * One q-block of the forward pass: the loop of the FlashAttention paper.
 *
 *   for each kv-block the rows can see:
 *       S   = Q K^T            (Q pre-scaled by scale*log2(e): base-2 logits)
 *       mask S, only on kv-blocks that cut a row's visible range
 *       m'  = max(m, rowmax S);  P = exp2(S - m');  l = l*2^(m-m') + rowsum P
 *       acc = acc*2^(m-m') + P V  (rescale skipped when m did not change)
 *   O = acc / l;  LSE = ln2 * (m + log2 l)
 */
#include <math.h>
#include <string.h>

#include "driver/fwd.h"
#include "driver/pack.h"

#define FA_LN2 0.69314718055994530942

static size_t round16(size_t x) { return (x + 15) / 16 * 16; }

/* -inf outside [lo, end) for the row's keys [j0, j0 + n). */
static void mask_row(float *s, int64_t j0, int64_t n, int64_t lo, int64_t end) {
    for (int64_t j = 0; j < n && j0 + j < lo; j++) s[j] = -INFINITY;
    for (int64_t j = end - j0 > 0 ? end - j0 : 0; j < n; j++) s[j] = -INFINITY;
}

void fa_fwd_block(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern,
                  int64_t b, int64_t h, int64_t i0, int64_t i1, const float *kp,
                  const float *vp, float *tw) {
    const int64_t d = pb->head_dim, dp = pb->head_dim_pad;
    const int64_t bm = plan->block_m, bn = plan->block_n;
    const int mr = kern->mr, nr = kern->nr;
    const int m = (int)(i1 - i0);
    float *qt = tw;
    float *st = qt + round16((size_t)(bm * d));
    float *acc = st + round16((size_t)(bm * bn));
    float *mx = acc + round16((size_t)(bm * dp));
    float *ls = mx + round16((size_t)bm);

    for (int r = 0; r < m; r++) {
        kern->load(qt + r * d, fa_row_ptr(pb->q, b, i0 + r, h), pb->q->dtype, d, pb->scale_log2);
        mx[r] = -INFINITY;
        ls[r] = 0.0f;
    }

    const int64_t j_lo = fa_key_lo(pb, i0), j_end = fa_key_end(pb, i1 - 1);
    int first = 1;
    for (int64_t j0 = j_lo / bn * bn; j0 < j_end; j0 += bn) {
        const int64_t j1 = j0 + bn < pb->seq_k ? j0 + bn : pb->seq_k;
        const int64_t ncols = j1 - j0, ncols16 = (int64_t)round16((size_t)ncols);
        /* S = Q K^T over whole nr-key panels; zero-padded keys give S = 0
         * in columns past ncols, which nothing below reads. */
        for (int64_t c = 0; c < ncols16; c += nr) {
            const int n = (int)(ncols16 - c < nr ? ncols16 - c : nr);
            const float *panel = kp + (j0 + c) / nr * nr * d;
            for (int r = 0; r < m; r += mr)
                kern->gemm(m - r < mr ? m - r : mr, n, d, qt + r * d, d, panel, nr,
                           st + r * bn + c, bn, 0);
        }
        /* Only blocks that cut some row's visible range need the mask. */
        const int full = fa_key_lo(pb, i1 - 1) <= j0 && fa_key_end(pb, i0) >= j1;
        for (int r = 0; r < m; r++) {
            float *row = st + r * bn;
            if (!full) mask_row(row, j0, ncols, fa_key_lo(pb, i0 + r), fa_key_end(pb, i0 + r));
            const float bmax = kern->row_max(row, ncols);
            const float mnew = bmax > mx[r] ? bmax : mx[r];
            if (mnew == -INFINITY) {
                /* Nothing visible to this row yet: P = 0, and keep m = -inf
                 * (exp2(-inf - -inf) would be NaN). */
                memset(row, 0, (size_t)ncols * sizeof(float));
                continue;
            }
            const float alpha = exp2f(mx[r] - mnew); /* 0 when m was -inf */
            ls[r] = ls[r] * alpha + kern->exp2_sum(row, ncols, mnew);
            if (!first && alpha != 1.0f) kern->scale(acc + r * dp, dp, alpha);
            mx[r] = mnew;
        }
        /* acc (+)= P V; the first block overwrites, so acc needs no clearing. */
        for (int64_t c = 0; c < dp; c += nr) {
            const int n = (int)(dp - c < nr ? dp - c : nr);
            for (int r = 0; r < m; r += mr)
                kern->gemm(m - r < mr ? m - r : mr, n, ncols, st + r * bn, bn,
                           vp + c * pb->seq_k + j0 * n, n, acc + r * dp + c, dp, !first);
        }
        first = 0;
    }

    for (int r = 0; r < m; r++) {
        void *orow = (void *)fa_row_ptr(pb->o, b, i0 + r, h);
        float lse;
        if (ls[r] == 0.0f) {
            /* The row saw no key: O = 0, LSE = -inf. */
            memset(acc + r * dp, 0, (size_t)d * sizeof(float));
            kern->store(orow, pb->o->dtype, acc + r * dp, d, 1.0f);
            lse = -INFINITY;
        } else {
            kern->store(orow, pb->o->dtype, acc + r * dp, d, 1.0f / ls[r]);
            lse = (float)(FA_LN2 * ((double)mx[r] + log2((double)ls[r])));
        }
        if (pb->lse) pb->lse[(b * pb->heads_q + h) * pb->seq_q + i0 + r] = lse;
    }
}
