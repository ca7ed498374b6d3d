/*
 * Decode driver, one parallel region in three phases:
 *   1. append k_new / v_new into the cache (then a barrier: every item
 *      may read the new rows);
 *   2. work items (sequence, query tile, split, kv-head block), dynamically
 *      scheduled; with one split they write O and LSE directly, else each
 *      writes its split's partial (O, LSE) into the workspace;
 *   3. with several splits, after a barrier, the exact merge of the
 *      partials (the same code as flashattn_merge) into O and LSE.
 * The kv-head block is the innermost item index so that threads running
 * at the same time read neighbouring parts of a [seq, heads_kv, dim] cache.
 * Nothing is allocated here: every buffer is a slice of the workspace.
 */
#include "driver/decode.h"

#include <stdint.h>
#include <string.h>

#include "core/quant.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "driver/merge.h"

/* A new row x[0..d) of kv-head hk into an 8-bit cache row: with its own
 * scale, computed and stored beside it, or the fixed ones (core/quant.h). */
static void quantise_row(const fa_decode_problem *dp, int t, const fa_seq *seq, int64_t row, int64_t hk,
                         void *to, const float *x, int64_t d) {
    const flashattn_dtype dt = t ? dp->base.v->dtype : dp->base.k->dtype;
    if (fa_scale_per_token(dp, t)) {
        float *s = fa_cache_scale(dp, t, seq, row, hk);
        *s = fa_quant_token_scale(x, d, dt);
        fa_quant_row(to, dt, x, d, s, 0);
    } else {
        int64_t step;
        const float *s = fa_scale_fixed(dp, t, hk, &step);
        fa_quant_row(to, dt, x, d, s, step);
    }
}

void fa_decode_append(const fa_decode_problem *dp, const fa_kernels *kern, int64_t b, int64_t j,
                      float *tmp) {
    const fa_problem *pb = &dp->base;
    const fa_seq seq = fa_seq_of(pb, b);
    const int64_t row = fa_kv_given(pb, b) + j;
    const flashattn_tensor *src[2] = {dp->k_new, dp->v_new}, *dst[2] = {pb->k, pb->v};
    if (j >= fa_kv_added(pb, b)) return;
    for (int64_t hk = 0; hk < pb->heads_kv; hk++)
        for (int t = 0; t < 2; t++) {
            const int64_t d = t ? pb->head_dim_v : pb->head_dim;
            const void *from = fa_row_ptr(src[t], seq.qb, seq.q0 + j, hk);
            void *to = fa_cache_row(dp, dst[t], &seq, row, hk);
            if (fa_dtype_quant(dst[t]->dtype)) {
                kern->load(tmp, from, src[t]->dtype, d, 1.0f);
                if (t == 0 && dp->rot_cos) fa_rotary_row(dp, tmp, seq.k0 + row);
                quantise_row(dp, t, &seq, row, hk, to, tmp, d);
            } else if (t == 0 && dp->rot_cos) { /* K rotated at its position */
                kern->load(tmp, from, src[t]->dtype, d, 1.0f);
                fa_rotary_row(dp, tmp, seq.k0 + row); /* its cache row */
                kern->store(to, dst[t]->dtype, tmp, d, 1.0f);
            } else if (src[t]->dtype == dst[t]->dtype) {
                memcpy(to, from, (size_t)d * (size_t)fa_dtype_bytes(dst[t]->dtype));
            } else {
                kern->load(tmp, from, src[t]->dtype, d, 1.0f);
                kern->store(to, dst[t]->dtype, tmp, d, 1.0f);
            }
        }
}

/* What every thread of a decode call shares. */
typedef struct {
    const fa_decode_problem *dp;
    const fa_decode_plan *plan;
    const fa_kernels *kern;
    void *base;
    const flashattn_tensor *parts;
    const float *const *part_lse;
    const fa_merge_job *job;
    int64_t appends, per_seq, items, merge_rows, merge_units;
} decode_run_state;

/* One thread's share: the appends, the items, the merge, each loop ending
 * in its barrier (orphaned: bound to the region fa_decode_run opens, or
 * to the calling thread alone). */
static void run_share(const decode_run_state *r) {
    const fa_decode_problem *dp = r->dp;
    const fa_decode_plan *plan = r->plan;
    const fa_kernels *kern = r->kern;
    const fa_problem *pb = &dp->base;
    const int splits = plan->num_splits;
    void *tw = fa_region_at(&plan->ws, r->base, FA_DECODE_WS_THREADS, (size_t)fa_thread_id());
    /* the thread's tiles are free during the appends (Q alone holds d floats) */
    float *tmp = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_Q, 0);
    int wide_pad = -1;
#pragma omp for schedule(static)
    for (int64_t it = 0; it < r->appends; it++)
        fa_decode_append(dp, kern, it / dp->seq_new, it % dp->seq_new, tmp);
    /* implicit barrier: the new rows are in the cache */
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < r->items; it++) {
        const int64_t b = it / r->per_seq, q = it % r->per_seq;
        const int64_t hblock = q % plan->head_blocks;
        const int split = (int)(q / plan->head_blocks % splits);
        const int64_t qtile = q / plan->head_blocks / splits;
        if (splits > 1)
            fa_decode_item(dp, plan, kern, b, hblock, qtile, split, &r->parts[split],
                           (float *)r->part_lse[split], tw, &wide_pad);
        else
            fa_decode_item(dp, plan, kern, b, hblock, qtile, 0, pb->o, pb->lse, tw, &wide_pad);
    }
    /* implicit barrier: every split's partials are written */
#pragma omp for schedule(static)
    for (int64_t u = 0; u < r->merge_units; u++) {
        const int64_t t0 = u * FA_MERGE_ROWS;
        fa_merge_rows(kern, r->job, t0, t0 + FA_MERGE_ROWS < r->merge_rows ? t0 + FA_MERGE_ROWS : r->merge_rows);
    }
}

void fa_decode_run(const fa_decode_problem *dp, const fa_decode_plan *plan,
                   const fa_kernels *kern, void *ws) {
    const fa_problem *pb = &dp->base;
    void *base = fa_layout_base(ws);
    const int splits = plan->num_splits;

    /* Split s's partials: an f32 O shaped like the user's, rows padded to
     * head_dim_v_pad, and an LSE array laid out like the user's. */
    flashattn_tensor parts[FLASHATTN_MAX_SPLITS];
    const float *part_lse[FLASHATTN_MAX_SPLITS];
    const int64_t dpad = pb->head_dim_v_pad;
    for (int s = 0; splits > 1 && s < splits; s++) {
        void *area = fa_region_at(&plan->ws, base, FA_DECODE_WS_PARTS, (size_t)s);
        float *o = (float *)fa_region_at(&plan->part, area, FA_DECODE_PART_O, 0);
        flashattn_tensor t = {o,
                              FLASHATTN_F32,
                              pb->batch_q,
                              pb->rows_q,
                              pb->heads_q,
                              pb->head_dim_v,
                              pb->rows_q * pb->heads_q * dpad,
                              pb->heads_q * dpad,
                              dpad,
                              1};
        parts[s] = t;
        part_lse[s] = (const float *)fa_region_at(&plan->part, area, FA_DECODE_PART_LSE, 0);
    }
    const fa_merge_job job = {splits, parts, part_lse, pb->o, pb->lse};

    decode_run_state r = {dp, plan, kern, base, parts, part_lse, &job, 0, 0, 0, 0, 0};
    /* (varlen: seq_new is the longest sequence's; the others skip past theirs) */
    r.appends = dp->k_new ? pb->batch * dp->seq_new : 0;
    r.per_seq = plan->query_tiles * splits * plan->head_blocks;
    r.items = pb->seq_q > 0 ? pb->batch * r.per_seq : 0;
    r.merge_rows = splits > 1 ? pb->batch_q * pb->heads_q * pb->rows_q : 0;
    r.merge_units = (r.merge_rows + FA_MERGE_ROWS - 1) / FA_MERGE_ROWS;

    if (fa_run_alone(plan->threads)) {
        run_share(&r);
        return;
    }
#pragma omp parallel num_threads(plan->threads)
    run_share(&r);
}
