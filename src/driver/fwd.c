/*
 * Forward driver. Groups of (sequence, kv-head) are processed in passes
 * that fit the packing budget; in each pass the threads first pack K and V
 * of every group in the pass (one barrier), then run the work items
 * (group, query head of the group, q-block). Both are shared in ranges
 * (core/share.h): a thread's q-blocks are those of the groups it packed,
 * so their panels come from its own L2, and it then helps with what is
 * left of the others'. Each group is one sequence's view (fa_seq_of): its
 * own lengths and mask and, under plan->per_seq, its own tiles.
 * Nothing is allocated here: every buffer is a region of the plan's layout.
 */
#include "driver/fwd.h"

#include <stdint.h>

#include "core/share.h"
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

/* The work items of a pass before its group g (group-major: a group's
 * items are contiguous), and what one of group g's items costs, roughly
 * (rows times keys; only ratios between groups matter). */
static int64_t pass_items_before(const fwd_run_state *r, int64_t g0, int64_t g) {
    if (r->seqs) return items_before(r->pb, r->seqs, g) - items_before(r->pb, r->seqs, g0);
    return (g - g0) * r->pb->group * r->qblocks;
}

static int64_t group_items(const fwd_run_state *r, int64_t g0, int64_t g) {
    return pass_items_before(r, g0, g + 1) - pass_items_before(r, g0, g);
}

static double item_cost(const fwd_run_state *r, int64_t g) {
    if (!r->seqs) return 1.0;
    const int64_t b = g / r->pb->heads_kv;
    return (double)r->seqs[b].block_m * (double)fa_seq_of(r->pb, b).seq_k;
}

/* Where range k of `team` begins among pass g0's ng groups' items: even
 * shares of their cost, at whole items. */
static int64_t items_cut(const fwd_run_state *r, int64_t g0, int64_t ng, int team, int k) {
    const int64_t n = pass_items_before(r, g0, g0 + ng);
    if (k <= 0) return 0;
    if (k >= team) return n;
    if (!r->seqs) return fa_share_cut(n, team, k);
    double total = 0.0, at = 0.0;
    for (int64_t g = g0; g < g0 + ng; g++)
        total += item_cost(r, g) * (double)group_items(r, g0, g);
    const double target = total * k / team;
    for (int64_t g = g0; g < g0 + ng; g++) {
        const int64_t first = pass_items_before(r, g0, g), count = group_items(r, g0, g);
        const double each = item_cost(r, g);
        if (count && at + each * (double)count >= target) {
            const double need = (target - at) / each;
            const int64_t take = need <= 0.0 ? 0 : (int64_t)(need + 0.5);
            return first + (take < count ? take : count);
        }
        at += each * (double)count;
    }
    return n;
}

/* Where the packing range of the thread whose q-blocks begin at item x
 * begins: the first chunk whose place among its group's items (the
 * middle of its share of them) is at or past x. A group's chunks thus go
 * to the threads that run its q-blocks, in proportion. */
static int64_t chunks_cut(const fwd_run_state *r, int64_t g0, int64_t ng, int64_t x) {
    const int64_t nc = r->nchunks;
    for (int64_t g = g0; g < g0 + ng; g++) {
        const int64_t first = pass_items_before(r, g0, g), count = group_items(r, g0, g);
        for (int64_t c = 0; c < nc; c++)
            if ((double)first + (double)count * ((double)c + 0.5) / (double)nc >= (double)x)
                return (g - g0) * nc + c;
    }
    return ng * nc;
}

/* This thread's ranges of pass g0's packing and q-blocks. */
static void set_pack_range(const fwd_run_state *r, const fa_share *s, int64_t g0, int64_t ng) {
    const int t = s->self, team = s->team;
    const int64_t b = t == 0 ? 0 : chunks_cut(r, g0, ng, items_cut(r, g0, ng, team, t));
    const int64_t e = t == team - 1 ? ng * r->nchunks : chunks_cut(r, g0, ng, items_cut(r, g0, ng, team, t + 1));
    fa_share_set(fa_share_range_at(s, t), b, e);
}

static void set_blocks_range(const fwd_run_state *r, const fa_share *s, int64_t g0, int64_t ng) {
    const int t = s->self, team = s->team;
    fa_share_set(fa_share_range_at(s, t), items_cut(r, g0, ng, team, t), items_cut(r, g0, ng, team, t + 1));
}

/* K and V of pass g0's ng groups, packed in 512-key chunks. */
static void pack_pass(const fwd_run_state *r, int64_t g0, int64_t ng, void *tw, fa_share share) {
    const fa_problem *pb = r->pb;
    const fa_fwd_plan *plan = r->plan;
    const fa_kernels *kern = r->kern;
    for (int64_t it; (it = fa_share_take(&share)) >= 0;) {
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
}

/* The q-blocks of pass g0's ng groups. */
static void blocks_pass(const fwd_run_state *r, int64_t g0, void *tw, fa_share share) {
    const fa_problem *pb = r->pb;
    const fa_fwd_plan *plan = r->plan;
    const int64_t bm = plan->block_m, qblocks = r->qblocks, per_group = pb->group * qblocks;
    if (r->seqs) {
        const int64_t first = items_before(pb, r->seqs, g0);
        for (int64_t it; (it = fa_share_take(&share)) >= 0;)
            run_seq_item(pb, plan, r->kern, r->seqs, g0, first + it, r->base, tw);
        return;
    }
    for (int64_t it; (it = fa_share_take(&share)) >= 0;) {
        /* Within a group, last q-blocks first: under causal masks they are
         * the longest, and a thread's leftovers are the shortest. */
        const int64_t g = g0 + it / per_group, x = it % per_group;
        const int64_t qb = qblocks - 1 - x / pb->group;
        const fa_seq seq = fa_seq_of(pb, g / pb->heads_kv);
        const int64_t h = g % pb->heads_kv * pb->group + x % pb->group;
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
    const int self = fa_thread_id(), team = fa_team_size();
    void *tw = fa_region_at(&plan->ws, r->base, FA_FWD_WS_THREADS, (size_t)self);
    const size_t stride = plan->ws.r[FA_FWD_WS_SHARE].stride;
    const fa_share packs = fa_share_of(fa_region_at(&plan->ws, r->base, FA_FWD_WS_SHARE, 0), stride, team, self);
    const fa_share blocks =
        fa_share_of(fa_region_at(&plan->ws, r->base, FA_FWD_WS_SHARE, (size_t)plan->threads), stride, team, self);
    const int64_t per_pass = plan->groups_per_pass;
    set_pack_range(r, &packs, 0, r->groups < per_pass ? r->groups : per_pass);
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < r->tslices * r->qblocks; it++)
        fa_score_tiles_row(pb, it / r->qblocks, it % r->qblocks, plan->block_m, plan->block_n, r->qblocks,
                           r->kvblocks, r->tiles);
    /* implicit barrier: the mask's tiles are sorted, the first packing
     * ranges set */
    for (int64_t g0 = 0; g0 < r->groups; g0 += per_pass) {
        const int64_t ng = r->groups - g0 < per_pass ? r->groups - g0 : per_pass;
        /* Each range is set while nobody reads it: the q-blocks' before the
         * barrier that ends the packing, the next packing's before the one
         * that ends this pass. */
        set_blocks_range(r, &blocks, g0, ng);
        pack_pass(r, g0, ng, tw, packs);
#pragma omp barrier
        const int64_t next = g0 + ng, nn = r->groups - next < per_pass ? r->groups - next : per_pass;
        if (nn > 0) set_pack_range(r, &packs, next, nn);
        blocks_pass(r, g0, tw, blocks);
#pragma omp barrier
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
