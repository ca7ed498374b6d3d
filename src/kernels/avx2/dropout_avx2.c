/*
 * dropout_row (kernels.h) on AVX2: eight Philox4x32-10 streams at once, one
 * per group of four columns, so a step covers 32 columns. The 32x32 -> 64
 * products come from VPMULUDQ on the even lanes and on the odd lanes
 * shifted down; the four output words of the eight groups are transposed
 * into column order and compared (unsigned) with the threshold. A step
 * that sticks out of the row (a start inside a group, the row's end) runs
 * on a copy of the columns it has: the mask is a pure function of the
 * column, so the bits are the portable kernel's.
 */
#include <immintrin.h>

#include "core/philox.h"
#include "kernels/avx2/avx2.h"

/* (hi, lo) of the eight products m * c, lane by lane */
static inline void mulhilo(__m256i m, __m256i c, __m256i *hi, __m256i *lo) {
    const __m256i even = _mm256_mul_epu32(c, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

/* x >= t, unsigned, lane by lane: all ones or zero */
static inline __m256i at_least(__m256i x, __m256i t) {
    return _mm256_cmpeq_epi32(_mm256_max_epu32(x, t), x);
}

/* 32 columns from column 4 * g0 (x at that column). */
static void step32(float *x, const uint32_t key[2], uint32_t row, uint64_t offset, int64_t g0,
                   __m256i thr, __m256 scale) {
    const __m256i m0 = _mm256_set1_epi32((int)FA_PHILOX_M0), m1 = _mm256_set1_epi32((int)FA_PHILOX_M1);
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)g0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i c1 = _mm256_set1_epi32((int)row), c2 = _mm256_set1_epi32((int)(uint32_t)offset);
    __m256i c3 = _mm256_set1_epi32((int)(uint32_t)(offset >> 32));
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        __m256i hi0, lo0, hi1, lo1;
        mulhilo(m0, c0, &hi0, &lo0);
        mulhilo(m1, c2, &hi1, &lo1);
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c1 = lo1, c3 = lo0;
        k0 += FA_PHILOX_W0, k1 += FA_PHILOX_W1;
    }
    /* word w of group l is column 4 l + w: transpose the 4 x 8 words */
    const __m256i a = at_least(c0, thr), b = at_least(c1, thr), c = at_least(c2, thr), d = at_least(c3, thr);
    const __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
    const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i keep[4] = {_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
                             _mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31)};
    for (int q = 0; q < 4; q++) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * q), scale);
        _mm256_storeu_ps(x + 8 * q, _mm256_and_ps(v, _mm256_castsi256_ps(keep[q])));
    }
}

void fa_dropout_row_avx2(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                         int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && j0 >= 0);
    const __m256i thr = _mm256_set1_epi32((int)threshold);
    const __m256 s = _mm256_set1_ps(scale);
    /* steps of eight groups from the group of j0; a step that sticks out
     * of [j0, j0 + n) runs on a copy of the columns it has */
    for (int64_t g = j0 >> 2; g << 2 < j0 + n; g += 8) {
        const int64_t c0 = g << 2; /* the step's first column */
        if (c0 >= j0 && c0 + 32 <= j0 + n) {
            step32(x + (c0 - j0), key, row, offset, g, thr, s);
            continue;
        }
        float tmp[32];
        for (int w = 0; w < 32; w++) {
            const int64_t t = c0 + w - j0;
            tmp[w] = t >= 0 && t < n ? x[t] : 0.0f;
        }
        step32(tmp, key, row, offset, g, thr, s);
        for (int w = 0; w < 32; w++) {
            const int64_t t = c0 + w - j0;
            if (t >= 0 && t < n) x[t] = tmp[w];
        }
    }
}
