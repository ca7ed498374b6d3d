/* The 8-bit tiles' definitions (kernels.h, gemm_i8 and gemm_u8). */
#include <math.h>

#include "kernels/ref/ref.h"

void fa_gemm_i8_ref(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                    const float *add, float *c, int64_t ldc) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && n % FA_COL_ALIGN == 0 && k4 >= 0 &&
                       k4 <= FLASHATTN_MAX_HEAD_DIM);
    (void)bsum; /* the sum is taken with A's offset removed */
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t dot = 0;
            for (int64_t p = 0; p < k4; p++)
                for (int t = 0; t < 4; t++)
                    dot += ((int32_t)a[i * lda + 4 * p + t] - 128) * b[4 * (p * ldb + j) + t];
            c[i * ldc + j] = fmaf((float)dot * bscale[j], ascale[i], add[i]);
        }
}

const char *fa_gemm_i8_way_ref(void) { return "portable C (no 8-bit dot-product kernel on this path)"; }

void fa_gemm_u8_ref(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                    int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && n % FA_COL_ALIGN == 0 && k4 >= 0 && 4 * k4 <= 65536);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t dot = 0;
            for (int64_t p = 0; p < k4; p++)
                for (int t = 0; t < 4; t++) dot += (int32_t)a[i * lda + 4 * p + t] * b[4 * (p * ldb + j) + t];
            c[i * ldc + j] = fmaf((float)dot * bscale[j], ascale[i], accumulate ? c[i * ldc + j] : 0.0f);
        }
}
