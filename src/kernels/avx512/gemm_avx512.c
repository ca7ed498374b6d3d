/*
 * AVX-512 GEMM register tile: C[m x n] (=, +=) A[m x k] . B[k x n] with
 * m <= 12 and n in {16, 32} (contract and layouts: kernels.h). No alignment
 * needed. Each C element is one FMA chain over k in increasing order from 0
 * (or from C), exactly as fa_gemm_ref computes it, so results match it bit
 * for bit.
 *
 * Why 12 x 32: the tile lives in registers, 24 zmm accumulators (12 rows x
 * 2 vectors) + 2 zmm of B + broadcasts fit the 32 zmm registers. Per k step
 * the kernel issues 2 B loads + 12 broadcasts (14 loads, 7 cycles on the two
 * load ports) for 24 FMAs (12 cycles on the two FMA ports): FMA-bound, with
 * 24 independent chains covering the 4-cycle FMA latency 6 times over. Per
 * FMA it streams 64/12 bytes of B, the operand that comes from L2 when
 * panels outgrow L1; a 6 x 64 tile would need twice that. NR = 32 divides
 * the driver's block_n choices (128, 256) and head_dim_pad 64/128/256.
 * llvm-mca (icelake-server) puts this loop at 13.1 cycles per k step, 92%
 * of the FMA bound; 14 x 32 models the same (15.1 for 14) while leaving
 * the driver's block_m = 96 a non-multiple of MR.
 */
#include <immintrin.h>

#include "kernels/avx512/avx512.h"

/* m and nv (16-float vectors per row) are literals at every call site, so
 * the loops unroll completely and acc[][] lives in registers. */
static inline __attribute__((always_inline)) void tile(const int m, const int nv, int64_t k,
                                                       const float *a, int64_t lda,
                                                       const float *b, int64_t ldb, float *c,
                                                       int64_t ldc, int accumulate) {
    __m512 acc[FA_AVX512_MR][2];
    if (accumulate) {
#pragma GCC unroll 12
        for (int i = 0; i < m; i++)
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) acc[i][j] = _mm512_loadu_ps(c + i * ldc + 16 * j);
    } else {
        /* Start from +0 rather than from the first product, as the
         * reference does: 0 + (-0) is +0. */
#pragma GCC unroll 12
        for (int i = 0; i < m; i++)
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) acc[i][j] = _mm512_setzero_ps();
    }
    /* Two row bases sharing the offsets 0..5*lda: 5 offset registers
     * instead of 11, which keeps every address in a general register.
     * a_hi is only formed when row 6 exists (it may lie past A otherwise). */
    const float *a_lo = a, *a_hi = m > 6 ? a + 6 * lda : a;
    for (int64_t p = 0; p < k; p++) {
        __m512 bv[2];
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) bv[j] = _mm512_loadu_ps(b + 16 * j);
        b += ldb;
#pragma GCC unroll 12
        for (int i = 0; i < m; i++) {
            const float *ar = i < 6 ? a_lo : a_hi;
            const __m512 ai = _mm512_set1_ps(ar[(i % 6) * lda + p]);
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) _mm512_storeu_ps(c + i * ldc + 16 * j, acc[i][j]);
}

/* One specialised tile per row count: edge tiles (the last rows of a
 * q-block) run as fast per row as full ones. */
static inline __attribute__((always_inline)) void tile_rows(int m, const int nv, int64_t k,
                                                            const float *a, int64_t lda,
                                                            const float *b, int64_t ldb,
                                                            float *c, int64_t ldc,
                                                            int accumulate) {
    switch (m) {
    case 1: tile(1, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 2: tile(2, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 3: tile(3, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 4: tile(4, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 5: tile(5, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 6: tile(6, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 7: tile(7, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 8: tile(8, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 9: tile(9, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 10: tile(10, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 11: tile(11, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 12: tile(12, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    default: break;
    }
}

void fa_gemm_avx512(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && n >= 0 && n <= FA_AVX512_NR &&
                       n % FA_COL_ALIGN == 0 && k >= 0);
    if (n == 32)
        tile_rows(m, 2, k, a, lda, b, ldb, c, ldc, accumulate);
    else if (n == 16)
        tile_rows(m, 1, k, a, lda, b, ldb, c, ldc, accumulate);
}
