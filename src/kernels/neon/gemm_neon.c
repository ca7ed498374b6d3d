/*
 * NEON GEMM register tile: C[m x n] (=, +=) A[m x k] . B[k x n] with
 * m <= 6 and n = 16 (contract and layouts: kernels.h). No alignment needed.
 * Each C element is one FMA chain (FMLA) over k in increasing order from
 * +0 (or from C), exactly as fa_gemm_ref computes it, so results match it
 * bit for bit.
 *
 * Why 6 x 16: a row of 16 is 4 q registers, so 6 rows are 24 accumulators;
 * with the 4 of B and a broadcast of A that is 29 of the 32 registers
 * (7 rows would need 32 for the accumulators and B alone). Per k step:
 * 2 LDP of B, 6 broadcast loads, 24 FMAs: 24 independent chains cover
 * the 4-cycle FMA latency on up to four FP pipes (Neoverse V1/V2), and
 * loads stay under a third of the FMAs. NR = 16 is the driver's column
 * alignment. docs/arm.md has the instruction counts.
 */
#include <arm_neon.h>

#include "kernels/neon/neon.h"

/* GCC's first scheduling pass hoists a k step's six A loads ahead of its
 * FMAs, which takes 34 registers and spills an accumulator every step;
 * without that pass the loop has no stack traffic (docs/arm.md). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

/* m is a literal at every call site, so the loops unroll completely and
 * acc[][] lives in registers. */
static inline __attribute__((always_inline)) void tile(const int m, int64_t k, const float *a,
                                                       int64_t lda, const float *b, int64_t ldb,
                                                       float *c, int64_t ldc, int accumulate) {
    float32x4_t acc[FA_NEON_MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            /* From +0 rather than from the first product, as the
             * reference does: 0 + (-0) is +0. */
            acc[i][j] = accumulate ? vld1q_f32(c + i * ldc + 4 * j) : vdupq_n_f32(0.0f);
    for (int64_t p = 0; p < k; p++) {
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8),
                          b3 = vld1q_f32(b + 12);
        b += ldb;
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) {
            const float32x4_t ai = vld1q_dup_f32(a + i * lda + p);
            acc[i][0] = vfmaq_f32(acc[i][0], ai, b0);
            acc[i][1] = vfmaq_f32(acc[i][1], ai, b1);
            acc[i][2] = vfmaq_f32(acc[i][2], ai, b2);
            acc[i][3] = vfmaq_f32(acc[i][3], ai, b3);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) vst1q_f32(c + i * ldc + 4 * j, acc[i][j]);
}

void fa_gemm_neon(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_NEON_MR && n >= 0 && n <= FA_NEON_NR &&
                       n % FA_COL_ALIGN == 0 && k >= 0);
    if (n != 16) return;
    /* One specialised tile per row count: edge tiles (the last rows of a
     * q-block) run as fast per row as full ones. */
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
