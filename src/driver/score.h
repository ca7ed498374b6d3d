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

#include "core/dtype.h"
#include "core/mask.h"
#include "core/problem.h"
#include "kernels/kernels.h"
#include "plan/tiles.h" /* FA_MAX_BLOCK */

/* A bias or mask array's (sequence, head) slice: element (i, j) at
 * base + i * sq + j * sk (elements; 0 on broadcast dimensions). */
typedef struct fa_score_slice {
    const char *base;
    int64_t sq, sk;
} fa_score_slice;

/* The slice of t for sequence b, query head h, and its index among the
 * slices the array holds (broadcast dimensions count once). */
static inline fa_score_slice fa_score_slice_of(const flashattn_scores *t, size_t elem, int64_t b,
                                               int64_t h, int64_t *index) {
    const int64_t tb = t->batch > 1 ? b : 0, th = t->heads > 1 ? h : 0;
    fa_score_slice s;
    s.base = (const char *)t->data + (size_t)(tb * t->stride_batch + th * t->stride_head) * elem;
    s.sq = t->seq_q > 1 ? t->stride_q : 0;
    s.sk = t->seq_k > 1 ? t->stride_k : 0;
    if (index) *index = tb * t->heads + th;
    return s;
}

/* Tiles of a boolean mask, summarised once per call (driver/score_tiles.c). */
enum { FA_TILE_HIDDEN = 0, FA_TILE_OPEN = 1, FA_TILE_MIXED = 2 };

/* The score stage of one (sequence, query head). */
typedef struct fa_scores {
    const fa_mask *mask;
    float cap2;   /* softcap in base 2; 0: off */
    float slope2; /* ALiBi slope in base 2; 0: off */
    fa_score_slice bias, bmask;
    flashattn_dtype bias_dt;
    int has_bias, has_mask;
    const uint8_t *tiles; /* the mask's tile states of this slice, or NULL */
    int64_t tiles_kb;     /* kv-blocks per q-block row of tiles */
} fa_scores;

/* tiles: the call's summary (FA_TILE_*, [mask slices][qblocks][kvblocks]),
 * or NULL. */
static inline fa_scores fa_scores_of_tiles(const fa_problem *pb, const fa_seq *s, int64_t h,
                                           const uint8_t *tiles, int64_t qblocks, int64_t kvblocks) {
    fa_scores sc;
    sc.mask = &s->mask;
    sc.cap2 = pb->softcap2;
    sc.slope2 = pb->alibi ? pb->alibi[s->idx * pb->alibi_stride + h] * 1.4426950408889634f : 0.0f;
    sc.has_bias = pb->bias != NULL, sc.has_mask = pb->mask != NULL;
    sc.bias_dt = sc.has_bias ? pb->bias->dtype : FLASHATTN_F32;
    if (sc.has_bias) sc.bias = fa_score_slice_of(pb->bias, (size_t)fa_dtype_bytes(sc.bias_dt), s->idx, h, NULL);
    int64_t slice = 0;
    if (sc.has_mask) sc.bmask = fa_score_slice_of(pb->mask, 1, s->idx, h, &slice);
    sc.tiles = tiles && sc.has_mask ? tiles + slice * qblocks * kvblocks : NULL;
    sc.tiles_kb = kvblocks;
    return sc;
}

static inline fa_scores fa_scores_of(const fa_problem *pb, const fa_seq *s, int64_t h) {
    return fa_scores_of_tiles(pb, s, h, NULL, 0, 0);
}

/* The mask's state of tile (qb, kb); MIXED without a summary. */
static inline int fa_score_tile(const fa_scores *sc, int64_t qb, int64_t kb) {
    return sc->tiles ? sc->tiles[qb * sc->tiles_kb + kb] : FA_TILE_MIXED;
}

/* Bias (base 2) and boolean mask on n scores of query i from key j0, in
 * place; elementwise = 0 skips the mask (a tile it leaves open). */
static inline void fa_score_arrays(const fa_scores *sc, float *x, int64_t stride, int64_t i, int64_t j0,
                                   int64_t n, int elementwise) {
    if (sc->has_bias) {
        const size_t es = (size_t)fa_dtype_bytes(sc->bias_dt);
        const char *row = sc->bias.base + (size_t)(i * sc->bias.sq) * es;
        /* -inf hides the key outright, whatever its logit (a NaN one too:
         * the rule for non-finite inputs, flashattn.h) */
        for (int64_t j = 0; j < n; j++) {
            const float b = fa_widen(row + (size_t)((j0 + j) * sc->bias.sk) * es, sc->bias_dt, 0);
            x[j * stride] = b == -INFINITY ? -INFINITY : x[j * stride] + b * 1.4426950408889634f;
        }
    }
    if (sc->has_mask && elementwise) {
        const uint8_t *row = (const uint8_t *)sc->bmask.base + i * sc->bmask.sq;
        for (int64_t j = 0; j < n; j++)
            if (!row[(j0 + j) * sc->bmask.sk]) x[j * stride] = -INFINITY;
    }
}

/* One past the last key of [j0, j0 + n) the boolean mask opens to any of
 * rows [i0, i1) (0: it opens none): where a strip of those rows can stop
 * on a mixed tile, for the bytes the tile's masking reads anyway. */
static inline int64_t fa_mask_open_end(const fa_scores *sc, int64_t i0, int64_t i1, int64_t j0, int64_t n) {
    int64_t end = 0;
    for (int64_t i = i0; i < i1 && end < n; i++) {
        const uint8_t *row = (const uint8_t *)sc->bmask.base + i * sc->bmask.sq + j0 * sc->bmask.sk;
        for (int64_t j = n - 1; j >= end; j--)
            if (row[j * sc->bmask.sk]) {
                end = j + 1;
                break;
            }
    }
    return end;
}

/* One row of scores: keys [j0, j0 + n) of query i; tile: the boolean
 * mask's state there (FA_TILE_MIXED without a summary). */
static inline void fa_score_row(const fa_kernels *kern, const fa_scores *sc, float *row, int64_t i,
                                int64_t j0, int64_t n, int full, int tile) {
    if (sc->cap2 != 0.0f) kern->softcap_row(row, n, sc->cap2, NULL);
    /* |i + diag - j| as at - j in float (n <= FA_MAX_BLOCK): exact while
     * the distance is below 2^24, within an ulp of the logit past it */
    if (sc->slope2 != 0.0f) kern->alibi_row(row, n, (float)(i + sc->mask->diag - j0), sc->slope2);
    fa_score_arrays(sc, row, 1, i, j0, n, tile == FA_TILE_MIXED);
    if (!full) fa_mask_row(sc->mask, row, i, j0, n);
}

/* A transposed tile (the backward's S^T - LSE): row r is key j0 + r,
 * column c is query i0 + c, for c < rows. With a softcap, lse2[c] is the
 * base-2 LSE of column c and dcap receives 1 - tanh^2 of each element
 * (same layout as st). */
static inline void fa_score_tile_t(const fa_kernels *kern, const fa_scores *sc, float *st, int64_t ld,
                                   int keys, int64_t i0, int64_t rows, int64_t j0, int full, int tile,
                                   const float *lse2, float *dcap) {
    if (sc->cap2 != 0.0f)
        for (int r = 0; r < keys; r++) {
            float *e = st + r * ld, *dc = dcap + r * ld;
            /* a query that sees no key (lse2 = +inf) has P = 0 already */
            for (int64_t c = 0; c < rows; c++) e[c] = isinf(lse2[c]) ? 0.0f : e[c] + lse2[c];
            kern->softcap_row(e, rows, sc->cap2, dc);
            for (int64_t c = 0; c < rows; c++)
                if (isinf(lse2[c])) e[c] = -INFINITY, dc[c] = 0.0f;
                else e[c] -= lse2[c];
        }
    if (sc->slope2 != 0.0f) /* key j0 + r down row r: |a - c| = |i0 + c + diag - j0 - r| */
        for (int r = 0; r < keys; r++)
            kern->alibi_row(st + r * ld, rows, (float)(j0 + r - i0 - sc->mask->diag), sc->slope2);
    if (sc->has_bias || sc->has_mask) /* query c's scores run down column c */
        for (int64_t c = 0; c < rows; c++)
            fa_score_arrays(sc, st + c, ld, i0 + c, j0, keys, tile == FA_TILE_MIXED);
    if (!full) fa_mask_tile_t(sc->mask, st, ld, keys, i0, rows, j0);
}

#endif
