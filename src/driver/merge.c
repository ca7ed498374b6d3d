/*
 * Merging partials, one output row at a time:
 *
 *   M = max_n LSE_n,  w_n = exp(LSE_n - M)  (the largest weight is 1)
 *   O = (sum_n w_n O_n) / (sum_n w_n),  LSE = M + log(sum_n w_n)
 *
 * Parts whose LSE is -inf saw no key: they are skipped, not read (their O
 * may be anything). A NaN LSE in any part makes the row NaN. The weighted sum is a GEMM of one row: the weights
 * times up to FA_MERGE_BATCH part rows widened to f32, accumulated over
 * batches, so any number of parts takes a fixed amount of stack.
 */
#include "driver/merge.h"

#include <math.h>
#include <string.h>

#include "core/tensor.h"

#define FA_MERGE_BATCH 16

/* acc (=, +=) w[0..k) . rows[0..k) over the padded row width dp. */
static void weighted_sum(const fa_kernels *kern, int k, const float *w, const float *rows,
                         int64_t dp, float *acc, int accumulate) {
    for (int64_t c = 0; c < dp; c += kern->nr) {
        const int n = (int)(dp - c < kern->nr ? dp - c : kern->nr);
        kern->gemm(1, n, k, w, k, rows + c, dp, acc + c, dp, accumulate);
    }
}

void fa_merge_rows(const fa_kernels *kern, const fa_merge_job *job, int64_t t0, int64_t t1) {
    const flashattn_tensor *o = job->o;
    const int64_t heads = o->heads, seq = o->seqlen, d = o->head_dim;
    const int64_t dp = (d + FA_COL_ALIGN - 1) / FA_COL_ALIGN * FA_COL_ALIGN;
    float rows[FA_MERGE_BATCH * FLASHATTN_MAX_HEAD_DIM] __attribute__((aligned(64)));
    float acc[FLASHATTN_MAX_HEAD_DIM] __attribute__((aligned(64)));
    float w[FA_MERGE_BATCH];
    /* load() writes d columns; the GEMM reads dp, so the pad must be finite */
    for (int k = 0; k < FA_MERGE_BATCH; k++)
        memset(rows + k * dp + d, 0, (size_t)(dp - d) * sizeof(float));

    for (int64_t t = t0; t < t1; t++) {
        const int64_t b = t / (heads * seq), h = t / seq % heads, i = t % seq;
        void *orow = (void *)fa_row_ptr(o, b, i, h);
        float mx = -INFINITY;
        int nan = 0;
        for (int64_t s = 0; s < job->n; s++) {
            const float l = job->lse_parts[s][t];
            nan |= l != l;
            if (l > mx) mx = l;
        }
        if (nan) { /* a part that met a NaN: so does the row */
            for (int64_t c = 0; c < d; c++) acc[c] = NAN;
            kern->store(orow, o->dtype, acc, d, 1.0f);
            if (job->lse) job->lse[t] = NAN;
            continue;
        }
        if (mx == -INFINITY) {
            /* no part saw a key for this row */
            memset(acc, 0, (size_t)d * sizeof(float));
            kern->store(orow, o->dtype, acc, d, 1.0f);
            if (job->lse) job->lse[t] = -INFINITY;
            continue;
        }
        double sum = 0.0;
        int k = 0, first = 1;
        for (int64_t s = 0; s < job->n; s++) {
            const float l = job->lse_parts[s][t];
            if (l == -INFINITY) continue;
            w[k] = (float)exp((double)l - (double)mx);
            sum += w[k];
            const flashattn_tensor *part = &job->parts[s];
            kern->load(rows + k * dp, fa_row_ptr(part, b, i, h), part->dtype, d, 1.0f);
            if (++k == FA_MERGE_BATCH) {
                weighted_sum(kern, k, w, rows, dp, acc, !first);
                first = 0;
                k = 0;
            }
        }
        if (k) weighted_sum(kern, k, w, rows, dp, acc, !first);
        kern->store(orow, o->dtype, acc, d, (float)(1.0 / sum));
        if (job->lse) job->lse[t] = (float)((double)mx + log(sum));
    }
}

void fa_merge_run(const fa_kernels *kern, const fa_merge_job *job, int threads) {
    const int64_t rows = job->o->batch * job->o->heads * job->o->seqlen;
    const int64_t units = (rows + FA_MERGE_ROWS - 1) / FA_MERGE_ROWS;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t u = 0; u < units; u++) {
        const int64_t t0 = u * FA_MERGE_ROWS;
        fa_merge_rows(kern, job, t0, t0 + FA_MERGE_ROWS < rows ? t0 + FA_MERGE_ROWS : rows);
    }
}
