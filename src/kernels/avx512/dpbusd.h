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

static inline __attribute__((always_inline)) __m512i fa_dpbusd512(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

#endif
