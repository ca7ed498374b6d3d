/*
 * AVX2 8-bit P V tile (kernels.h, gemm_u8): m <= 6, n = 16. With AVX-VNNI
 * it is vnni_avx2.c's. Without it, P's bytes use the whole u8 range, so a
 * VPMADDUBSW pair sum (up to 2 * 255 * 127) would saturate: each byte is
 * split into its nibbles, P = 16 h + l with h, l in [0, 15], and
 * VPMADDUBSW takes each nibble against V's int8 (B as the memory operand).
 * A nibble's pair sums are at most 2 * 15 * 127 = 3810, so eight k4 steps
 * add up in 16 bits (30480) before VPMADDWD widens them, by 16 for h and
 * by 1 for l, into the 32-bit sums: exact, so the portable kernel's bits.
 *
 * Rows go three at a time: 3 rows x 2 vectors x 2 nibbles = 12 ymm of
 * 16-bit sums, with the quad and its two nibbles 15; the 32-bit sums wait
 * in memory between the widenings.
 */
#include "kernels/avx2/i8_avx2.h"

#define FA_INLINE static inline __attribute__((always_inline))

/* Steps of k4 summed in 16 bits before widening: 8 * 3810 <= 32767. */
#define FA_U8_NIBBLE_STEPS 8

/* wide[i][j] (+)= sum over p < k4 of P's (i, p) quad against B's groups
 * (p, 8j .. 8j + 7), for rows i < m <= 3. */
FA_INLINE void rows3(const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
                     __m256i wide[][2]) {
    const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi16(16);
#pragma GCC unroll 3
    for (int i = 0; i < m; i++) wide[i][0] = wide[i][1] = _mm256_setzero_si256();
    for (int64_t p0 = 0; p0 < k4; p0 += FA_U8_NIBBLE_STEPS) {
        const int64_t p1 = k4 - p0 < FA_U8_NIBBLE_STEPS ? k4 : p0 + FA_U8_NIBBLE_STEPS;
        __m256i hi[3][2], lo[3][2];
#pragma GCC unroll 3
        for (int i = 0; i < m; i++) hi[i][0] = hi[i][1] = lo[i][0] = lo[i][1] = _mm256_setzero_si256();
        for (int64_t p = p0; p < p1; p++) {
            const __m256i *bp = (const __m256i *)(b + 4 * p * ldb);
#pragma GCC unroll 3
            for (int i = 0; i < m; i++) {
                const __m256i q = fa_quad_avx2(a + i * lda + 4 * p);
                const __m256i l = _mm256_and_si256(q, low), h = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
#pragma GCC unroll 2
                for (int j = 0; j < 2; j++) {
                    const __m256i v = _mm256_loadu_si256(bp + j);
                    hi[i][j] = _mm256_add_epi16(hi[i][j], _mm256_maddubs_epi16(h, v));
                    lo[i][j] = _mm256_add_epi16(lo[i][j], _mm256_maddubs_epi16(l, v));
                }
            }
        }
#pragma GCC unroll 3
        for (int i = 0; i < m; i++)
#pragma GCC unroll 2
            for (int j = 0; j < 2; j++)
                wide[i][j] = _mm256_add_epi32(wide[i][j], _mm256_add_epi32(_mm256_madd_epi16(hi[i][j], sixteen),
                                                                           _mm256_madd_epi16(lo[i][j], ones)));
    }
}

FA_INLINE void tile_madd(const int m, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
                         const float *bscale, const float *ascale, float *c, int64_t ldc, int accumulate) {
    __m256i acc[FA_AVX2_MR][2];
    if (m > 3) {
        rows3(3, k4, a, lda, b, ldb, acc);
        rows3(m - 3, k4, a + 3 * lda, lda, b, ldb, acc + 3);
    } else {
        rows3(m, k4, a, lda, b, ldb, acc);
    }
    fa_u8_finish_avx2(m, acc, bscale, ascale, c, ldc, accumulate);
}

void fa_gemm_u8_avx2_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                          int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                          int accumulate) {
    FA_U8_CONTRACT;
#define M_(M) tile_madd(M, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate)
    if (n == 16) FA_I8_ROWS(M_)
#undef M_
}

static atomic_int vnni;

void fa_gemm_u8_avx2(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
                     const float *bscale, const float *ascale, float *c, int64_t ldc, int accumulate) {
    if (fa_cpu_once(&vnni, fa_cpu_avx_vnni))
        fa_gemm_u8_avx2_vnni(m, n, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate);
    else
        fa_gemm_u8_avx2_madd(m, n, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate);
}
