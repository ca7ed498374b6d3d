/*
 * Forward driver. Groups of (batch, kv-head) are processed in passes that
 * fit the packing budget; in each pass the threads first pack K and V of
 * every group in the pass (one barrier), then share the work items
 * (group, query head of the group, q-block) with dynamic scheduling.
 * Nothing is allocated here: every buffer is a slice of the workspace.
 */
#include "driver/fwd.h"

#include <stdint.h>

#include "driver/pack.h"
#include "driver/threads.h"

#define FA_PACK_CHUNK 512 /* keys per packing work item */

void fa_fwd_run(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern, void *ws) {
    float *base = (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const size_t per_group = plan->kpack_floats + plan->vpack_floats;
    float *thread_area = base + per_group * (size_t)plan->groups_per_pass;
    const int64_t groups = pb->batch * pb->heads_kv;
    const int64_t bm = plan->block_m;
    const int64_t qblocks = (pb->seq_q + bm - 1) / bm;
    const int64_t chunk = (FA_PACK_CHUNK + kern->nr - 1) / kern->nr * kern->nr;
    const int64_t nchunks = (pb->seq_k + chunk - 1) / chunk;
    if (groups == 0 || pb->seq_q == 0) return;

#pragma omp parallel num_threads(plan->threads)
    {
        float *tw = thread_area + plan->thread_floats * (size_t)fa_thread_id();
        for (int64_t g0 = 0; g0 < groups; g0 += plan->groups_per_pass) {
            const int64_t ng = groups - g0 < plan->groups_per_pass ? groups - g0
                                                                    : plan->groups_per_pass;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < ng * nchunks; it++) {
                const int64_t g = g0 + it / nchunks;
                const int64_t j0 = it % nchunks * chunk;
                const int64_t j1 = j0 + chunk < pb->seq_k ? j0 + chunk : pb->seq_k;
                float *kp = base + per_group * (size_t)(g - g0);
                const int64_t b = g / pb->heads_kv, hk = g % pb->heads_kv;
                if (plan->bf16_dot) {
                    fa_pack_k_pairs(pb, kern, b, hk, j0, j1, (uint32_t *)kp);
                    fa_pack_v_pairs(pb, kern, b, hk, j0, j1, (uint32_t *)(kp + plan->kpack_floats));
                } else {
                    fa_pack_k(pb, kern, b, hk, j0, j1, kp, tw);
                    fa_pack_v(pb, kern, b, hk, j0, j1, kp + plan->kpack_floats, tw);
                }
            }
            /* implicit barrier: the pass's panels are complete */
            const int64_t heads = ng * pb->group;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < heads * qblocks; it++) {
                /* Last q-blocks first: under causal masks they are the longest. */
                const int64_t qb = qblocks - 1 - it / heads;
                const int64_t g = g0 + it % heads / pb->group;
                const int64_t b = g / pb->heads_kv;
                const int64_t h = g % pb->heads_kv * pb->group + it % heads % pb->group;
                const float *kp = base + per_group * (size_t)(g - g0);
                const int64_t i0 = qb * bm;
                const int64_t i1 = i0 + bm < pb->seq_q ? i0 + bm : pb->seq_q;
                fa_fwd_block(pb, plan, kern, b, h, i0, i1, kp, kp + plan->kpack_floats, tw);
            }
        }
    }
}
