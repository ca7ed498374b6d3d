/* The forward driver: packing passes, work items, threads. */
#ifndef FA_DRIVER_FWD_H
#define FA_DRIVER_FWD_H

#include "core/problem.h"
#include "plan/tiles.h"

/* Run a validated, planned forward pass. ws holds plan->workspace_bytes. */
void fa_fwd_run(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern, void *ws);

/* One work item: query rows [i0, i1) of head h of sequence seq, against
 * the packed K and V of its kv-head (group, the area of plan->group), in
 * kv-blocks of block_n keys (plan->block_n, or the sequence's own under
 * plan->per_seq: at most plan->block_n). tw is the thread's tile area
 * (plan->thread). */
void fa_fwd_block(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern,
                  const fa_seq *seq, int64_t h, int64_t i0, int64_t i1, int64_t block_n, void *group,
                  void *tw, const uint8_t *tiles);

#endif
