/* The backward driver: packing, work items over kv-blocks, the dQ reduction. */
#ifndef FA_BWD_H
#define FA_BWD_H

#include <stdatomic.h>

#include "plan/tiles_bwd.h"

/* Run a validated, planned backward pass. ws holds plan->workspace_bytes. */
void fa_bwd_run(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                void *ws);

/* One work item: keys [j0, j1) of group g (= b * heads_kv + kv-head), whose
 * packed query heads, dQ accumulators and locks start at gbase. Accumulates
 * dQ^T into accumulator `slot`: through the per-q-block locks when
 * plan->shared_dq, else directly (the slot is this item's, or this
 * thread's, alone). Writes the keys' dK and dV rows. tw is the thread's
 * tile area. */
void fa_bwd_kvblock(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                    int64_t g, float *gbase, int slot, int64_t j0, int64_t j1, float *tw);

/* Parts of a group's area (see fa_bwd_plan). */
static inline float *fa_bwd_head(const fa_bwd_plan *plan, float *gbase, int64_t hi) {
    return gbase + (size_t)hi * plan->head_floats;
}
static inline float *fa_bwd_slot(const fa_bwd_plan *plan, const fa_problem *f, float *gbase,
                                 int slot, int64_t hi, int64_t qb) {
    return gbase + plan->slots_offset + ((size_t)slot * (size_t)f->group + (size_t)hi) * plan->slot_floats +
           (size_t)qb * (size_t)f->head_dim * (size_t)plan->block_m;
}
static inline atomic_int *fa_bwd_lock(const fa_bwd_plan *plan, float *gbase, int64_t hi, int64_t qb) {
    _Static_assert(sizeof(atomic_int) == sizeof(float), "a lock takes one float of the workspace");
    return (atomic_int *)(gbase + plan->locks_offset) + hi * plan->qblocks + qb;
}

#endif
