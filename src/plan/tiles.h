/*
 * Tile choice and workspace layout for the forward pass. Where each tile
 * comes from, first match wins:
 *   1. params.block_m / block_n, when not 0;
 *   2. the environment, FLASHATTN_BLOCK_M / FLASHATTN_BLOCK_N (forward only);
 *   3. the tuning file FLASHATTN_TUNE_FILE names (plan/tune_file.h);
 *   4. the automatic rule (plan/tile_rule.c), from the detected caches.
 * User tiles (1, 2) that the kernels cannot run are errors; a tuning file's
 * are skipped with a warning (the file may predate the kernels).
 */
#ifndef FA_TILES_H
#define FA_TILES_H

#include <stddef.h>
#include <stdint.h>

#include "core/layout.h"
#include "core/problem.h"
#include "kernels/kernels.h"
#include "plan/tile_rule.h"

typedef struct fa_fwd_plan {
    int block_m;            /* query rows per work item */
    int block_n;            /* keys per inner step; multiple of kern->nr */
    int threads;
    const char *source_m, *source_n; /* "params", "environment", "tuning file", "rule" */
    int64_t groups_per_pass;  /* (batch, kv-head) groups packed at once */
    /* bf16 dot-product route: Q, K and V are bf16 and kern has gemm_bf16.
     * K and V are then packed as bf16 pairs (fa_pack_k_pairs, fa_pack_v_pairs,
     * within the f32 sizes below), Q is used as given, and P is rounded to
     * bf16 for P V, as FlashAttention-2 does on GPUs. */
    int bf16_dot;
    /* the 8-bit route's P V on gemm_bf16 (pb->bf16_pv on a table with
     * bf16_dot): V packed as rounded bf16 pairs, P as bf16 */
    int i8_pv_dot;
    /* A varlen batch without a boolean mask, on the rule's tiles: each
     * sequence runs on the tiles the rule gives it alone (fa_seq_tiles),
     * as a dense call on it would, so its rows get that call's bits;
     * block_m and block_n above are then the largest of them (they size
     * the thread tiles). */
    int per_seq;
    fa_layout ws;             /* FA_FWD_WS_*: the whole workspace */
    fa_layout group;          /* FA_FWD_GROUP_*: one group's packed K and V */
    fa_layout thread;         /* FA_FWD_THREAD_*: one thread's tiles */
    size_t workspace_bytes;   /* ws, plus alignment slack */
} fa_fwd_plan;

/* The workspace: groups_per_pass group areas, one tile area a thread, the
 * boolean mask's tile summary (driver/score_tiles.h; empty without a
 * mask): [mask slices][ceil(seq_q / block_m)][ceil(seq_k / block_n)] bytes,
 * and each thread's ranges of a pass's packing and q-blocks
 * (core/share.h: threads ranges of packing, then threads of q-blocks). */
enum { FA_FWD_WS_GROUPS, FA_FWD_WS_THREADS, FA_FWD_WS_TILES, FA_FWD_WS_SEQS, FA_FWD_WS_SHARE };
/* per_seq: each sequence's tiles and the work items before it, batch + 1
 * entries (the last: the total), filled by fa_fwd_run. */
typedef struct {
    int32_t block_m, block_n;
    int64_t items_before;
} fa_fwd_seq_tiles;
/* A group's area: K as [ceil(seq_k / nr)][head_dim][nr] floats (the K
 * panels, fa_pack_k), V as column panels of [seq_k][w] floats (fa_pack_v);
 * on the bf16 dot-product route their pairs, in the same room. */
/* Keys per forward packing work item, and per smoothing chunk of the
 * 8-bit Q K^T (driver/int8_qk.h): the two agree, so an item packs its
 * chunk's mean with its keys, with no pass before. */
static inline int64_t fa_pack_chunk(const fa_kernels *kern) {
    return (512 + kern->nr - 1) / kern->nr * kern->nr;
}

enum { FA_FWD_GROUP_K, FA_FWD_GROUP_V,
       /* the 8-bit Q K^T's keys (driver/int8_qk.h; then K's f32 room is
        * empty), empty otherwise */
       FA_FWD_GROUP_K8, FA_FWD_GROUP_KSUM, FA_FWD_GROUP_KSCALE, FA_FWD_GROUP_KMEAN,
       /* the 8-bit P V's values and per-chunk channel scales (then V's
        * f32 room is empty), empty otherwise */
       FA_FWD_GROUP_V8, FA_FWD_GROUP_VSCALE };
/* A thread's tiles: Q [block_m][head_dim] (or its bf16 rows), S/P
 * [block_m][block_n], acc [block_m][head_dim_pad], the running max and sum
 * [block_m], and on the dot route P as bf16 [block_m][block_n]. */
enum { FA_FWD_THREAD_Q, FA_FWD_THREAD_S, FA_FWD_THREAD_ACC, FA_FWD_THREAD_MAX,
       FA_FWD_THREAD_SUM, FA_FWD_THREAD_P16,
       /* the double totals of rows longer than FA_SUM_CHUNK keys
        * (driver/softmax.h); empty when seq_k is not */
       FA_FWD_THREAD_TOTAL_ACC, FA_FWD_THREAD_TOTAL_SUM, FA_FWD_THREAD_TOTAL_MAX,
       /* the 8-bit Q K^T's rows of Q (gemm_i8's A), their scales and mean
        * terms, and the packing's room (driver/int8_qk.h); empty otherwise */
       FA_FWD_THREAD_Q8, FA_FWD_THREAD_QSCALE, FA_FWD_THREAD_QADD, FA_FWD_THREAD_I8TMP,
       /* the 8-bit P V's P [block_m][block_n] as u8 and its row scales */
       FA_FWD_THREAD_P8, FA_FWD_THREAD_PSCALE };

/* Fill plan from the problem and the user's (already range-checked) params.
 * Returns BAD_TILE for user tiles the kernels cannot run, OVERFLOW when the
 * workspace size does not fit in size_t. */
flashattn_status fa_plan_fwd(const fa_problem *pb, const flashattn_params *p,
                             const fa_kernels *kern, fa_fwd_plan *plan);

/* The automatic rule's view of a problem (plan/tile_rule.h): sizes, the
 * mask's edges and the mean keys per row, kern's register tile, the
 * detected caches. The tools use it to show the rule's choice. */
void fa_tile_query_of(const fa_problem *pb, const fa_kernels *kern, int threads, fa_tile_query *q);

/* The rule's tiles for sequence b of pb alone, as a dense call on it with
 * one thread would choose them (plan->per_seq). */
void fa_seq_tiles(const fa_problem *pb, const fa_kernels *kern, int64_t b, int *block_m, int *block_n);

/* Whether a tile the user gave (`what` names where: "params.block_n",
 * "FLASHATTN_BLOCK_N", "--block-n") can run on kern: >= 1, <= FA_MAX_BLOCK,
 * block_n a multiple of kern->nr. Returns BAD_TILE via fa_fail with a
 * message naming the broken constraint. */
flashattn_status fa_check_tile(const char *what, int64_t value, int is_block_n,
                               const fa_kernels *kern);

/* Largest block the kernels accept in either dimension. */
#define FA_MAX_BLOCK 4096

#endif
