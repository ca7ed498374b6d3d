/*
 * Work split and workspace layout for decode. A work item is one
 * (sequence, kv-head block, query tile, split): heads_per_item adjacent
 * kv-heads (their cache rows are adjacent in memory, so the item reads the
 * cache in address order), queries_per_item query positions (with every
 * query head of those kv-heads), and one of num_splits consecutive parts
 * of the keys those queries see.
 */
#ifndef FA_TILES_DECODE_H
#define FA_TILES_DECODE_H

#include <stddef.h>

#include "driver/decode_problem.h"
#include "kernels/kernels.h"

typedef struct fa_decode_plan {
    int heads_per_item;     /* kv-heads per work item */
    int queries_per_item;   /* query positions per work item */
    int block_n;            /* keys per step */
    int num_splits;
    int threads;
    int64_t head_blocks;    /* ceil(heads_kv / heads_per_item) */
    int64_t query_tiles;    /* ceil(seq_q / queries_per_item) */
    int64_t rows;           /* most rows of an item: heads_per_item * group * queries_per_item */
    int wide_piece;         /* wide path (many rows per kv-head): keys per widened piece of
                               K and V (the GEMM kernel's NR); 0: the cache-reading kernels */
    int s_stride;           /* row stride of S (block_n, plus 16 on the wide path) */
    size_t thread_floats;   /* per thread: Q, S, acc, K/V rows, m, l, row addresses */
    size_t part_floats;     /* per split (num_splits > 1): partial O, [batch, seq_q, heads_q, head_dim_pad] */
    size_t part_lse_floats; /* per split: partial LSE, [batch, heads_q, seq_q] */
    size_t workspace_bytes;
} fa_decode_plan;

/* Fill plan from a validated problem and range-checked params for the
 * kernel table kern (its MR and NR shape the wide path). units = 0: the
 * automatic split count follows the thread count; units > 0: the work is
 * cut into about that many units whatever the thread count (splits first,
 * then smaller kv-head blocks), so that results do not depend on it (a
 * forward run as decode, plan/fwd_route.h). wide = 1 takes the wide
 * path whatever the rows (a forward that returns the LSE: its S must be
 * the GEMM tile's sum, fwd_route.h). Returns BAD_TILE for block
 * sizes out of range, OVERFLOW when the workspace size does not fit in
 * size_t. */
flashattn_status fa_plan_decode(const fa_decode_problem *dp, const flashattn_params *p,
                                const fa_kernels *kern, int units, int wide,
                                fa_decode_plan *plan);

#endif
