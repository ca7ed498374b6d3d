/*
 * Work split and workspace layout for decode. A work item is one
 * (sequence, kv-head, row tile, split): the row tile holds block_m of the
 * group * seq_q query rows that share the kv-head, the split one of
 * num_splits consecutive parts of the keys those rows see.
 */
#ifndef FA_TILES_DECODE_H
#define FA_TILES_DECODE_H

#include <stddef.h>

#include "driver/decode_problem.h"
#include "kernels/kernels.h"

typedef struct fa_decode_plan {
    int block_m;            /* query rows per work item */
    int block_n;            /* keys per step */
    int num_splits;
    int threads;
    int64_t row_tiles;      /* ceil(group * seq_q / block_m) */
    size_t thread_floats;   /* per thread: Q, S, acc, K/V rows, m, l, row addresses */
    size_t part_floats;     /* per split (num_splits > 1): partial O, [batch, seq_q, heads_q, head_dim_pad] */
    size_t part_lse_floats; /* per split: partial LSE, [batch, heads_q, seq_q] */
    size_t workspace_bytes;
} fa_decode_plan;

/* Fill plan from a validated problem and range-checked params. Returns
 * BAD_TILE for block sizes the kernels cannot run, OVERFLOW when the
 * workspace size does not fit in size_t. */
flashattn_status fa_plan_decode(const fa_decode_problem *dp, const flashattn_params *p,
                                const fa_kernels *kern, fa_decode_plan *plan);

#endif
