/*
 * Forward driver. Groups of (sequence, kv-head) are processed in passes
 * that fit the packing budget; in each pass the threads first pack K and V
 * of every group in the pass (one barrier), then share the work items
 * (group, query head of the group, q-block) with dynamic scheduling.
 * Each group is one sequence's view (fa_seq_of): its own lengths and mask
 * and, under plan->per_seq, its own tiles.
 * Nothing is allocated here: every buffer is a region of the plan's layout.
 */
#include "driver/fwd.h"

#include <stdint.h>

#include "core/threads.h"
#include "driver/int8_qk.h"
#include "driver/pack.h"
#include "driver/score_tiles.h"


/* plan->per_seq: the work items before group g (groups in sequence order,
 * each sequence's own q-blocks for every query head of the group). */
static int64_t items_before(const fa_problem *pb, const fa_fwd_seq_tiles *seqs, int64_t g) {
    const int64_t b = g / pb->heads_kv, hk = g % pb->heads_kv;
    if (b >= pb->batch) return seqs[pb->batch].items_before;
    const int64_t per_group = (seqs[b + 1].items_before - seqs[b].items_before) / pb->heads_kv;
    return seqs[b].items_before + hk * per_group;
}

/* plan->per_seq: work item `it` (counted over the whole batch) of the pass
 * starting at group g0. Within a group the last q-blocks come first, as in
 * the uniform loop: under causal masks they are the longest. */
static void run_seq_item(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern,
                         const fa_fwd_seq_tiles *seqs, int64_t g0, int64_t it, void *base, void *tw) {
    int64_t lo = 0, hi = pb->batch; /* the sequence: the last with items_before <= it */
    while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        if (seqs[mid].items_before <= it) lo = mid;
        else hi = mid;
    }
    const fa_seq seq = fa_seq_of(pb, lo);
    const int64_t bm = seqs[lo].block_m, qblocks = (seq.seq_q + bm - 1) / bm;
    const int64_t local = it - seqs[lo].items_before, per_group = pb->group * qblocks;
    const int64_t hk = local / per_group, r = local % per_group, g = lo * pb->heads_kv + hk;
    const int64_t qb = qblocks - 1 - r / pb->group, h = hk * pb->group + r % pb->group;
    const int64_t i0 = qb * bm, i1 = i0 + bm < seq.seq_q ? i0 + bm : seq.seq_q;
    fa_fwd_block(pb, plan, kern, &seq, h, i0, i1, seqs[lo].block_n,
                 fa_region_at(&plan->ws, base, FA_FWD_WS_GROUPS, (size_t)(g - g0)), tw, NULL);
}

/* plan->per_seq: every sequence's tiles (fa_seq_tiles) and item counts. */
static void seq_tiles_fill(const fa_problem *pb, const fa_kernels *kern, fa_fwd_seq_tiles *seqs) {
    int64_t items = 0;
    for (int64_t b = 0; b < pb->batch; b++) {
        int bm, bn;
        fa_seq_tiles(pb, kern, b, &bm, &bn);
        seqs[b] = (fa_fwd_seq_tiles){bm, bn, items};
        items += pb->heads_kv * pb->group * ((fa_seq_q_of(pb, b) + bm - 1) / bm);
    }
    seqs[pb->batch] = (fa_fwd_seq_tiles){0, 0, items};
}

/* What every thread of a forward call shares. */
typedef struct {
    const fa_problem *pb;
    const fa_fwd_plan *plan;
    const fa_kernels *kern;
    void *base;
    uint8_t *tiles;
    fa_fwd_seq_tiles *seqs;
    int64_t groups, qblocks, chunk, nchunks, kvblocks, tslices;
} fwd_run_state;

/* K and V of pass g0's ng groups, packed in 512-key chunks. */
static void pack_pass(const fwd_run_state *r, int64_t g0, int64_t ng, void *tw) {
    const fa_problem *pb = r->pb;
    const fa_fwd_plan *plan = r->plan;
    const fa_kernels *kern = r->kern;
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < ng * r->nchunks; it++) {
        const int64_t g = g0 + it / r->nchunks;
        const fa_seq seq = fa_seq_of(pb, g / pb->heads_kv);
        const int64_t hk = g % pb->heads_kv, j0 = it % r->nchunks * r->chunk;
        const int64_t j1 = j0 + r->chunk < seq.seq_k ? j0 + r->chunk : seq.seq_k;
        if (j0 >= j1) continue;
        void *area = fa_region_at(&plan->ws, r->base, FA_FWD_WS_GROUPS, (size_t)(g - g0));
        void *kp = fa_region_at(&plan->group, area, FA_FWD_GROUP_K, 0);
        void *vp = fa_region_at(&plan->group, area, FA_FWD_GROUP_V, 0);
        if (pb->int8_qk) {
            const fa_i8_keys keys = fa_i8_keys_of(plan, area);
            fa_pack_k_i8(pb, kern, &seq, hk, j0, j1, &keys,
                         fa_region_at(&plan->thread, tw, FA_FWD_THREAD_I8TMP, 0));
            if (pb->int8_pv) {
                const fa_i8_values values = fa_i8_values_of(plan, area);
                fa_pack_v_i8(pb, kern, &seq, hk, j0, j1, &values,
                             fa_region_at(&plan->thread, tw, FA_FWD_THREAD_I8TMP, 0));
            } else if (plan->i8_pv_dot)
                fa_pack_v_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)vp,
                                fa_region_at(&plan->thread, tw, FA_FWD_THREAD_I8TMP, 0));
            else
                fa_pack_v(pb, kern, &seq, hk, j0, j1, (float *)vp);
            if (pb->bf16_pv && !plan->i8_pv_dot) fa_round_v_bf16(pb, kern, &seq, j0, j1, (float *)vp);
        } else if (plan->bf16_dot) {
            fa_pack_k_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)kp);
            fa_pack_v_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)vp, NULL);
        } else {
            fa_pack_k(pb, kern, &seq, hk, j0, j1, (float *)kp);
            fa_pack_v(pb, kern, &seq, hk, j0, j1, (float *)vp);
        }
    }
    /* implicit barrier: the pass's panels are complete */
}

/* The q-blocks of pass g0's ng groups. */
static void blocks_pass(const fwd_run_state *r, int64_t g0, int64_t ng, void *tw) {
    const fa_problem *pb = r->pb;
    const fa_fwd_plan *plan = r->plan;
    const int64_t bm = plan->block_m, qblocks = r->qblocks;
    if (r->seqs) {
        const int64_t first = items_before(pb, r->seqs, g0), last = items_before(pb, r->seqs, g0 + ng);
#pragma omp for schedule(dynamic)
        for (int64_t it = first; it < last; it++) run_seq_item(pb, plan, r->kern, r->seqs, g0, it, r->base, tw);
        return;
    }
    const int64_t heads = ng * pb->group;
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < heads * qblocks; it++) {
        /* Last q-blocks first: under causal masks they are the longest. */
        const int64_t qb = qblocks - 1 - it / heads;
        const int64_t g = g0 + it % heads / pb->group;
        const fa_seq seq = fa_seq_of(pb, g / pb->heads_kv);
        const int64_t h = g % pb->heads_kv * pb->group + it % heads % pb->group;
        const int64_t i0 = qb * bm;
        const int64_t i1 = i0 + bm < seq.seq_q ? i0 + bm : seq.seq_q;
        if (i0 >= i1) continue;
        fa_fwd_block(pb, plan, r->kern, &seq, h, i0, i1, plan->block_n,
                     fa_region_at(&plan->ws, r->base, FA_FWD_WS_GROUPS, (size_t)(g - g0)), tw, r->tiles);
    }
}

/* One thread's share of every loop (orphaned: bound to the region
 * fa_fwd_run opens, or to the calling thread alone). */
static void run_share(const fwd_run_state *r) {
    const fa_problem *pb = r->pb;
    const fa_fwd_plan *plan = r->plan;
    void *tw = fa_region_at(&plan->ws, r->base, FA_FWD_WS_THREADS, (size_t)fa_thread_id());
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < r->tslices * r->qblocks; it++)
        fa_score_tiles_row(pb, it / r->qblocks, it % r->qblocks, plan->block_m, plan->block_n, r->qblocks,
                           r->kvblocks, r->tiles);
    /* implicit barrier: the mask's tiles are sorted */
    for (int64_t g0 = 0; g0 < r->groups; g0 += plan->groups_per_pass) {
        const int64_t ng = r->groups - g0 < plan->groups_per_pass ? r->groups - g0 : plan->groups_per_pass;
        pack_pass(r, g0, ng, tw);
        blocks_pass(r, g0, ng, tw);
    }
}

void fa_fwd_run(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern, void *ws) {
    fwd_run_state r = {pb, plan, kern, fa_layout_base(ws), NULL, NULL, 0, 0, 0, 0, 0, 0};
    r.groups = pb->batch * pb->heads_kv;
    r.qblocks = (pb->seq_q + plan->block_m - 1) / plan->block_m;
    r.chunk = fa_pack_chunk(kern);
    r.nchunks = (pb->seq_k + r.chunk - 1) / r.chunk;
    if (r.groups == 0 || pb->seq_q == 0) return;
    r.kvblocks = (pb->seq_k + plan->block_n - 1) / plan->block_n;
    r.tslices = fa_score_tile_slices(pb);
    r.tiles = r.tslices ? (uint8_t *)fa_region_at(&plan->ws, r.base, FA_FWD_WS_TILES, 0) : NULL;
    r.seqs = plan->per_seq ? (fa_fwd_seq_tiles *)fa_region_at(&plan->ws, r.base, FA_FWD_WS_SEQS, 0) : NULL;
    if (r.seqs) seq_tiles_fill(pb, kern, r.seqs);

    if (fa_run_alone(plan->threads)) {
        run_share(&r);
        return;
    }
#pragma omp parallel num_threads(plan->threads)
    run_share(&r);
}
