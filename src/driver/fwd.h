/* The forward driver: packing passes, work items, threads. */
#ifndef FA_FWD_H
#define FA_FWD_H

#include "plan/tiles.h"

/* Run a validated, planned forward pass. ws holds plan->workspace_bytes. */
void fa_fwd_run(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern, void *ws);

/* One work item: query rows [i0, i1) of head h of batch entry b, against the
 * packed K (kp) and V (vp) of its kv-head. tw is the thread's tile area. */
void fa_fwd_block(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern,
                  int64_t b, int64_t h, int64_t i0, int64_t i1, const float *kp,
                  const float *vp, float *tw);

#endif
