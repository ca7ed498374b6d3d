/*
 * Portable BF16 dot-product GEMM tile: the definition of gemm_bf16's
 * contract (kernels.h), written as Intel's SDM states VDPBF16PS. It is
 * not in the scalar table (emulating the instruction is slower than
 * widening bf16 to f32 for gemm); tests compare the AVX512_BF16 kernel
 * with it, and run the forward's dot-product route on a scalar table that
 * carries it.
 */
#include <math.h>

#include "core/dtype.h"
#include "kernels/ref/ref.h"

/* Subnormal to zero of the same sign: the instruction's DAZ on bf16 inputs
 * (a bf16 is subnormal exactly when its f32 widening is) and FTZ on sums. */
static float flush(float x) {
    const uint32_t u = fa_f32_bits(x);
    return (u & 0x7f800000u) ? x : fa_bits_f32(u & 0x80000000u);
}

static float bf16_at(const uint16_t *p) { return flush(fa_bf16_to_f32(*p)); }

void fa_gemm_bf16_ref(int m, int n, int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b,
                      int64_t ldb, float *c, int64_t ldc, int accumulate, float alpha) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_MAX_MR && n >= 0 && n % FA_COL_ALIGN == 0 && kp >= 0 &&
                       (!accumulate || alpha == 1.0f));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = c + i * ldc + j;
            float t = accumulate ? *cij : 0.0f;
            for (int64_t p = 0; p < kp; p++) {
                const uint32_t w = b[p * ldb + j];
                const uint16_t lo = (uint16_t)w, hi = (uint16_t)(w >> 16);
                t = flush(fmaf(bf16_at(a + i * lda + 2 * p + 1), bf16_at(&hi), t));
                t = flush(fmaf(bf16_at(a + i * lda + 2 * p), bf16_at(&lo), t));
            }
            *cij = accumulate ? t : alpha * t;
        }
}
