/*
 * The automatic forward tiles, from a footprint model.
 *
 * What one thread touches (fa_tile_footprint, elements widened to f32 by
 * the kernels; d = head_dim, dp = d rounded up to 16):
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
 * It depends on the caches, head_dim and seq_k only, never on threads.
 *
 * block_m: the largest multiple of MR up to 256 whose per-thread tiles fit
 * half of L2. Each q-block streams all its K/V rows from L3 or memory once,
 * so more rows per block means fewer passes; a multiple of MR keeps every
 * register tile full. Then fa_tile_fit_threads lowers it until every
 * thread has 4 work items (batch x heads x q-blocks), so short sequences
 * still use every core: the source documents' dynamic choice by length.
 */
#include "plan/tile_rule.h"

static int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

void fa_tile_footprint_of(const fa_tile_query *q, int block_m, int block_n, fa_tile_footprint *f) {
    const int64_t e = q->elem_bytes, d = q->head_dim, dp = round_up(d, 16);
    const int64_t bm = block_m, bn = round_up(block_n, q->nr), mr = q->mr < bm ? q->mr : bm;
    f->q_tile = bm * d * e;
    f->k_block = bn * d * e;
    f->v_block = bn * dp * e;
    f->s_tile = bm * bn * 4;
    f->o_acc = bm * dp * 4;
    f->stats = 2 * bm * 4;
    f->tiles = f->q_tile + f->k_block + f->v_block + f->s_tile + f->o_acc + f->stats;
    f->qk_step = d * q->nr * e + mr * d * e;
    f->pv_step = bn * q->nr * e + mr * bn * 4;
}

int fa_tile_fit_threads(const fa_tile_query *q, int block_m) {
    int bm = block_m;
    const int64_t heads = q->batch * q->heads_q;
    while (bm > q->mr && heads * ((q->seq_q + bm - 1) / bm) < 4 * (int64_t)q->threads) bm -= q->mr;
    if (q->seq_q < bm) bm = (int)round_up(q->seq_q > 0 ? q->seq_q : 1, q->mr);
    return bm;
}

void fa_tile_rule(const fa_tile_query *q, int *block_m, int *block_n) {
    const int64_t l1 = q->l1d_bytes > 0 ? q->l1d_bytes : FA_TILE_DEFAULT_L1D;
    const int64_t l2 = q->l2_bytes > 0 ? q->l2_bytes : FA_TILE_DEFAULT_L2;
    fa_tile_footprint f;
    int bn = q->nr;
    for (int c = 512; c >= q->nr; c /= 2) {
        if (c % q->nr) continue;
        fa_tile_footprint_of(q, q->mr, c, &f);
        if (f.pv_step <= l1 && f.k_block + f.v_block <= l2 / 4) {
            bn = c;
            break;
        }
    }
    const int64_t kneed = round_up(q->seq_k > 0 ? q->seq_k : 1, q->nr);
    if (kneed < bn) bn = (int)kneed;
    int bm = q->mr;
    for (int c = 256 / q->mr * q->mr; c >= q->mr; c -= q->mr) {
        fa_tile_footprint_of(q, c, bn, &f);
        if (f.tiles <= l2 / 2) {
            bm = c;
            break;
        }
    }
    *block_n = bn;
    *block_m = fa_tile_fit_threads(q, bm);
}
