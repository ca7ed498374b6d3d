/*
 * AVX-512 8-bit P V tile (kernels.h, gemm_u8): m <= 12, n in {16, 32},
 * gemm_i8's 12 x 32 shape with P's u8 bytes straight into VPDPBUSD (no
 * offset to take off). Without AVX512_VNNI, the AVX2 table's tile on P's
 * nibbles (gemm_u8_avx2.c: P's bytes use the whole u8 range, so
 * VPMADDUBSW's pair sums would saturate), in pieces of 6 x 16.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/dpbusd.h"

#define FA_INLINE static inline __attribute__((always_inline))

__attribute__((target("avx512vnni"))) FA_INLINE void tile(const int m, const int nv, int64_t k4,
                                                          const uint8_t *a, int64_t lda, const int8_t *b,
                                                          int64_t ldb, const float *bscale,
                                                          const float *ascale, float *c, int64_t ldc,
                                                          int accumulate) {
    __m512i acc[FA_AVX512_MR][2];
    fa_vnni_sums(m, nv, k4, a, lda, b, ldb, acc);
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) {
            const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][j]), _mm512_loadu_ps(bscale + 16 * j));
            const __m512 old = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * j) : _mm512_setzero_ps();
            _mm512_storeu_ps(c + i * ldc + 16 * j, _mm512_fmadd_ps(u, _mm512_set1_ps(ascale[i]), old));
        }
}

__attribute__((target("avx512vnni"))) void fa_gemm_u8_avx512_vnni(
    int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
    const float *bscale, const float *ascale, float *c, int64_t ldc, int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && (n == 16 || n == 32 || n == 0) && k4 >= 0 &&
                       4 * k4 <= 65536);
#define U2(M) tile(M, 2, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate)
#define U1(M) tile(M, 1, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate)
    if (n == 32) {
        FA_I8_ROWS(U2)
    } else if (n == 16) {
        FA_I8_ROWS(U1)
    }
#undef U2
#undef U1
}

void fa_gemm_u8_avx512_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                            int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                            int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && (n == 16 || n == 32 || n == 0) && k4 >= 0 &&
                       4 * k4 <= 65536);
    for (int i = 0; i < m; i += FA_AVX2_MR)
        for (int j = 0; j < n; j += 16)
            fa_gemm_u8_avx2_madd(m - i < FA_AVX2_MR ? m - i : FA_AVX2_MR, 16, k4, a + i * lda, lda, b + 4 * j, ldb,
                                 bscale + j, ascale + i, c + i * ldc + j, ldc, accumulate);
}

static atomic_int vnni;

void fa_gemm_u8_avx512(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                       int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                       int accumulate) {
    if (fa_cpu_once(&vnni, fa_cpu_avx512_vnni))
        fa_gemm_u8_avx512_vnni(m, n, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate);
    else
        fa_gemm_u8_avx512_madd(m, n, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate);
}
