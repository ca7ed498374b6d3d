/*
 * AVX2 8-bit score tile (kernels.h, gemm_i8): m <= 6, n = 16, the f32
 * tile's 6 x 16 shape (12 ymm accumulators). With AVX-VNNI it is
 * vnni_avx2.c's. Without it, A's offset is removed, VPSIGNB moves B's
 * signs onto A so that VPMADDUBSW's pair sums (at most 2 * 127 * 127)
 * never saturate, and VPMADDWD widens them: the exact integer sum, so the
 * portable kernel's bits.
 */
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/i8_avx2.h"

static inline __attribute__((always_inline)) void tile_madd(const int m, int64_t k4, const uint8_t *a,
                                                            int64_t lda, const int8_t *b, int64_t ldb,
                                                            const float *bscale, const float *ascale,
                                                            const float *add, float *c, int64_t ldc) {
    __m256i acc[FA_AVX2_MR][2];
    const __m256i flip = _mm256_set1_epi32((int32_t)0x80808080u), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 6
    for (int i = 0; i < m; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int64_t p = 0; p < k4; p++) {
        __m256i bj[2], mag[2];
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            bj[j] = _mm256_loadu_si256((const __m256i *)(b + 4 * p * ldb + 32 * j));
            mag[j] = _mm256_abs_epi8(bj[j]);
        }
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) {
            const __m256i qi = _mm256_xor_si256(fa_quad_avx2(a + i * lda + 4 * p), flip); /* A - 128 */
#pragma GCC unroll 2
            for (int j = 0; j < 2; j++) {
                const __m256i pairs = _mm256_maddubs_epi16(mag[j], _mm256_sign_epi8(qi, bj[j]));
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    fa_i8_finish_avx2(m, acc, bscale, ascale, add, c, ldc);
}

void fa_gemm_i8_avx2_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                          int64_t ldb, const int32_t *bsum, const float *bscale,
                          const float *ascale, const float *add, float *c, int64_t ldc) {
    FA_I8_CONTRACT;
    (void)bsum;
#define M_(M) tile_madd(M, k4, a, lda, b, ldb, bscale, ascale, add, c, ldc)
    if (n == 16) FA_I8_ROWS(M_)
#undef M_
}

static atomic_int vnni;

const char *fa_gemm_i8_way_avx2(void) {
    return fa_cpu_once(&vnni, fa_cpu_avx_vnni) ? "VPDPBUSD ymm (AVX-VNNI)"
                                               : "VPMADDUBSW + VPMADDWD ymm (no AVX-VNNI)";
}

void fa_gemm_i8_avx2(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                     int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                     const float *add, float *c, int64_t ldc) {
    if (fa_cpu_once(&vnni, fa_cpu_avx_vnni))
        fa_gemm_i8_avx2_vnni(m, n, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc);
    else
        fa_gemm_i8_avx2_madd(m, n, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc);
}
