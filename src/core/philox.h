/*
 * Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11; the Random123 library's definition): a
 * counter-based generator, four 32-bit outputs a pure function of a
 * 128-bit counter and a 64-bit key. Dropout draws its masks from it, so a
 * mask element is recomputed anywhere (the backward, another thread, another
 * tile) without being stored. tests/test_dropout.c checks the published
 * known-answer vectors.
 */
#ifndef FA_CORE_PHILOX_H
#define FA_CORE_PHILOX_H

#include <stdint.h>

#define FA_PHILOX_M0 0xD2511F53u
#define FA_PHILOX_M1 0xCD9E8D57u
#define FA_PHILOX_W0 0x9E3779B9u
#define FA_PHILOX_W1 0xBB67AE85u

static inline void fa_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        const uint64_t p0 = (uint64_t)FA_PHILOX_M0 * c0, p1 = (uint64_t)FA_PHILOX_M1 * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
        k0 += FA_PHILOX_W0, k1 += FA_PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* One call's dropout stream: element (b, h, i, j) of a problem with
 * heads_q query heads is kept when half j % 2 (low first) of word
 * (j / 2) % 4 of
 *   philox(counter = {j / 8, i, lo(offset), hi(offset)},
 *          key = {lo(seed), hi(seed) ^ (b * heads_q + h) * W0})
 * is at least threshold (the header's rule). Sixteen bits an element: one
 * Philox call draws eight, and a rate of 2^-16 resolution is far finer
 * than a keep rate can be measured to. */
typedef struct fa_dropout {
    uint64_t seed, offset;
    uint32_t threshold; /* round(p * 2^16), at most 2^16 - 1 */
    float scale;        /* 1 / (1 - p); 0: no dropout */
} fa_dropout;

static inline int fa_dropout_on(const fa_dropout *d) { return d->scale != 0.0f; }

/* The 16 bits of column j in the output r of its group's call. */
static inline uint32_t fa_dropout_bits(const uint32_t r[4], int64_t j) {
    return (r[(j >> 1) & 3] >> ((j & 1) * 16)) & 0xFFFFu;
}

/* The key of (sequence b, head h) and the counter words of row i. */
static inline void fa_dropout_key(const fa_dropout *d, int64_t bh, uint32_t key[2]) {
    key[0] = (uint32_t)d->seed;
    key[1] = (uint32_t)(d->seed >> 32) ^ ((uint32_t)bh * FA_PHILOX_W0);
}

#endif
