/*
 * gemm_nt (C = A . B^T, B as rows) on every kernel table, against sums in
 * double: m, n from 0 to 19 and k from 0 to 300 (around multiples of 8, 16
 * and 32), padded strides, unaligned pointers. Error bound: the standard
 * one for a float dot product in any summation order, (k + 2) * 2^-24 *
 * sum |a_p b_p|. Then the contract's position rule, bit for bit: an element
 * computed inside a large call equals the same element computed alone.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void fill(float *x, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) x[i] = (float)tt_rand_normal(rng);
}

static void check_shape(const fa_kernels *kern, int m, int n, int64_t k, uint64_t *rng) {
    const int64_t lda = k + 3, ldb = k + 5, ldc = n + 2;
    /* +1: a deliberately misaligned start */
    float *abuf = malloc((size_t)(m * lda + 2) * sizeof(float));
    float *bbuf = malloc((size_t)(n * ldb + 2) * sizeof(float));
    float *c = malloc((size_t)(m * ldc + 1) * sizeof(float));
    float *a = abuf + 1, *b = bbuf + 1;
    fill(abuf, (size_t)(m * lda + 2), rng);
    fill(bbuf, (size_t)(n * ldb + 2), rng);
    for (int64_t i = 0; i < m * ldc + 1; i++) c[i] = NAN; /* overwritten, never read */
    kern->gemm_nt(m, n, k, a, lda, b, ldb, c, ldc);
    double worst = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double exact = 0.0, mag = 0.0;
            for (int64_t p = 0; p < k; p++) {
                exact += (double)a[i * lda + p] * b[j * ldb + p];
                mag += fabs((double)a[i * lda + p] * b[j * ldb + p]);
            }
            const double err = fabs(c[i * ldc + j] - exact), bound = (double)(k + 2) * 0x1p-24 * mag;
            if (!(err <= bound)) worst = fmax(worst, isnan(err) ? INFINITY : err / bound);
        }
    TT_CHECK(worst == 0.0, "[%s] m=%d n=%d k=%lld: error %.3g times the bound", kern->isa, m, n,
             (long long)k, worst);
    /* position rule: element (i, j) alone, bit for bit */
    for (int i = 0; i < m; i += 3)
        for (int j = 0; j < n; j += 5) {
            float one = NAN;
            kern->gemm_nt(1, 1, k, a + i * lda, lda, b + j * ldb, ldb, &one, 1);
            TT_CHECK(memcmp(&one, &c[i * ldc + j], sizeof one) == 0,
                     "[%s] m=%d n=%d k=%lld: element (%d, %d) alone differs", kern->isa, m, n,
                     (long long)k, i, j);
        }
    free(abuf), free(bbuf), free(c);
}

int main(void) {
    static const int64_t ks[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 64, 80, 128, 255, 256, 300};
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    uint64_t rng = 77;
    for (int t = 0; t < n; t++)
        for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++)
            for (int m = 0; m < 20; m += 1 + m / 4)
                for (int nn = 0; nn < 20; nn += 1 + nn / 3) check_shape(isas[t], m, nn, ks[kk], &rng);
    return tt_finish("test_gemm_nt");
}
