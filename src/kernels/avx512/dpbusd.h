/*
 * acc + VPDPBUSD(a as u8, b as int8) on zmm, in an asm statement: gcc 12
 * gives _mm512_dpbusd_epi32 a copy in and out of its accumulator and keeps
 * every accumulator on the stack as well, each step of the k loop (the
 * 8-bit score tile ran at 1.4x the f32 tile's rate instead of 2x). The
 * caller's function carries target("avx512vnni") and runs only where the
 * CPU has it.
 */
#ifndef FA_KERNELS_AVX512_DPBUSD_H
#define FA_KERNELS_AVX512_DPBUSD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline __attribute__((always_inline)) __m512i fa_dpbusd512(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

/* The 8-bit tiles' shared loop (gemm_i8's and gemm_u8's, kernels.h):
 * acc[i][j] = sum over p < k4 of VPDPBUSD(A's quad (i, p) broadcast, B's
 * groups (p, 16 j .. 16 j + 15)), for m <= 12 rows and nv <= 2 vectors of
 * 16 columns, both literals after inlining so that acc stays in registers. */
static inline __attribute__((always_inline)) void fa_vnni_sums(const int m, const int nv, int64_t k4,
                                                               const uint8_t *a, int64_t lda,
                                                               const int8_t *b, int64_t ldb,
                                                               __m512i acc[][2]) {
#pragma GCC unroll 12
    for (int i = 0; i < m; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) acc[i][j] = _mm512_setzero_si512();
    for (int64_t p = 0; p < k4; p++) {
        __m512i bv[2];
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) bv[j] = _mm512_loadu_si512((const void *)(b + 4 * p * ldb + 64 * j));
#pragma GCC unroll 12
        for (int i = 0; i < m; i++) {
            int32_t x;
            memcpy(&x, a + i * lda + 4 * p, sizeof x);
            const __m512i ai = _mm512_set1_epi32(x);
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) acc[i][j] = fa_dpbusd512(acc[i][j], ai, bv[j]);
        }
    }
}

/* CALL(M) for m = 1 .. 12 as literals (the tiles' rows), nothing otherwise. */
#define FA_I8_ROWS(CALL)                                                                          \
    switch (m) {                                                                                  \
    case 1: CALL(1); break;                                                                       \
    case 2: CALL(2); break;                                                                       \
    case 3: CALL(3); break;                                                                       \
    case 4: CALL(4); break;                                                                       \
    case 5: CALL(5); break;                                                                       \
    case 6: CALL(6); break;                                                                       \
    case 7: CALL(7); break;                                                                       \
    case 8: CALL(8); break;                                                                       \
    case 9: CALL(9); break;                                                                       \
    case 10: CALL(10); break;                                                                     \
    case 11: CALL(11); break;                                                                     \
    case 12: CALL(12); break;                                                                     \
    default: break;                                                                               \
    }

#endif
