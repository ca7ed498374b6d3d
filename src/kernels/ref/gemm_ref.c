/*
 * Portable GEMM tile: the definition of the contract in kernels.h.
 * C[m x n] (=, +=) A[m x k] . B[k x n], m <= MR, n <= NR.
 * Each C element is one FMA chain over k in increasing order, which is what
 * every SIMD kernel reproduces bit for bit.
 */
#include <math.h>

#include "kernels/ref/ref.h"

void fa_gemm_block_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_REF_MR && n >= 0 && n <= FA_REF_NR && k >= 0);
    for (int i = 0; i < m; i++) {
        float acc[FA_REF_NR];
        for (int j = 0; j < n; j++) acc[j] = accumulate ? c[i * ldc + j] : 0.0f;
        for (int64_t p = 0; p < k; p++) {
            const float ai = a[i * lda + p];
            const float *bp = b + p * ldb;
            for (int j = 0; j < n; j++) acc[j] = fmaf(ai, bp[j], acc[j]);
        }
        for (int j = 0; j < n; j++) c[i * ldc + j] = acc[j];
    }
}

void fa_gemm_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_REF_MR && n >= 0 && n <= FA_REF_NR &&
                       n % FA_COL_ALIGN == 0 && k >= 0);
    fa_gemm_block_ref(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}
