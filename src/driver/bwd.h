/* The backward driver: packing, work items over kv-blocks, the dQ reduction. */
#ifndef FA_DRIVER_BWD_H
#define FA_DRIVER_BWD_H

#include <stdatomic.h>

#include "core/problem.h"
#include "plan/tiles_bwd.h"

/* Run a validated, planned backward pass. ws holds plan->workspace_bytes. */
void fa_bwd_run(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                void *ws);

/* One work item: keys [j0, j1) of sequence seq's kv-head hk, whose group
 * area (plan->group: packed query heads, dQ accumulators, locks) is gbase.
 * Accumulates dQ^T into accumulator `slot`: through the per-q-block locks
 * when plan->shared_dq, else directly (the slot is this item's, or this
 * thread's, alone). Writes the keys' dK and dV rows. tw is the thread's
 * tile area (plan->thread). Returns whether its dK and dV came out
 * finite (driver/careful.h). */
int fa_bwd_kvblock(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                    const fa_seq *seq, int64_t hk, void *gbase, int slot, int64_t j0, int64_t j1,
                    void *tw, const uint8_t *tiles);

/* Parts of a group's area (see plan/tiles_bwd.h). */
static inline void *fa_bwd_head(const fa_bwd_plan *plan, void *gbase, int64_t hi) {
    return fa_region_at(&plan->group, gbase, FA_BWD_GROUP_HEADS, (size_t)hi);
}
static inline float *fa_bwd_head_part(const fa_bwd_plan *plan, void *head, int part) {
    return (float *)fa_region_at(&plan->head, head, part, 0);
}
/* q-block qb of the dQ^T accumulator of slot `slot`, head hi. */
static inline float *fa_bwd_slot(const fa_bwd_plan *plan, const fa_problem *f, void *gbase,
                                 int slot, int64_t hi, int64_t qb) {
    float *acc = (float *)fa_region_at(&plan->group, gbase, FA_BWD_GROUP_DQ,
                                       (size_t)slot * (size_t)f->group + (size_t)hi);
    return acc + (size_t)qb * (size_t)f->head_dim * (size_t)plan->block_m;
}
static inline atomic_int *fa_bwd_lock(const fa_bwd_plan *plan, void *gbase, int64_t hi, int64_t qb) {
    return (atomic_int *)fa_region_at(&plan->group, gbase, FA_BWD_GROUP_LOCKS, 0) +
           hi * plan->qblocks + qb;
}
static inline float *fa_bwd_tile(const fa_bwd_plan *plan, void *tw, int part) {
    return (float *)fa_region_at(&plan->thread, tw, part, 0);
}

#endif
