/*
 * Forward driver. Groups of (sequence, kv-head) are processed in passes
 * that fit the packing budget; in each pass the threads first pack K and V
 * of every group in the pass (one barrier), then share the work items
 * (group, query head of the group, q-block) with dynamic scheduling.
 * Each group is one sequence's view (fa_seq_of): its own lengths and mask.
 * Nothing is allocated here: every buffer is a region of the plan's layout.
 */
#include "driver/fwd.h"

#include <stdint.h>

#include "core/threads.h"
#include "driver/pack.h"
#include "driver/score_tiles.h"

#define FA_PACK_CHUNK 512 /* keys per packing work item */

void fa_fwd_run(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern, void *ws) {
    void *base = fa_layout_base(ws);
    const int64_t groups = pb->batch * pb->heads_kv;
    const int64_t bm = plan->block_m;
    const int64_t qblocks = (pb->seq_q + bm - 1) / bm;
    const int64_t chunk = (FA_PACK_CHUNK + kern->nr - 1) / kern->nr * kern->nr;
    const int64_t nchunks = (pb->seq_k + chunk - 1) / chunk;
    if (groups == 0 || pb->seq_q == 0) return;
    const int64_t kvblocks = (pb->seq_k + plan->block_n - 1) / plan->block_n;
    const int64_t tslices = fa_score_tile_slices(pb);
    uint8_t *tiles = tslices ? (uint8_t *)fa_region_at(&plan->ws, base, FA_FWD_WS_TILES, 0) : NULL;

#pragma omp parallel num_threads(plan->threads)
    {
        void *tw = fa_region_at(&plan->ws, base, FA_FWD_WS_THREADS, (size_t)fa_thread_id());
#pragma omp for schedule(dynamic)
        for (int64_t it = 0; it < tslices * qblocks; it++)
            fa_score_tiles_row(pb, it / qblocks, it % qblocks, bm, plan->block_n, qblocks, kvblocks, tiles);
        /* implicit barrier: the mask's tiles are sorted */
        for (int64_t g0 = 0; g0 < groups; g0 += plan->groups_per_pass) {
            const int64_t ng = groups - g0 < plan->groups_per_pass ? groups - g0
                                                                    : plan->groups_per_pass;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < ng * nchunks; it++) {
                const int64_t g = g0 + it / nchunks;
                const fa_seq seq = fa_seq_of(pb, g / pb->heads_kv);
                const int64_t hk = g % pb->heads_kv, j0 = it % nchunks * chunk;
                const int64_t j1 = j0 + chunk < seq.seq_k ? j0 + chunk : seq.seq_k;
                if (j0 >= j1) continue;
                void *area = fa_region_at(&plan->ws, base, FA_FWD_WS_GROUPS, (size_t)(g - g0));
                void *kp = fa_region_at(&plan->group, area, FA_FWD_GROUP_K, 0);
                void *vp = fa_region_at(&plan->group, area, FA_FWD_GROUP_V, 0);
                if (plan->bf16_dot) {
                    fa_pack_k_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)kp);
                    fa_pack_v_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)vp);
                } else {
                    fa_pack_k(pb, kern, &seq, hk, j0, j1, (float *)kp);
                    fa_pack_v(pb, kern, &seq, hk, j0, j1, (float *)vp,
                              (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_ACC, 0));
                }
            }
            /* implicit barrier: the pass's panels are complete */
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
                fa_fwd_block(pb, plan, kern, &seq, h, i0, i1,
                             fa_region_at(&plan->ws, base, FA_FWD_WS_GROUPS, (size_t)(g - g0)), tw,
                             tiles);
            }
        }
    }
}
