/*
 * Tile choice and workspace layout for the backward pass. Everything is
 * O(seq * head_dim) per (batch, kv-head) group in flight plus per-thread
 * tiles; nothing grows with seq_q * seq_k.
 */
#ifndef FA_PLAN_TILES_BWD_H
#define FA_PLAN_TILES_BWD_H

#include <stddef.h>

#include "core/layout.h"
#include "core/problem.h"
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

    int64_t col_panels;       /* ceil(head_dim_pad / nr): Q's rows */
    int64_t col_panels_v;     /* ceil(head_dim_v_pad / nr): dO's rows */
    fa_layout ws;             /* FA_BWD_WS_*: the whole workspace */
    fa_layout group;          /* FA_BWD_GROUP_*: one (batch, kv-head) group's area */
    fa_layout head;           /* FA_BWD_HEAD_*: one packed query head */
    fa_layout thread;         /* FA_BWD_THREAD_*: one thread's tiles */
    size_t workspace_bytes;   /* ws, plus alignment slack */
} fa_bwd_plan;

/* Fill plan from a validated problem (the forward's part, and dO's dtype)
 * and the user's params. block_m is
 * rounded up to a multiple of kern->nr; BAD_TILE for blocks above
 * FA_MAX_BLOCK; OVERFLOW when the workspace does not fit in size_t. */
flashattn_status fa_plan_bwd(const fa_problem *pb, flashattn_dtype dout_dtype,
                             const flashattn_params *p, const fa_kernels *kern,
                             fa_bwd_plan *plan);

/* The workspace: groups_per_pass group areas, one tile area a thread, the
 * boolean mask's tile summary of block_m x block_n tiles (empty without a
 * mask: see plan/tiles.h), and the threads' work ranges (core/share.h:
 * packing, kv items and dQ stores, threads of each). */
enum { FA_BWD_WS_GROUPS, FA_BWD_WS_THREADS, FA_BWD_WS_TILES, FA_BWD_WS_SHARE };

/* The work ranges' kinds: FA_BWD_WS_SHARE holds threads ranges of each, in
 * this order. */
enum { FA_BWD_SHARE_PACK, FA_BWD_SHARE_KEYS, FA_BWD_SHARE_REDUCE, FA_BWD_SHARE_KINDS };

/* A group's area: its packed query heads (group of them), the dQ^T
 * accumulators (slots x group of them, slot-major: [slot][head], each
 * [qblocks][head_dim][block_m] floats), and one lock (an atomic_int) per
 * (head, q-block). */
enum { FA_BWD_GROUP_HEADS, FA_BWD_GROUP_DQ, FA_BWD_GROUP_LOCKS };

/* One packed query head, in floats, where panels = ceil(seq_q / nr):
 *   QS   [col_panels][seq_q][nr]       Q * scale
 *   QT   [panels][head_dim + 1][nr]    Q * scale * log2(e); last row: LSE * log2(e)
 *   DOS  [col_panels_v][seq_q][nr]     dO
 *   DOT  [panels][head_dim_v + 1][nr]  dO^T; last row: D = rowsum(dO * O)
 * Q and dO rows are the B operands of dK and dV, read nr columns at a
 * time, so each nr-column slice of them is contiguous (zero past head_dim,
 * head_dim_v).
 * On the bf16 dot-product route QT and DOT hold pairs of bf16 (the same
 * room suffices). */
enum { FA_BWD_HEAD_QS, FA_BWD_HEAD_QT, FA_BWD_HEAD_DOS, FA_BWD_HEAD_DOT };

/* One thread's tiles, in floats (d = head_dim, dp = head_dim_pad; dv,
 * dvp likewise of head_dim_v):
 *   KAUG, VAUG  [block_n][d + 1], [block_n][dv + 1]
 *                                  K and V rows with a -1 column (A of S^T, dP^T)
 *   KT          [d][block_n]       K^T (A of dQ^T)
 *   DK, DV      [block_n][dp], [block_n][dvp]  the item's accumulators
 *   ST, DPT     [block_n][tile_ld] S^T/P^T and dP^T/dS^T
 *   DQT         [d][block_m]       a step's dQ^T, before the locked add
 *   ROW         packing: Q, dO and O rows; reducing: 16 dQ rows
 *   COLS        dot route, softcap or dropout: a step's LSE * log2(e) and D per query */
enum { FA_BWD_THREAD_KAUG, FA_BWD_THREAD_VAUG, FA_BWD_THREAD_KT, FA_BWD_THREAD_DK,
       FA_BWD_THREAD_DV, FA_BWD_THREAD_ST, FA_BWD_THREAD_DPT, FA_BWD_THREAD_DQT,
       FA_BWD_THREAD_ROW, FA_BWD_THREAD_COLS, FA_BWD_THREAD_DCAP,
       FA_BWD_THREAD_DROP /* dropout: Z of a tile, [keys][tile_ld] */ };

#endif
