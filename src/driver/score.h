/*
 * The score stage: the one step between the scores S = Q K^T of a tile and
 * the softmax that reads them (the forward's and decode's online softmax,
 * the backward's recomputed P). Every change to a score happens here.
 *
 * Today it applies the mask (core/mask.h), only on tiles whose key range
 * the mask cuts (`full` = 0): hidden keys become -inf, so the softmax
 * gives them P = 0 exactly. Score modifiers go here, in this order, on the
 * base-2 logits the drivers carry (scale * log2(e) folded in):
 *   softcap (on the scaled logits), additive bias / ALiBi, boolean masks,
 *   then the bounds' mask.
 * Dropout is not a score change: it acts on P after the softmax
 * statistics (the LSE is of the undropped P).
 *
 * In the backward the tile is transposed (keys down the rows) and already
 * holds S - LSE (the subtraction rides in the GEMM, driver/bwd_block.c):
 * additive terms apply there unchanged; a softcap needs S before it.
 */
#ifndef FA_DRIVER_SCORE_H
#define FA_DRIVER_SCORE_H

#include "core/mask.h"
#include "core/problem.h"

/* One row of scores: keys [j0, j0 + n) of query i of sequence s. */
static inline void fa_score_row(const fa_seq *s, float *row, int64_t i, int64_t j0, int64_t n,
                                int full) {
    if (!full) fa_mask_row(&s->mask, row, i, j0, n);
}

/* A transposed tile (the backward's S^T - LSE): row r is key j0 + r,
 * column c is query i0 + c, for c < rows. */
static inline void fa_score_tile_t(const fa_seq *s, float *st, int64_t ld, int keys, int64_t i0,
                                   int64_t rows, int64_t j0, int full) {
    if (!full) fa_mask_tile_t(&s->mask, st, ld, keys, i0, rows, j0);
}

#endif
