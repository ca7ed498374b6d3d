/*
 * AVX512_BF16 GEMM register tile: C[m x n] = alpha * A . B, or C += A . B,
 * A in bf16 pairs, B in rows of n bf16 pairs, m <= 12, n in {16, 32}
 * (contract and layouts: kernels.h gemm_bf16). No alignment needed.
 *
 * The shape is the f32 tile's (gemm_avx512.c), one k step per pair: 24 zmm
 * accumulators, 2 zmm of B and 12 broadcast pairs per step, 24 VDPBF16PS.
 * Each VDPBF16PS does two multiply-adds per lane where an FMA does one,
 * and B streams half the bytes per multiply-add. Without accumulation
 * alpha (the softmax scale, for S = Q K^T) is applied once when storing,
 * so Q is used as given rather than rounded again after scaling.
 *
 * Built twice: for the library with -mavx512bf16, and for the tests with
 * FA_BF16_EMULATE, where fa_dpbf16 is the instruction written in AVX-512F
 * as the SDM defines it, so that CPUs without AVX512_BF16 test everything
 * here but the instruction itself.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"

#ifdef FA_BF16_EMULATE
#define FA_GEMM_BF16 fa_gemm_bf16_emulated

/* Subnormal lanes to zero of the same sign (DAZ on inputs, FTZ on sums). */
static inline __m512 flush(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __mmask16 normal = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    const __m512i zero = _mm512_and_si512(u, _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(zero, normal, u));
}

static inline __m512 fa_dpbf16(__m512 acc, __m512i a, __m512i b) {
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    const __m512 a1 = flush(_mm512_castsi512_ps(_mm512_and_si512(a, hi)));
    const __m512 b1 = flush(_mm512_castsi512_ps(_mm512_and_si512(b, hi)));
    const __m512 a0 = flush(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)));
    const __m512 b0 = flush(_mm512_castsi512_ps(_mm512_slli_epi32(b, 16)));
    acc = flush(_mm512_fmadd_ps(a1, b1, acc));
    return flush(_mm512_fmadd_ps(a0, b0, acc));
}
#else
#define FA_GEMM_BF16 fa_gemm_bf16_avx512bf16

static inline __m512 fa_dpbf16(__m512 acc, __m512i a, __m512i b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}
#endif

/* m and nv (16-pair vectors per row) are literals at every call site, so
 * the loops unroll completely and acc[][] lives in registers. */
static inline __attribute__((always_inline)) void tile(const int m, const int nv, int64_t kp,
                                                       const uint16_t *a, int64_t lda,
                                                       const uint32_t *b, int64_t ldb, float *c,
                                                       int64_t ldc, int accumulate, float alpha) {
    __m512 acc[FA_AVX512_MR][2]; /* the AVX-512 table's MR: the tables share it */
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++)
            acc[i][j] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * j) : _mm512_setzero_ps();
    /* Two row bases sharing the offsets 0..5*lda, as in gemm_avx512.c. */
    const uint16_t *a_lo = a, *a_hi = m > 6 ? a + 6 * lda : a;
    for (int64_t p = 0; p < kp; p++) {
        __m512i bv[2];
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) bv[j] = _mm512_loadu_si512((const void *)(b + 16 * j));
        b += ldb;
#pragma GCC unroll 12
        for (int i = 0; i < m; i++) {
            const uint16_t *ar = (i < 6 ? a_lo : a_hi) + (i % 6) * lda + 2 * p;
            int32_t pair;
            memcpy(&pair, ar, sizeof pair);
            const __m512i ai = _mm512_set1_epi32(pair);
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) acc[i][j] = fa_dpbf16(acc[i][j], ai, bv[j]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) {
            _mm512_storeu_ps(c + i * ldc + 16 * j, accumulate ? acc[i][j] : _mm512_mul_ps(al, acc[i][j]));
        }
}

static inline __attribute__((always_inline)) void tile_rows(int m, const int nv, int64_t kp,
                                                            const uint16_t *a, int64_t lda,
                                                            const uint32_t *b, int64_t ldb,
                                                            float *c, int64_t ldc, int accumulate,
                                                            float alpha) {
    switch (m) {
    case 1: tile(1, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 2: tile(2, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 3: tile(3, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 4: tile(4, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 5: tile(5, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 6: tile(6, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 7: tile(7, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 8: tile(8, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 9: tile(9, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 10: tile(10, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 11: tile(11, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    case 12: tile(12, nv, kp, a, lda, b, ldb, c, ldc, accumulate, alpha); break;
    default: break;
    }
}

void FA_GEMM_BF16(int m, int n, int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate, float alpha) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && n >= 0 && n <= FA_AVX512_NR &&
                       n % FA_COL_ALIGN == 0 && kp >= 0 && (!accumulate || alpha == 1.0f));
    if (n == 32)
        tile_rows(m, 2, kp, a, lda, b, ldb, c, ldc, accumulate, alpha);
    else if (n == 16)
        tile_rows(m, 1, kp, a, lda, b, ldb, c, ldc, accumulate, alpha);
}
