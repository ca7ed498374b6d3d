/*
 * Portable C = A . B^T with B given as rows: the definition of gemm_nt in
 * kernels.h. Each element is eight interleaved partial sums (element p
 * goes to sum p % 8, in increasing p), combined pairwise at the end: the
 * order an 8-lane SIMD kernel uses, and a loop compilers vectorise at the
 * baseline ISA without reassociating anything. A row of B in a narrower
 * dtype is widened to f32 first (exactly), k elements at a time.
 */
#include "core/dtype.h"
#include "kernels/ref/ref.h"

/* Adds x[p] * y[p] to s[p % 8] for p < k; k is a multiple of 8 except
 * in a row's last piece, so pieces continue one another's sums. */
static void dot_acc(float s[8], const float *x, const float *y, int64_t k) {
    int64_t p = 0;
    for (; p + 8 <= k; p += 8)
        for (int l = 0; l < 8; l++) s[l] += x[p + l] * y[p + l];
    for (int l = 0; p + l < k; l++) s[l] += x[p + l] * y[p + l];
}

static float tree(const float s[8]) {
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

#define PIECE 256 /* a multiple of 8 */

void fa_gemm_nt_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                    flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    (void)pf; /* a hint the portable kernel does not take */
    float row[PIECE];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t p0 = 0; p0 < k; p0 += PIECE) {
                const int64_t len = k - p0 < PIECE ? k - p0 : PIECE;
                const int64_t at = j * ldb + p0;
                const float *y = row;
                if (bt == FLASHATTN_F32)
                    y = (const float *)b + at;
                else
                    for (int64_t p = 0; p < len; p++) row[p] = fa_widen(b, bt, at + p);
                dot_acc(s, a + i * lda + p0, y, len);
            }
            c[i * ldc + j] = tree(s);
        }
}
