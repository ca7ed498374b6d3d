/*
 * Work split and workspace layout for decode. A work item is one
 * (sequence, kv-head block, query tile, split): heads_per_item adjacent
 * kv-heads (their cache rows are adjacent in memory, so the item reads the
 * cache in address order), queries_per_item query positions (with every
 * query head of those kv-heads), and one of num_splits consecutive parts
 * of the keys those queries see.
 */
#ifndef FA_PLAN_TILES_DECODE_H
#define FA_PLAN_TILES_DECODE_H

#include <stddef.h>

#include "core/decode_problem.h"
#include "core/layout.h"
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
    int pv_piece;           /* wide path: keys per P V call: min(block_n, FA_DECODE_PV_KEYS) */
    int s_stride;           /* row stride of S (block_n, plus 16 on the wide path) */
    fa_layout ws;           /* FA_DECODE_WS_*: the whole workspace */
    fa_layout thread;       /* FA_DECODE_THREAD_*: one thread's tiles */
    fa_layout part;         /* FA_DECODE_PART_*: one split's partial results */
    size_t workspace_bytes; /* ws, plus alignment slack */
} fa_decode_plan;

/* The workspace: one tile area a thread, then (num_splits > 1) one area of
 * partial results a split. */
enum { FA_DECODE_WS_THREADS, FA_DECODE_WS_PARTS };
/* A thread's tiles, for an item's `rows` rows: Q [rows][head_dim] (base-2
 * scaled), S/P [rows][s_stride], acc [rows][head_dim_v_pad], the running max
 * and sum [rows], and on the wide path one piece of K ([head_dim][NR]) or
 * V ([NR][head_dim_v_pad]) widened to f32. */
enum { FA_DECODE_THREAD_Q, FA_DECODE_THREAD_S, FA_DECODE_THREAD_ACC, FA_DECODE_THREAD_MAX,
       FA_DECODE_THREAD_SUM, FA_DECODE_THREAD_WIDE,
       /* the double totals of rows longer than FA_SUM_CHUNK keys
        * (driver/softmax.h); empty when the capacity is not */
       FA_DECODE_THREAD_TOTAL_ACC, FA_DECODE_THREAD_TOTAL_SUM, FA_DECODE_THREAD_TOTAL_MAX };
/* A split's partials: O as f32 [batch, seq_q, heads_q, head_dim_v_pad] and
 * the LSE [batch, heads_q, seq_q], laid out like the user's. */
enum { FA_DECODE_PART_O, FA_DECODE_PART_LSE };

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
