/*
 * The score stage: the one step between the scores S = Q K^T of a tile and
 * the softmax that reads them (the forward's and decode's online softmax,
 * the backward's recomputed P). Every change to a score happens here.
 *
 * In this order (the header's), on the base-2 logits the drivers carry
 * (scale * log2(e) folded in, so softcap and slopes are too):
 *   softcap          s = cap * tanh(s / cap)
 *   ALiBi            s -= slope * |i + diag - j|
 *   the bounds' mask (core/mask.h), only on tiles whose key range it cuts
 *                    (`full` = 0): hidden keys become -inf, so the softmax
 *                    gives them P = 0 exactly.
 * Additive bias tensors and boolean masks go in the same place, between
 * ALiBi and the bounds. Attention sinks are not a score change: they join
 * the softmax's denominator at the end of each row (driver/softmax.h).
 * Dropout acts on P after the softmax statistics.
 *
 * In the backward the tile is transposed (keys down the rows) and already
 * holds S - LSE (the subtraction rides in the GEMM, driver/bwd_block.c):
 * ALiBi applies there unchanged; the softcap needs S itself, so it gets
 * each query's LSE back (S = (S - LSE) + LSE, exact enough: the same
 * rounding the LSE already carries) and keeps 1 - tanh^2, the factor dS
 * needs.
 */
#ifndef FA_DRIVER_SCORE_H
#define FA_DRIVER_SCORE_H

#include <math.h>

#include "core/mask.h"
#include "core/problem.h"

/* The score stage of one (sequence, query head). */
typedef struct fa_scores {
    const fa_mask *mask;
    float cap2;   /* softcap in base 2; 0: off */
    float slope2; /* ALiBi slope in base 2; 0: off */
} fa_scores;

static inline fa_scores fa_scores_of(const fa_problem *pb, const fa_seq *s, int64_t h) {
    fa_scores sc;
    sc.mask = &s->mask;
    sc.cap2 = pb->softcap2;
    sc.slope2 = pb->alibi ? pb->alibi[s->idx * pb->alibi_stride + h] * 1.4426950408889634f : 0.0f;
    return sc;
}

/* ALiBi's term for query i, key j. */
static inline float fa_alibi2(const fa_scores *sc, int64_t i, int64_t j) {
    const int64_t dist = i + sc->mask->diag - j;
    return -sc->slope2 * (float)(dist < 0 ? -dist : dist);
}

/* One row of scores: keys [j0, j0 + n) of query i. */
static inline void fa_score_row(const fa_scores *sc, float *row, int64_t i, int64_t j0, int64_t n,
                                int full) {
    if (sc->cap2 != 0.0f) {
        const float cap = sc->cap2, inv = 1.0f / sc->cap2;
        for (int64_t j = 0; j < n; j++) row[j] = cap * tanhf(row[j] * inv);
    }
    if (sc->slope2 != 0.0f)
        for (int64_t j = 0; j < n; j++) row[j] += fa_alibi2(sc, i, j0 + j);
    if (!full) fa_mask_row(sc->mask, row, i, j0, n);
}

/* A transposed tile (the backward's S^T - LSE): row r is key j0 + r,
 * column c is query i0 + c, for c < rows. With a softcap, lse2[c] is the
 * base-2 LSE of column c and dcap receives 1 - tanh^2 of each element
 * (same layout as st). */
static inline void fa_score_tile_t(const fa_scores *sc, float *st, int64_t ld, int keys, int64_t i0,
                                   int64_t rows, int64_t j0, int full, const float *lse2,
                                   float *dcap) {
    if (sc->cap2 != 0.0f) {
        const float cap = sc->cap2, inv = 1.0f / sc->cap2;
        for (int r = 0; r < keys; r++)
            for (int64_t c = 0; c < rows; c++) {
                float *e = st + r * ld + c;
                if (isinf(lse2[c])) { /* a query that sees no key: P = 0 already */
                    dcap[r * ld + c] = 0.0f;
                    continue;
                }
                const float t = tanhf((*e + lse2[c]) * inv);
                *e = cap * t - lse2[c];
                dcap[r * ld + c] = 1.0f - t * t;
            }
    }
    if (sc->slope2 != 0.0f)
        for (int r = 0; r < keys; r++)
            for (int64_t c = 0; c < rows; c++) st[r * ld + c] += fa_alibi2(sc, i0 + c, j0 + r);
    if (!full) fa_mask_tile_t(sc->mask, st, ld, keys, i0, rows, j0);
}

#endif
