/*
 * dropout_row (kernels.h) on AVX2: four Philox4x32-10 streams at once, one
 * per group of eight columns, so a step covers 32 columns. Each stream
 * lives in the low half of a 64-bit lane: VPMULUDQ then gives its whole
 * 32x32 -> 64 product, the high word is one shift away and the low word is
 * the product itself (the upper halves carry junk that no multiply reads
 * and the last step drops). The four output words of the four groups are
 * put in column order, compared as 16-bit halves (unsigned) with the
 * threshold and widened to float masks. A step that sticks out of the row
 * (a start inside a group, the row's end) runs on a copy of the columns it
 * has: the mask is a pure function of the column, so the bits are the
 * portable kernel's.
 */
#include <immintrin.h>

#include "core/philox.h"
#include "kernels/avx2/avx2.h"

typedef struct row_stream {
    __m256i key[2][10]; /* round r's key words, broadcast */
    __m256i r0c0;       /* round 0's new word 0, the same for every group */
    __m256i r0c1, c3k;  /* round 0's new word 1 (lo(M1 * c2)); c3 ^ key 1 */
    __m256i thr;        /* threshold in every 16-bit half */
    __m256 scale;
} row_stream;

static void row_stream_init(row_stream *rs, const uint32_t key[2], uint32_t row, uint64_t offset,
                            uint32_t threshold, float scale) {
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        rs->key[0][r] = _mm256_set1_epi32((int)k0), rs->key[1][r] = _mm256_set1_epi32((int)k1);
        k0 += FA_PHILOX_W0, k1 += FA_PHILOX_W1;
    }
    /* words 1..3 of every group's counter agree, so half of round 0 does */
    const uint64_t p1 = (uint64_t)FA_PHILOX_M1 * (uint32_t)offset;
    rs->r0c0 = _mm256_set1_epi32((int)((uint32_t)(p1 >> 32) ^ row ^ key[0]));
    rs->r0c1 = _mm256_set1_epi32((int)(uint32_t)p1);
    rs->c3k = _mm256_set1_epi32((int)((uint32_t)(offset >> 32) ^ key[1]));
    rs->thr = _mm256_set1_epi16((short)threshold);
    rs->scale = _mm256_set1_ps(scale);
}

/* 32 columns from column 8 * g0 (x at that column). */
static inline void step32(float *x, const row_stream *rs, int64_t g0) {
    const __m256i m0 = _mm256_set1_epi64x(FA_PHILOX_M0), m1 = _mm256_set1_epi64x(FA_PHILOX_M1);
    const __m256i g = _mm256_add_epi64(_mm256_set1_epi64x((uint32_t)g0), _mm256_setr_epi64x(0, 1, 2, 3));
    /* round 0: c0 = g; c1, c2, c3 as init computed */
    const __m256i p0 = _mm256_mul_epu32(g, m0);
    __m256i c0 = rs->r0c0, c1 = rs->r0c1;
    __m256i c2 = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), rs->c3k), c3 = p0;
    for (int r = 1; r < 10; r++) {
        const __m256i q0 = _mm256_mul_epu32(c0, m0), q1 = _mm256_mul_epu32(c2, m1);
        c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q1, 32), c1), rs->key[0][r]);
        c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q0, 32), c3), rs->key[1][r]);
        c1 = q1, c3 = q0;
    }
    /* lane l: words (0, 1) and (2, 3) of group g0 + l; then the four
     * groups' 128-bit blocks in column order */
    const __m256i a = _mm256_blend_epi32(c0, _mm256_slli_epi64(c1, 32), 0xAA);
    const __m256i b = _mm256_blend_epi32(c2, _mm256_slli_epi64(c3, 32), 0xAA);
    const __m256i lo = _mm256_unpacklo_epi64(a, b), hi = _mm256_unpackhi_epi64(a, b);
    const __m256i w[2] = {_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31)};
    for (int h = 0; h < 2; h++) {
        const __m256i keep = _mm256_cmpeq_epi16(_mm256_max_epu16(w[h], rs->thr), w[h]);
        const __m256i k[2] = {_mm256_cvtepi16_epi32(_mm256_castsi256_si128(keep)),
                              _mm256_cvtepi16_epi32(_mm256_extracti128_si256(keep, 1))};
        for (int q = 0; q < 2; q++) {
            float *xq = x + 16 * h + 8 * q;
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xq), rs->scale);
            _mm256_storeu_ps(xq, _mm256_and_ps(v, _mm256_castsi256_ps(k[q])));
        }
    }
}

void fa_dropout_row_avx2(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                         int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && j0 >= 0 && threshold < 65536u);
    row_stream rs;
    row_stream_init(&rs, key, row, offset, threshold, scale);
    /* steps of four groups from the group of j0; a step that sticks out
     * of [j0, j0 + n) runs on a copy of the columns it has */
    for (int64_t g = j0 >> 3; g << 3 < j0 + n; g += 4) {
        const int64_t c0 = g << 3; /* the step's first column */
        if (c0 >= j0 && c0 + 32 <= j0 + n) {
            step32(x + (c0 - j0), &rs, g);
            continue;
        }
        float tmp[32];
        for (int w = 0; w < 32; w++) {
            const int64_t t = c0 + w - j0;
            tmp[w] = t >= 0 && t < n ? x[t] : 0.0f;
        }
        step32(tmp, &rs, g);
        for (int w = 0; w < 32; w++) {
            const int64_t t = c0 + w - j0;
            if (t >= 0 && t < n) x[t] = tmp[w];
        }
    }
}

/*
 * dropout_cols: eight rows at once, a Philox stream each, over the groups
 * of eight keys. The rows sit in the low halves of the 64-bit lanes of two
 * vectors, rows 0, 2, 4, 6 and 1, 3, 5, 7, so that a blend puts a word of
 * all eight in row order; the two 16-bit halves of word w are keys 2w and
 * 2w + 1, one vector of eight rows each: a row of z^T as it is stored. Of
 * the counter only the row varies within a step and only the group across
 * steps, so round 0 and half of round 1 are done once a step (rows) or in
 * scalar code (groups).
 */
typedef struct cols_stream {
    __m256i key[2][10];
    uint32_t c1r0, c3k; /* c1 after round 0; hi(offset) ^ key 1 */
    uint32_t k01, k11;          /* round 1's key words */
    __m256i thr;
    __m256 scale;
} cols_stream;

static void group8(const cols_stream *cs, const __m256i hq0[2], const __m256i lq0[2], int64_t g, __m256 out[8]) {
    const __m256i m0 = _mm256_set1_epi64x(FA_PHILOX_M0), m1 = _mm256_set1_epi64x(FA_PHILOX_M1);
    /* round 0's words 2 and 3, then round 1's from the group */
    const uint64_t p0 = (uint64_t)FA_PHILOX_M0 * (uint32_t)g;
    const uint32_t c2 = (uint32_t)(p0 >> 32) ^ cs->c3k, c3 = (uint32_t)p0;
    const uint64_t q1 = (uint64_t)FA_PHILOX_M1 * c2;
    const __m256i c0r1 = _mm256_set1_epi32((int)((uint32_t)(q1 >> 32) ^ cs->c1r0 ^ cs->k01));
    const __m256i c1r1 = _mm256_set1_epi32((int)(uint32_t)q1), c2x = _mm256_set1_epi32((int)(c3 ^ cs->k11));
    __m256i w[2][4];
    for (int h = 0; h < 2; h++) {
        __m256i c0 = c0r1, c1 = c1r1, c2v = _mm256_xor_si256(hq0[h], c2x), c3v = lq0[h];
        for (int r = 2; r < 10; r++) {
            const __m256i a = _mm256_mul_epu32(c0, m0), b = _mm256_mul_epu32(c2v, m1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(b, 32), c1), cs->key[0][r]);
            c2v = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(a, 32), c3v), cs->key[1][r]);
            c1 = b, c3v = a;
        }
        w[h][0] = c0, w[h][1] = c1, w[h][2] = c2v, w[h][3] = c3v;
    }
    const __m256i low = _mm256_set1_epi32(0xFFFF);
    for (int k = 0; k < 4; k++) {
        const __m256i word = _mm256_blend_epi32(w[0][k], _mm256_slli_epi64(w[1][k], 32), 0xAA);
        const __m256i half[2] = {_mm256_and_si256(word, low), _mm256_srli_epi32(word, 16)};
        for (int e = 0; e < 2; e++) {
            const __m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(half[e], cs->thr), half[e]);
            out[2 * k + e] = _mm256_and_ps(_mm256_castsi256_ps(keep), cs->scale);
        }
    }
}

void fa_dropout_cols_avx2(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                          uint64_t offset, int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && m >= 0 && ld >= m && j0 >= 0 && threshold < 65536u);
    cols_stream cs;
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        cs.key[0][r] = _mm256_set1_epi32((int)k0), cs.key[1][r] = _mm256_set1_epi32((int)k1);
        k0 += FA_PHILOX_W0, k1 += FA_PHILOX_W1;
    }
    const uint64_t p1 = (uint64_t)FA_PHILOX_M1 * (uint32_t)offset;
    cs.c1r0 = (uint32_t)p1;
    cs.c3k = (uint32_t)(offset >> 32) ^ key[1];
    cs.k01 = key[0] + FA_PHILOX_W0, cs.k11 = key[1] + FA_PHILOX_W1;
    cs.thr = _mm256_set1_epi32((int)threshold);
    cs.scale = _mm256_set1_ps(scale);
    const __m256i m0 = _mm256_set1_epi64x(FA_PHILOX_M0);
    const uint32_t ka = (uint32_t)(p1 >> 32) ^ key[0]; /* round 0's word 0 is row ^ ka */
    for (int64_t c = 0; c < m; c += 8) {
        const uint32_t r = row0 + (uint32_t)c;
        const __m256i rows[2] = {_mm256_setr_epi64x(r, r + 2u, r + 4u, r + 6u),
                                 _mm256_setr_epi64x(r + 1u, r + 3u, r + 5u, r + 7u)};
        __m256i hq0[2], lq0[2];
        for (int h = 0; h < 2; h++) { /* round 1's product of word 0 */
            lq0[h] = _mm256_mul_epu32(_mm256_xor_si256(rows[h], _mm256_set1_epi32((int)ka)), m0);
            hq0[h] = _mm256_srli_epi64(lq0[h], 32);
        }
        const int64_t rows_here = m - c < 8 ? m - c : 8;
        for (int64_t g = j0 >> 3; g << 3 < j0 + n; g++) {
            __m256 out[8];
            group8(&cs, hq0, lq0, g, out);
            for (int k = 0; k < 8; k++) {
                const int64_t t = (g << 3) + k - j0;
                if (t < 0 || t >= n) continue;
                if (rows_here == 8) {
                    _mm256_storeu_ps(z + t * ld + c, out[k]);
                } else {
                    float tmp[8];
                    _mm256_storeu_ps(tmp, out[k]);
                    for (int64_t e = 0; e < rows_here; e++) z[t * ld + c + e] = tmp[e];
                }
            }
        }
    }
}
