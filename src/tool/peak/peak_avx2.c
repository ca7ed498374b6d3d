/*
 * AVX2 + FMA peak loops. FP32: 12 chains of vfmadd on ymm. Haswell to
 * Zen cores have two FMA ports with a 4- or 5-cycle latency, so 10 chains
 * keep them busy; 12 leave margin (16 ymm registers: 12 + 2 constants).
 */
#include <immintrin.h>

#include "tool/peak_loops.h"

#define CHAINS 12

static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* acc = acc * m + a converges to a / (1 - m): no overflow, no denormals. */
static float fma_loop_avx2(int64_t iters) {
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
    __m256 acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
    __m256 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm256_add_ps(s, acc[c]);
    return hsum256(s);
}

/* Four independent sums, 128 bytes (2 cache lines) per step. */
static double read_sum_avx2(const float *x, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(x + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(x + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(x + i + 24));
    }
    return (double)hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

const fa_peak_kernels fa_peak_avx2 = {
    .isa = "avx2",
    .fma_flops = CHAINS * 8 * 2,
    .fma_loop = fma_loop_avx2,
    .read_sum = read_sum_avx2,
};
