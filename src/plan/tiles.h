/*
 * Tile choice and workspace layout for the forward pass. The footprint model
 * and the rule live here, and only here.
 */
#ifndef FA_TILES_H
#define FA_TILES_H

#include <stddef.h>

#include "driver/problem.h"
#include "kernels/kernels.h"

typedef struct fa_fwd_plan {
    int block_m;            /* query rows per work item */
    int block_n;            /* keys per inner step; multiple of kern->nr */
    int threads;
    int64_t groups_per_pass;  /* (batch, kv-head) groups packed at once */
    size_t kpack_floats;      /* per group: K as [ceil(seq_k/nr)][head_dim][nr] */
    size_t vpack_floats;      /* per group: V as [seq_k][head_dim_pad] */
    size_t thread_floats;     /* per thread: Q tile, S tile, accumulator, m, l */
    size_t workspace_bytes;   /* everything, plus alignment slack */
} fa_fwd_plan;

/* Fill plan from the problem and the user's (already range-checked) params.
 * Returns BAD_TILE for user tiles the kernels cannot run, OVERFLOW when the
 * workspace size does not fit in size_t. */
flashattn_status fa_plan_fwd(const fa_problem *pb, const flashattn_params *p,
                             const fa_kernels *kern, fa_fwd_plan *plan);

/* Largest block the kernels accept in either dimension. */
#define FA_MAX_BLOCK 4096

#endif
