/* What the AVX2 8-bit tiles share (gemm_i8_avx2.c, gemm_u8_avx2.c,
 * vnni_avx2.c): A's quads, the rows' dispatch and the contracts, the
 * score tile's epilogue, and VPDPBUSD, which tests can have emulated. */
#ifndef FA_KERNELS_I8_AVX2_H
#define FA_KERNELS_I8_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/avx2/avx2.h"

/* A's 4 bytes (i, p) in every 32-bit lane. */
static inline __attribute__((always_inline)) __m256i fa_quad_avx2(const uint8_t *a) {
    int32_t x;
    memcpy(&x, a, sizeof x);
    return _mm256_set1_epi32(x);
}

/* gemm_i8's C = fmaf((float)dot * bscale[j], ascale[i], add[i]). */
static inline __attribute__((always_inline)) void fa_i8_finish_avx2(const int m, __m256i acc[][2],
                                                                    const float *bscale, const float *ascale,
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

/* gemm_u8's C = fmaf((float)dot * bscale[j], ascale[i], accumulate ? C : 0). */
static inline __attribute__((always_inline)) void fa_u8_finish_avx2(const int m, __m256i acc[][2],
                                                                    const float *bscale, const float *ascale,
                                                                    float *c, int64_t ldc, int accumulate) {
#pragma GCC unroll 6
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][j]), _mm256_loadu_ps(bscale + 8 * j));
            const __m256 old = accumulate ? _mm256_loadu_ps(c + i * ldc + 8 * j) : _mm256_setzero_ps();
            _mm256_storeu_ps(c + i * ldc + 8 * j, _mm256_fmadd_ps(u, _mm256_set1_ps(ascale[i]), old));
        }
}

/* CALL(M) for m = 1 .. 6 as literals (the tiles' rows), nothing otherwise. */
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
#define FA_U8_CONTRACT                                                                            \
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX2_MR && (n == 16 || n == 0) && k4 >= 0 && 4 * k4 <= 65536)

/* acc + VPDPBUSD(a as u8, b as int8) per 32-bit lane. On the CPU: the
 * VEX-encoded instruction (AVX-VNNI) in an asm statement, since gcc 12
 * gives _mm256_dpbusd_avx_epi32 a copy in and out of its accumulator and
 * keeps the accumulators on the stack as well, each step of the k loop
 * (gemm_i8_avx512.c measured what that costs). With FA_AVXVNNI_EMULATE
 * (tests/avxvnni_emulated.c, for CPUs without it): the same sums from
 * 16-bit products, exact, so the tiles around it are tested bit for bit. */
#ifdef FA_AVXVNNI_EMULATE
#define FA_AVXVNNI_TARGET
static inline __attribute__((always_inline)) __m256i fa_dpbusd256(__m256i acc, __m256i a, __m256i b) {
    const __m256i lo8 = _mm256_set1_epi16(0xff);
    const __m256i a_even = _mm256_and_si256(a, lo8), a_odd = _mm256_srli_epi16(a, 8);
    const __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), b_odd = _mm256_srai_epi16(b, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(a_even, b_even), _mm256_madd_epi16(a_odd, b_odd)));
}
#else
#define FA_AVXVNNI_TARGET __attribute__((target("avxvnni")))
FA_AVXVNNI_TARGET static inline __attribute__((always_inline)) __m256i fa_dpbusd256(__m256i acc, __m256i a, __m256i b) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
}
#endif

#endif
