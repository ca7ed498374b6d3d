/* The decode driver: appends, work items over the cache, split merge. */
#ifndef FA_DRIVER_DECODE_H
#define FA_DRIVER_DECODE_H

#include "kernels/kernels.h"
#include "plan/tiles_decode.h"

/* Run a validated, planned decode. ws holds plan->workspace_bytes. */
void fa_decode_run(const fa_decode_problem *dp, const fa_decode_plan *plan,
                   const fa_kernels *kern, void *ws);

/* One work item: kv-head block hblock and query tile qtile of sequence b,
 * keys of split `split` (see plan/tiles_decode.h). Its rows go to o and
 * lse (the user's, or the split's partials, same layouts; lse may be
 * NULL). tw is the thread's area; *wide_pad what its wide panel is known
 * to hold between the thread's items (decode_block.c), -1 at the start
 * of each call: the workspace's contents are the caller's. */
void fa_decode_item(const fa_decode_problem *dp, const fa_decode_plan *plan,
                    const fa_kernels *kern, int64_t b, int64_t hblock, int64_t qtile, int split,
                    const flashattn_tensor *o, float *lse, void *tw, int *wide_pad);

/* Write new row j (every kv-head, K and V) of sequence b into the cache.
 * tmp holds head_dim floats. */
void fa_decode_append(const fa_decode_problem *dp, const fa_kernels *kern, int64_t b, int64_t j,
                      float *tmp);

#endif
