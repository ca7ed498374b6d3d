/*
 * alibi_row (kernels.h) on AVX2: the portable kernel's operations, eight
 * lanes at a time (a - i from i converted exactly, the product and the
 * difference each rounded), so the bits are the portable kernel's; the
 * tail through a copy.
 */
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2/avx2.h"

static inline void alibi8(float *x, __m256i i, __m256 a, __m256 slope) {
    const __m256 dist = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(a, _mm256_cvtepi32_ps(i)));
    _mm256_storeu_ps(x, _mm256_sub_ps(_mm256_loadu_ps(x), _mm256_mul_ps(slope, dist)));
}

void fa_alibi_row_avx2(float *x, int64_t n, float a, float slope) {
    FA_KERNEL_CONTRACT(n >= 0 && n <= (INT64_C(1) << 24) && a == floorf(a));
    const __m256 av = _mm256_set1_ps(a), sv = _mm256_set1_ps(slope);
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8, i = _mm256_add_epi32(i, eight)) alibi8(x + j, i, av, sv);
    if (j < n) {
        float t[8] = {0};
        for (int64_t c = 0; c < n - j; c++) t[c] = x[j + c];
        alibi8(t, i, av, sv);
        for (int64_t c = 0; c < n - j; c++) x[j + c] = t[c];
    }
}
