/*
 * AVX2 + FMA GEMM register tile: C[m x n] (=, +=) A[m x k] . B[k x n] with
 * m <= 6 and n = 16 (contract and layouts: kernels.h). No alignment needed.
 * Each C element is one FMA chain over k in increasing order from 0 (or
 * from C), exactly as fa_gemm_ref computes it, so results match it bit for
 * bit.
 *
 * Why 6 x 16: 12 ymm accumulators (6 rows x 2 vectors) + 2 ymm of B + one
 * broadcast = 15 of the 16 ymm registers. Per k step: 2 B loads + 6
 * broadcasts (4 cycles on two load ports) for 12 FMAs (6 cycles on two FMA
 * ports): FMA-bound, and 12 independent chains cover the 4-5 cycle FMA
 * latency of Haswell to Ice Lake. NR = 16 is the driver's column alignment.
 */
#include <immintrin.h>

#include "kernels/avx2/avx2.h"

/* m is a literal at every call site, so the loops unroll completely and
 * acc[][] lives in registers. */
static inline __attribute__((always_inline)) void tile(const int m, int64_t k, const float *a,
                                                       int64_t lda, const float *b, int64_t ldb,
                                                       float *c, int64_t ldc, int accumulate) {
    __m256 acc[FA_AVX2_MR][2];
    if (accumulate) {
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) {
            acc[i][0] = _mm256_loadu_ps(c + i * ldc);
            acc[i][1] = _mm256_loadu_ps(c + i * ldc + 8);
        }
    } else {
        /* Start from +0 rather than from the first product, as the
         * reference does: 0 + (-0) is +0. */
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    }
    /* Four steps a trip: otherwise the loop's own instructions (row
     * addresses, counter, branch) take issue slots the FMAs need
     * (docs/performance.md, "GEMM tile: four k steps a trip"). */
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        b += ldb;
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + i * lda + p);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < m; i++) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
}

void fa_gemm_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX2_MR && n >= 0 && n <= FA_AVX2_NR &&
                       n % FA_COL_ALIGN == 0 && k >= 0);
    if (n != 16) return;
    /* One specialised tile per row count, its accumulators in registers.
     * A tile of few rows still waits on the FMA latency (fewer than 10
     * chains on Zen 2), so the drivers cut rows into strips of even size
     * (driver/strips.h). */
    switch (m) {
    case 1: tile(1, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 2: tile(2, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 3: tile(3, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 4: tile(4, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 5: tile(5, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 6: tile(6, k, a, lda, b, ldb, c, ldc, accumulate); break;
    default: break;
    }
}
