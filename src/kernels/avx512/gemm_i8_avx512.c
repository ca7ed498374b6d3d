/*
 * AVX-512 8-bit score tile (kernels.h, gemm_i8): m <= 12, n in {16, 32},
 * the f32 tile's 12 x 32 shape (gemm_avx512.c says why), now 4 products a
 * lane per instruction. With AVX512_VNNI, VPDPBUSD takes A's u8 bytes
 * straight against B's int8 and 128 bsum comes off at the end; without it
 * (Skylake-SP), A's offset is removed first and the signs moved onto A so
 * that VPMADDUBSW's pair sums (at most 2 * 127 * 127) never saturate, then
 * VPMADDWD widens them. Both give the exact integer sum, so the same bits
 * as the portable kernel.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/dpbusd.h"

#define FA_INLINE static inline __attribute__((always_inline))

/* A's four bytes (p, i) broadcast to every lane. */
FA_INLINE __m512i quad(const uint8_t *a) {
    int32_t x;
    memcpy(&x, a, sizeof x);
    return _mm512_set1_epi32(x);
}

/* C's rows from the exact sums (kernels.h's epilogue, one rounding each). */
FA_INLINE void finish(const int m, const int nv, __m512i acc[][2], const float *bscale,
                      const float *ascale, const float *add, float *c, int64_t ldc) {
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) {
            const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][j]), _mm512_loadu_ps(bscale + 16 * j));
            _mm512_storeu_ps(c + i * ldc + 16 * j,
                             _mm512_fmadd_ps(u, _mm512_set1_ps(ascale[i]), _mm512_set1_ps(add[i])));
        }
}

__attribute__((target("avx512vnni"))) FA_INLINE void tile_vnni(
    const int m, const int nv, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale, const float *add,
    float *c, int64_t ldc) {
    __m512i acc[FA_AVX512_MR][2];
    fa_vnni_sums(m, nv, k4, a, lda, b, ldb, acc);
#pragma GCC unroll 2
    for (int j = 0; j < nv; j++) {
        const __m512i off = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(bsum + 16 * j)), 7);
#pragma GCC unroll 12
        for (int i = 0; i < m; i++) acc[i][j] = _mm512_sub_epi32(acc[i][j], off);
    }
    finish(m, nv, acc, bscale, ascale, add, c, ldc);
}

FA_INLINE void tile_madd(const int m, const int nv, int64_t k4, const uint8_t *a, int64_t lda,
                         const int8_t *b, int64_t ldb, const float *bscale, const float *ascale,
                         const float *add, float *c, int64_t ldc) {
    __m512i acc[FA_AVX512_MR][2];
    const __m512i flip = _mm512_set1_epi32((int32_t)0x80808080u), ones = _mm512_set1_epi16(1);
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) acc[i][j] = _mm512_setzero_si512();
    for (int64_t p = 0; p < k4; p++) {
        __m512i mag[2];
        __mmask64 neg[2];
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) {
            const __m512i bj = _mm512_loadu_si512((const void *)(b + 4 * p * ldb + 64 * j));
            mag[j] = _mm512_abs_epi8(bj);
            neg[j] = _mm512_movepi8_mask(bj);
        }
#pragma GCC unroll 12
        for (int i = 0; i < m; i++) {
            const __m512i qi = _mm512_xor_si512(quad(a + i * lda + 4 * p), flip); /* A - 128 */
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) {
                const __m512i sq = _mm512_mask_sub_epi8(qi, neg[j], _mm512_setzero_si512(), qi);
                const __m512i pairs = _mm512_maddubs_epi16(mag[j], sq);
                acc[i][j] = _mm512_add_epi32(acc[i][j], _mm512_madd_epi16(pairs, ones));
            }
        }
    }
    finish(m, nv, acc, bscale, ascale, add, c, ldc);
}

#define FA_I8_CONTRACT                                                                            \
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && (n == 16 || n == 32 || n == 0) && k4 >= 0 && \
                       k4 <= FLASHATTN_MAX_HEAD_DIM)

__attribute__((target("avx512vnni"))) void fa_gemm_i8_avx512_vnni(
    int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
    const int32_t *bsum, const float *bscale, const float *ascale, const float *add, float *c,
    int64_t ldc) {
    FA_I8_CONTRACT;
#define V2(M) tile_vnni(M, 2, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc)
#define V1(M) tile_vnni(M, 1, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc)
    if (n == 32) {
        FA_I8_ROWS(V2)
    } else if (n == 16) {
        FA_I8_ROWS(V1)
    }
#undef V2
#undef V1
}

void fa_gemm_i8_avx512_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                            const int8_t *b, int64_t ldb, const int32_t *bsum,
                            const float *bscale, const float *ascale, const float *add, float *c,
                            int64_t ldc) {
    FA_I8_CONTRACT;
    (void)bsum;
#define M2(M) tile_madd(M, 2, k4, a, lda, b, ldb, bscale, ascale, add, c, ldc)
#define M1(M) tile_madd(M, 1, k4, a, lda, b, ldb, bscale, ascale, add, c, ldc)
    if (n == 32) {
        FA_I8_ROWS(M2)
    } else if (n == 16) {
        FA_I8_ROWS(M1)
    }
#undef M2
#undef M1
}

static atomic_int vnni;

const char *fa_gemm_i8_way_avx512(void) {
    return fa_cpu_once(&vnni, fa_cpu_avx512_vnni) ? "VPDPBUSD zmm (AVX512_VNNI)"
                                                  : "VPMADDUBSW + VPMADDWD zmm (no AVX512_VNNI)";
}

void fa_gemm_i8_avx512(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                       int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                       const float *add, float *c, int64_t ldc) {
    if (fa_cpu_once(&vnni, fa_cpu_avx512_vnni))
        fa_gemm_i8_avx512_vnni(m, n, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc);
    else
        fa_gemm_i8_avx512_madd(m, n, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc);
}
