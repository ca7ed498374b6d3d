/*
 * The products of the non-finite rerun (driver/careful.h): gemm, gemm_nt,
 * gemm_rows and gemm_bf16 as their contracts in kernels.h define them, except that a
 * term with a zero factor is left out of its FMA chain. IEEE gives
 * 0 * Inf = NaN, so a fast product lets a key that a row does not see
 * (P = 0 there) or a query that does not see a key (dS = 0) spread the
 * key's (or query's) NaN or Inf into results it has no part in; leaving
 * those terms out is the header's rule for non-finite inputs (0 times
 * anything is 0 in every product).
 * On finite operands every chain is the fast one's (fma(0, b, t) = t, up
 * to the sign of a zero sum), so results on finite data do not change.
 * Slow (scalar, any m and n) by design: only calls whose fast pass met a
 * non-finite value run them.
 */
#include <math.h>

#include "core/dtype.h"
#include "kernels/ref/ref.h"

void fa_gemm_skip_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float t = accumulate ? c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < k; p++) {
                const float x = a[i * lda + p], y = b[p * ldb + j];
                if (x != 0.0f && y != 0.0f) t = fmaf(x, y, t);
            }
            c[i * ldc + j] = t;
        }
}

void fa_gemm_rows_skip_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                           flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                           int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    (void)pf;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float t = accumulate ? c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < k; p++) {
                const float x = a[i * lda + p], y = fa_widen_ref(b, bt, p * ldb + j);
                if (x != 0.0f && y != 0.0f) t = fmaf(x, y, t);
            }
            c[i * ldc + j] = t;
        }
}

void fa_gemm_nt_skip_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                         flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    (void)pf;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float t = 0.0f;
            for (int64_t p = 0; p < k; p++) {
                const float x = a[i * lda + p], y = fa_widen_ref(b, bt, j * ldb + p);
                if (x != 0.0f && y != 0.0f) t = fmaf(x, y, t);
            }
            c[i * ldc + j] = t;
        }
}

/* gemm_bf16's DAZ and FTZ (gemm_bf16_ref.c): a subnormal reads as zero. */
static float flush(float x) {
    const uint32_t u = fa_f32_bits(x);
    return (u & 0x7f800000u) ? x : fa_bits_f32(u & 0x80000000u);
}

static float term(float t, uint16_t x, uint16_t y) {
    const float fx = flush(fa_bf16_to_f32(x)), fy = flush(fa_bf16_to_f32(y));
    return fx != 0.0f && fy != 0.0f ? flush(fmaf(fx, fy, t)) : t;
}

void fa_gemm_bf16_skip_ref(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                           const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                           float alpha) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && kp >= 0 && (!accumulate || alpha == 1.0f));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float t = accumulate ? c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < kp; p++) {
                const uint32_t w = b[p * ldb + j];
                t = term(t, a[i * lda + 2 * p + 1], (uint16_t)(w >> 16));
                t = term(t, a[i * lda + 2 * p], (uint16_t)w);
            }
            c[i * ldc + j] = accumulate ? t : alpha * t;
        }
}
