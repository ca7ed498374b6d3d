/*
 * AVX2 8-bit score tile (kernels.h, gemm_i8): m <= 6, n = 16, the f32
 * tile's 6 x 16 shape (12 ymm accumulators). With AVX-VNNI (Alder Lake,
 * Sapphire Rapids, Zen 5) VPDPBUSD takes A's u8 bytes against B's int8
 * and 128 bsum comes off at the end; without it, A's offset is removed,
 * VPSIGNB moves B's signs onto A so that VPMADDUBSW's pair sums (at most
 * 2 * 127 * 127) never saturate, and VPMADDWD widens them. Both give the
 * exact integer sum, so the portable kernel's bits.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/avx2/avx2.h"

#define FA_INLINE static inline __attribute__((always_inline))

FA_INLINE __m256i quad(const uint8_t *a) {
    int32_t x;
    memcpy(&x, a, sizeof x);
    return _mm256_set1_epi32(x);
}

FA_INLINE void finish(const int m, __m256i acc[][2], const float *bscale, const float *ascale,
                      const float *add, float *c, int64_t ldc) {
#pragma GCC unroll 6
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][j]), _mm256_loadu_ps(bscale + 8 * j));
            _mm256_storeu_ps(c + i * ldc + 8 * j,
                             _mm256_fmadd_ps(u, _mm256_set1_ps(ascale[i]), _mm256_set1_ps(add[i])));
        }
}

/* acc + VPDPBUSD(a as u8, b as int8), VEX-encoded (AVX-VNNI), in an asm
 * statement: gcc 12 gives _mm256_dpbusd_avx_epi32 a copy in and out of its
 * accumulator and keeps the accumulators on the stack as well, each step
 * of the k loop (gemm_i8_avx512.c measured what that costs). */
FA_INLINE __m256i dpbusd(__m256i acc, __m256i a, __m256i b) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
}

__attribute__((target("avxvnni"))) FA_INLINE void tile_vnni(
    const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
    const int32_t *bsum, const float *bscale, const float *ascale, const float *add, float *c,
    int64_t ldc) {
    __m256i acc[FA_AVX2_MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < m; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int64_t p = 0; p < k4; p++) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + 4 * p * ldb));
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 4 * p * ldb + 32));
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) {
            const __m256i ai = quad(a + i * lda + 4 * p);
            acc[i][0] = dpbusd(acc[i][0], ai, b0);
            acc[i][1] = dpbusd(acc[i][1], ai, b1);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
        const __m256i off = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(bsum + 8 * j)), 7);
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) acc[i][j] = _mm256_sub_epi32(acc[i][j], off);
    }
    finish(m, acc, bscale, ascale, add, c, ldc);
}

FA_INLINE void tile_madd(const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                         int64_t ldb, const float *bscale, const float *ascale, const float *add,
                         float *c, int64_t ldc) {
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
            const __m256i qi = _mm256_xor_si256(quad(a + i * lda + 4 * p), flip); /* A - 128 */
#pragma GCC unroll 2
            for (int j = 0; j < 2; j++) {
                const __m256i pairs = _mm256_maddubs_epi16(mag[j], _mm256_sign_epi8(qi, bj[j]));
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    finish(m, acc, bscale, ascale, add, c, ldc);
}

#define FA_I8_ROWS(CALL)                                                                          \
    switch (m) {                                                                                  \
    case 1: CALL(1); break;                                                                       \
    case 2: CALL(2); break;                                                                       \
    case 3: CALL(3); break;                                                                       \
    case 4: CALL(4); break;                                                                       \
    case 5: CALL(5); break;                                                                       \
    case 6: CALL(6); break;                                                                       \
    default: break;                                                                               \
    }

#define FA_I8_CONTRACT                                                                            \
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX2_MR && (n == 16 || n == 0) && k4 >= 0 &&             \
                       k4 <= FLASHATTN_MAX_HEAD_DIM)

__attribute__((target("avxvnni"))) void fa_gemm_i8_avx2_vnni(
    int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
    const int32_t *bsum, const float *bscale, const float *ascale, const float *add, float *c,
    int64_t ldc) {
    FA_I8_CONTRACT;
#define V(M) tile_vnni(M, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc)
    if (n == 16) FA_I8_ROWS(V)
#undef V
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
