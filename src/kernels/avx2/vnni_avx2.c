/*
 * The AVX2 8-bit tiles on AVX-VNNI (Alder Lake, Sapphire Rapids, Zen 5):
 * m <= 6, n = 16, the f32 tile's 6 x 16 shape (12 ymm accumulators), one
 * VPDPBUSD per 4 k steps of a row and 8 columns.
 *   gemm_i8: A's u8 bytes (q + 128) against B's int8, 128 bsum taken off
 *            at the end;
 *   gemm_u8: P's u8 bytes straight in (no offset).
 * Exact integer sums, so the portable kernels' bits. Runs only where
 * fa_cpu_avx_vnni() says so; tests/avxvnni_emulated.c builds this file
 * again with the instruction emulated (FA_AVXVNNI_EMULATE), names
 * suffixed _emulated.
 */
#include "kernels/avx2/i8_avx2.h"

#ifdef FA_AVXVNNI_EMULATE
#define FA_VNNI_NAME(x) x##_emulated
#else
#define FA_VNNI_NAME(x) x
#endif

#define FA_INLINE static inline __attribute__((always_inline))

/* acc[i][j] = sum over p < k4 of VPDPBUSD(A's quad (i, p), B's groups (p, 8j .. 8j + 7)). */
FA_AVXVNNI_TARGET FA_INLINE void sums(const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                                      int64_t ldb, __m256i acc[][2]) {
#pragma GCC unroll 6
    for (int i = 0; i < m; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int64_t p = 0; p < k4; p++) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + 4 * p * ldb));
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 4 * p * ldb + 32));
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) {
            const __m256i ai = fa_quad_avx2(a + i * lda + 4 * p);
            acc[i][0] = fa_dpbusd256(acc[i][0], ai, b0);
            acc[i][1] = fa_dpbusd256(acc[i][1], ai, b1);
        }
    }
}

FA_AVXVNNI_TARGET FA_INLINE void tile_i8(const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                                         int64_t ldb, const int32_t *bsum, const float *bscale,
                                         const float *ascale, const float *add, float *c, int64_t ldc) {
    __m256i acc[FA_AVX2_MR][2];
    sums(m, k4, a, lda, b, ldb, acc);
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
        const __m256i off = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(bsum + 8 * j)), 7);
#pragma GCC unroll 6
        for (int i = 0; i < m; i++) acc[i][j] = _mm256_sub_epi32(acc[i][j], off);
    }
    fa_i8_finish_avx2(m, acc, bscale, ascale, add, c, ldc);
}

FA_AVXVNNI_TARGET FA_INLINE void tile_u8(const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                                         int64_t ldb, const float *bscale, const float *ascale, float *c,
                                         int64_t ldc, int accumulate) {
    __m256i acc[FA_AVX2_MR][2];
    sums(m, k4, a, lda, b, ldb, acc);
    fa_u8_finish_avx2(m, acc, bscale, ascale, c, ldc, accumulate);
}

FA_AVXVNNI_TARGET void FA_VNNI_NAME(fa_gemm_i8_avx2_vnni)(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                                                          const int8_t *b, int64_t ldb, const int32_t *bsum,
                                                          const float *bscale, const float *ascale,
                                                          const float *add, float *c, int64_t ldc) {
    FA_I8_CONTRACT;
#define V(M) tile_i8(M, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc)
    if (n == 16) FA_I8_ROWS(V)
#undef V
}

FA_AVXVNNI_TARGET void FA_VNNI_NAME(fa_gemm_u8_avx2_vnni)(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                                                          const int8_t *b, int64_t ldb, const float *bscale,
                                                          const float *ascale, float *c, int64_t ldc,
                                                          int accumulate) {
    FA_U8_CONTRACT;
#define U(M) tile_u8(M, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate)
    if (n == 16) FA_I8_ROWS(U)
#undef U
}
