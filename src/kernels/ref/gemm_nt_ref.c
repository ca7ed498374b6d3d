/*
 * Portable C = A . B^T with B given as rows: the definition of gemm_nt in
 * kernels.h. Each element is eight interleaved partial sums (element p
 * goes to sum p % 8, in increasing p), combined pairwise at the end: the
 * order an 8-lane SIMD kernel uses, and a loop compilers vectorise at the
 * baseline ISA without reassociating anything.
 */
#include "kernels/ref/ref.h"

static float dot(const float *x, const float *y, int64_t k) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t p = 0;
    for (; p + 8 <= k; p += 8)
        for (int l = 0; l < 8; l++) s[l] += x[p + l] * y[p + l];
    for (int l = 0; p + l < k; l++) s[l] += x[p + l] * y[p + l];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

void fa_gemm_nt_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) c[i * ldc + j] = dot(a + i * lda, b + j * ldb, k);
}
