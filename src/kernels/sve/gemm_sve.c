/*
 * SVE GEMM register tile, any vector length: C[m x n] (=, +=) A[m x k] .
 * B[k x n] with m <= 12 and n = 16 (contract and layouts: kernels.h).
 * Each C element is one FMA chain (FMLA) over k in increasing order from
 * +0 (or from C), exactly as fa_gemm_ref computes it, so results match it
 * bit for bit at every vector length.
 *
 * The table's tile is fixed data (kernels.h), so NR is the contract's 16
 * and the vector length decides, at run time, how a row of 16 is held:
 * nv = 4 vectors at 128 bits, 2 at 256 (or 384), 1 from 512 on, the last
 * one under a predicate where it is longer than the row's rest. The rows
 * of one pass are what 24 accumulators hold: 6 at 128 bits (the NEON
 * tile, so a 12-row call is two passes over k), all 12 from 256 bits on
 * (24 accumulators at 256, 12 at 512 and more). Per k step: nv loads of
 * B, one broadcast load and nv FMAs a row. SVE vectors cannot live in
 * arrays, so the accumulators are named by macros, and the unused ones
 * are dropped by the compiler.
 */
#include <arm_sve.h>

#include "kernels/sve/sve.h"

#define FA_SVE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#define DECL(i) svfloat32_t c##i##_0, c##i##_1, c##i##_2, c##i##_3;
#define INIT(i)                                                                              \
    if (i < m) {                                                                             \
        c##i##_0 = accumulate ? svld1_f32(p0, c + i * ldc) : zero;                           \
        c##i##_1 = nv > 1 && accumulate ? svld1_f32(p1, c + i * ldc + vl) : zero;            \
        c##i##_2 = nv > 2 && accumulate ? svld1_f32(p2, c + i * ldc + 2 * vl) : zero;        \
        c##i##_3 = nv > 2 && accumulate ? svld1_f32(p3, c + i * ldc + 3 * vl) : zero;        \
    }
#define FMA(i)                                                                               \
    if (i < m) {                                                                             \
        const svfloat32_t ai = svdup_n_f32(a[i * lda + p]);                                  \
        c##i##_0 = svmla_f32_x(p0, c##i##_0, ai, b0);                                        \
        if (nv > 1) c##i##_1 = svmla_f32_x(p1, c##i##_1, ai, b1);                            \
        if (nv > 2) c##i##_2 = svmla_f32_x(p2, c##i##_2, ai, b2);                            \
        if (nv > 2) c##i##_3 = svmla_f32_x(p3, c##i##_3, ai, b3);                            \
    }
#define STORE(i)                                                                             \
    if (i < m) {                                                                             \
        svst1_f32(p0, c + i * ldc, c##i##_0);                                                \
        if (nv > 1) svst1_f32(p1, c + i * ldc + vl, c##i##_1);                               \
        if (nv > 2) svst1_f32(p2, c + i * ldc + 2 * vl, c##i##_2);                           \
        if (nv > 2) svst1_f32(p3, c + i * ldc + 3 * vl, c##i##_3);                           \
    }

/* m rows (<= 12) of 16 columns held as nv (1, 2 or 4) vectors of vl
 * floats; m and nv are literals at every call site. */
static inline __attribute__((always_inline)) void tile(const int m, const int nv, int64_t k,
                                                       const float *a, int64_t lda, const float *b,
                                                       int64_t ldb, float *c, int64_t ldc,
                                                       int accumulate) {
    const int64_t vl = (int64_t)svcntw();
    const svbool_t p0 = svwhilelt_b32_s64(0, 16), p1 = svwhilelt_b32_s64(vl, 16),
                   p2 = svwhilelt_b32_s64(2 * vl, 16), p3 = svwhilelt_b32_s64(3 * vl, 16);
    /* From +0 rather than from the first product, as the reference does. */
    const svfloat32_t zero = svdup_n_f32(0.0f);
    FA_SVE_ROWS(DECL)
    FA_SVE_ROWS(INIT)
    for (int64_t p = 0; p < k; p++) {
        const svfloat32_t b0 = svld1_f32(p0, b);
        const svfloat32_t b1 = nv > 1 ? svld1_f32(p1, b + vl) : zero;
        const svfloat32_t b2 = nv > 2 ? svld1_f32(p2, b + 2 * vl) : zero;
        const svfloat32_t b3 = nv > 2 ? svld1_f32(p3, b + 3 * vl) : zero;
        b += ldb;
        FA_SVE_ROWS(FMA)
    }
    FA_SVE_ROWS(STORE)
}

/* The rows of one pass (see above), as one specialised tile each. */
static inline __attribute__((always_inline)) void pass(const int nv, int m, int64_t k,
                                                       const float *a, int64_t lda, const float *b,
                                                       int64_t ldb, float *c, int64_t ldc,
                                                       int accumulate) {
    switch (m) {
    case 1: tile(1, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 2: tile(2, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 3: tile(3, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 4: tile(4, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 5: tile(5, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 6: tile(6, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 7: if (nv < 4) tile(7, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 8: if (nv < 4) tile(8, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 9: if (nv < 4) tile(9, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 10: if (nv < 4) tile(10, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 11: if (nv < 4) tile(11, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    case 12: if (nv < 4) tile(12, nv, k, a, lda, b, ldb, c, ldc, accumulate); break;
    default: break;
    }
}

void fa_gemm_sve(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_SVE_MR && n >= 0 && n <= FA_SVE_NR &&
                       n % FA_COL_ALIGN == 0 && k >= 0);
    if (n != 16) return;
    const int vl = (int)svcntw();
    if (vl == 4) { /* 128 bits: passes of 6 rows */
        for (int i = 0; i < m; i += 6)
            pass(4, m - i < 6 ? m - i : 6, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate);
    } else if (vl < 16) {
        pass(2, m, k, a, lda, b, ldb, c, ldc, accumulate);
    } else {
        pass(1, m, k, a, lda, b, ldb, c, ldc, accumulate);
    }
}
