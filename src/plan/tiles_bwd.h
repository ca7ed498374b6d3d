/*
 * Tile choice and workspace layout for the backward pass. Everything is
 * O(seq * head_dim) per (batch, kv-head) group in flight plus per-thread
 * tiles; nothing grows with seq_q * seq_k.
 */
#ifndef FA_TILES_BWD_H
#define FA_TILES_BWD_H

#include <stddef.h>

#include "driver/problem.h"
#include "kernels/kernels.h"

/* Deterministic mode: at most this many fixed chunks of kv-blocks, each
 * with its own dQ accumulator. */
#define FA_BWD_MAX_SLOTS 8

typedef struct fa_bwd_plan {
    int block_m;          /* query rows per step; multiple of kern->nr */
    int block_n;          /* keys per work item */
    int64_t tile_ld;      /* row stride of the S^T and dP^T tiles, in floats */
    int threads;
    int deterministic;
    int slots;            /* dQ accumulators per head: chunks (deterministic) or 1 shared */
    int shared_dq;        /* work items add into one dQ accumulator under locks:
                           * not deterministic and more than one thread */
    /* bf16 dot-product route: Q, K, V and dO are bf16 and kern has
     * gemm_bf16 (the forward's route for the same Q, K, V, so S is the
     * forward's S bit for bit). S^T and dP^T run on gemm_bf16, the other
     * three products on gemm (driver/bwd_block.c says why). The pairs fit
     * in the f32 layouts' room; t_cols is added. */
    int bf16_dot;
    /* dK and dV rows are written with store_stream (around the caches):
     * see FA_BWD_STREAM_ELEMS in tiles_bwd.c */
    int stream_dkv;
    int64_t qblocks, kvblocks;
    int64_t groups_per_pass;

    /* One query head, in floats, each part 64-byte aligned:
     *   Q rows    [col_panels][seq_q][nr]           Q * scale
     *   Qs^T      [panels][head_dim + 1][nr]        Q * scale * log2(e); last
     *                                               row: LSE * log2(e)
     *   dO        [col_panels][seq_q][nr]
     *   dO^T      [panels][head_dim + 1][nr]        last row: D = rowsum(dO * O)
     * where panels = ceil(seq_q / nr) and col_panels = ceil(head_dim_pad / nr):
     * Q and dO rows are the B operands of dK and dV, read nr columns at a time,
     * so each nr-column slice of them is contiguous (zero past head_dim):
     * ~5% on the whole backward at d = 128 against [seq_q][head_dim_pad]
     * rows (CPU time, seq 4096, one thread, medians of 10 under load). */
    int64_t col_panels;
    size_t rows_floats, panels_floats, head_floats;
    /* dQ^T accumulator of one head: [qblocks][head_dim][block_m]. */
    size_t slot_floats;
    /* One group: group * head_floats, then slots * group * slot_floats, then
     * one lock (an int) per (head, q-block). */
    size_t group_floats, slots_offset, locks_offset;

    /* Per-thread tiles, offsets in floats from the thread's area. */
    size_t t_kaug, t_vaug, t_kt, t_dk, t_dv, t_st, t_dpt, t_dqt, t_row;
    size_t t_cols; /* dot route: a step's LSE*log2(e) and D per query, 2 x block_m */
    size_t thread_floats;
    size_t workspace_bytes;
} fa_bwd_plan;

/* Fill plan from a validated problem (the forward's part, and dO's dtype)
 * and the user's params. block_m is
 * rounded up to a multiple of kern->nr; BAD_TILE for blocks above
 * FA_MAX_BLOCK; OVERFLOW when the workspace does not fit in size_t. */
flashattn_status fa_plan_bwd(const fa_problem *pb, flashattn_dtype dout_dtype,
                             const flashattn_params *p, const fa_kernels *kern,
                             fa_bwd_plan *plan);

#endif
