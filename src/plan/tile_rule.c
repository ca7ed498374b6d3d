/*
 * The automatic forward tiles, from a footprint model.
 *
 * What one thread touches (fa_tile_footprint, elements widened to f32 by
 * the kernels; d = head_dim, dp = head_dim_v (V's and O's) rounded up to
 * 16):
 *
 *   per kv-step, inner loops (want L1d):
 *     Q.K^T: one K panel, d x NR, is reused by every MR-row register tile
 *            of the Q tile, which streams by;
 *     P.V:   one NR-wide column slice of V, block_n x NR, is reused by every
 *            MR-row tile of P, which streams by.
 *   per work item (want L2, with room left for the K/V rows of the next
 *   step arriving):
 *     Q tile block_m x d, S/P tile block_m x block_n, O accumulator
 *     block_m x dp, row max and sum, and the current K/V block
 *     block_n x (d + dp).
 *
 * block_n: the largest candidate (512, 256, ... down to NR, multiples of
 * NR) whose P.V step fits L1d and whose K/V block takes at most a quarter
 * of L2. Larger blocks amortise the per-block work of the online softmax
 * (row max, rescaling the accumulator, one GEMM call per register tile).
 * But never below FA_TILE_MIN_KEYS while the P.V step at that length still
 * fits L1d: where L2 is small the quarter gives short blocks, and 256 keys
 * ran faster at every length and head_dim tried although K and V then
 * overflow L2 (the backward's items showed the same, FA_BWD_MIN_KEYS;
 * docs/performance.md, "Forward: kv-blocks of at least 256 keys"). block_m
 * is still sized against the quarter-of-L2 block: the floor lengthens the
 * key loop, not the tiles a q-block keeps. block_n depends on the caches,
 * head_dim and seq_k only, never on threads.
 *
 * block_m: a multiple of MR (every register tile full), as large as lets
 * the Q tile and one K panel share L1d: the Q.K^T step sweeps the whole Q
 * tile once per K panel, and from L1 those sweeps cost nothing. It is kept
 * at 96 rows or more all the same: each q-block streams all the K/V rows it
 * sees from L3 or memory, block_m / 2 FLOP per byte of that stream, and 96
 * rows keep it at 48 FLOP/byte, several times the balance of a server
 * core's FP32 peak and its share of memory bandwidth (`flashattn peak`),
 * so it stays hidden when other work takes most of the bandwidth. At most 256 rows, and the per-thread tiles must
 * fit half of L2.
 *
 * Bandwidth is not all a stream costs, though: once a group's K and V
 * are more than twice L2, none of them is still in L2 when the next
 * q-block comes back to them, and every q-block reads them again from
 * an L3 that a shared host's other tenants also fill. There the floor is
 * 192 rows, which halves those passes: on a busy host the forward took
 * 0.7-0.95x the time at 8192 keys, on a quiet one it was level
 * (docs/performance.md, "Tile rule"). Where K and V are within twice
 * L2, 192 rows measured slower than 96 (part of K and V does survive in
 * L2 between q-blocks, and larger tiles leave less room for it).
 *
 * Masks take the unmasked tiles. A kv-block that a mask edge cuts is
 * computed only up to each strip of MR rows' last visible key (and from
 * its first, under a window), rounded to whole exp2 grains
 * (driver/fwd_block.c), so a larger block adds little masked work, while
 * smaller blocks add per-block steps (the softmax's calls, one GEMM call
 * per register tile). The square tiles an earlier rule took once the
 * q-block's diagonal wasted over 5% measured 4-7% slower at causal seq
 * 512-2048 (96 x 96 against 96 x 256), 3-6% slower under sliding
 * windows, and level at 4096-8192 (192 x 192 against 180 x 256, 0.98-1.04)
 * (docs/performance.md, "Tile rule under masks").
 *
 * The 8-bit P V route (q->pv8) counts K, V and P in bytes, one each an
 * element, so block_n reaches 512 at head_dim 128: there the masked
 * products a larger block adds cost a quarter of f32's while the
 * per-block steps (the softmax's calls, P's quantisation, the tiles'
 * epilogues) cost the same (docs/precision.md).
 *
 * Finally fa_tile_fit_threads lowers block_m until every thread has 4
 * work items (batch x heads x q-blocks), so short sequences still use
 * every core: the source documents' dynamic choice by length.
 */
#include "plan/tile_rule.h"

#include "core/size.h"

/* V's and O's head_dim, padded as the kernels store them. */
static int64_t padded_dv(const fa_tile_query *q) {
    return fa_round_up_i64(q->head_dim_v > 0 ? q->head_dim_v : q->head_dim, 16);
}

void fa_tile_footprint_of(const fa_tile_query *q, int block_m, int block_n, fa_tile_footprint *f) {
    const int64_t e = q->elem_bytes, d = q->head_dim;
    const int64_t dp = padded_dv(q);
    const int64_t bm = block_m, bn = fa_round_up_i64(block_n, q->nr), mr = q->mr < bm ? q->mr : bm;
    /* the 8-bit P V route: K, V and the P the P.V step reads are bytes */
    const int64_t kv = q->pv8 ? 1 : e, p = q->pv8 ? 1 : 4;
    f->q_tile = bm * d * (q->pv8 ? e + 1 : e);
    f->k_block = bn * d * kv;
    f->v_block = bn * dp * kv;
    f->s_tile = bm * bn * (q->pv8 ? 4 + 1 : 4);
    f->o_acc = bm * dp * 4;
    f->stats = 2 * bm * 4;
    f->tiles = f->q_tile + f->k_block + f->v_block + f->s_tile + f->o_acc + f->stats;
    f->qk_step = d * q->nr * kv + mr * d * kv;
    f->pv_step = bn * q->nr * kv + mr * bn * p;
}

int fa_tile_fit_threads(const fa_tile_query *q, int block_m) {
    int bm = block_m;
    const int64_t heads = q->batch * q->heads_q;
    while (bm > q->mr && heads * ((q->seq_q + bm - 1) / bm) < 4 * (int64_t)q->threads) bm -= q->mr;
    if (q->seq_q < bm) bm = (int)fa_round_up_i64(q->seq_q > 0 ? q->seq_q : 1, q->mr);
    return bm;
}

void fa_tile_rule(const fa_tile_query *q, int *block_m, int *block_n) {
    const int64_t l1 = q->l1d_bytes > 0 ? q->l1d_bytes : FA_TILE_DEFAULT_L1D;
    const int64_t l2 = q->l2_bytes > 0 ? q->l2_bytes : FA_TILE_DEFAULT_L2;
    fa_tile_footprint f;
    int bn = q->nr;
    for (int c = FA_MAX_TILE_RULE; c >= q->nr; c /= 2) {
        if (c % q->nr) continue;
        fa_tile_footprint_of(q, q->mr, c, &f);
        if (f.pv_step <= l1 && f.k_block + f.v_block <= l2 / 4) {
            bn = c;
            break;
        }
    }
    const int64_t kneed = fa_round_up_i64(q->seq_k > 0 ? q->seq_k : 1, q->nr);
    /* the block the block_m below is sized against; the floor only
     * lengthens the key loop */
    const int model_bn = kneed < bn ? (int)kneed : bn;
    if (bn < FA_TILE_MIN_KEYS && FA_TILE_MIN_KEYS % q->nr == 0) {
        fa_tile_footprint_of(q, q->mr, FA_TILE_MIN_KEYS, &f);
        if (f.pv_step <= l1) bn = FA_TILE_MIN_KEYS;
    }
    if (kneed < bn) bn = (int)kneed;
    const int64_t kvb = q->pv8 ? 1 : q->elem_bytes; /* K's (and the Q.K^T step's Q rows') */
    const int64_t row = q->head_dim * kvb, panel = q->nr * row;
    int64_t cap = (l1 - panel) / row / q->mr * q->mr;
    /* the whole of K and V (in double: seq_k may be near the int64 limit) */
    const double kv = (double)kneed * (double)(q->head_dim + padded_dv(q)) * (double)kvb;
    const int64_t floor_rows = kv > (double)FA_TILE_STREAM_L2 * (double)l2 ? FA_TILE_STREAM_ROWS : FA_TILE_MIN_ROWS;
    const int64_t floor_m = (floor_rows + q->mr - 1) / q->mr * q->mr;
    if (cap < floor_m) cap = floor_m;
    if (cap > 256) cap = 256 / q->mr * q->mr;
    int bm = q->mr;
    for (int c = (int)cap; c >= q->mr; c -= q->mr) {
        fa_tile_footprint_of(q, c, model_bn, &f);
        if (f.tiles <= l2 / 2) {
            bm = c;
            break;
        }
    }
    *block_n = bn;
    *block_m = fa_tile_fit_threads(q, bm);
}
