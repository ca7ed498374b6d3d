/*
 * AVX-512 peak loops. FP32: 16 chains of vfmadd on zmm. Skylake-SP and
 * Ice Lake server cores have two 512-bit FMA ports with a 4-cycle latency,
 * so 8 chains keep them busy; 16 leave margin for a slower FMA and cost
 * nothing (32 zmm registers).
 */
#include <immintrin.h>

#include "tool/peak_loops.h"

#define CHAINS 16

/* acc = acc * m + a converges to a / (1 - m): no overflow, no denormals. */
static float fma_loop_avx512(int64_t iters) {
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-6f);
    __m512 acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
    __m512 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_ps(s, acc[c]);
    return _mm512_reduce_add_ps(s);
}

/*
 * vdpbf16ps adds 2 bf16 products per f32 lane: 64 flops a zmm instruction.
 * AVX512_BF16 is an extension beyond this file's CMake flags, so only this
 * function is compiled for it; the caller checks CPUID before calling.
 */
__attribute__((target("avx512f,avx512bf16"))) static float bf16_loop_avx512(int64_t iters) {
    /* bf16 pairs (1.0, 2^-20): each step adds 2^-19 per lane, exactly. */
    const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
    const __m512bh y = (__m512bh)_mm512_set1_epi32(0x35803580);
    __m512 acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbf16_ps(acc[c], x, y);
    __m512 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_ps(s, acc[c]);
    return _mm512_reduce_add_ps(s);
}

/* Four independent sums, 256 bytes (4 cache lines) per step. */
static double read_sum_avx512(const float *x, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < n; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_load_ps(x + i));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(x + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(x + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(x + i + 48));
    }
    return (double)_mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

const fa_peak_kernels fa_peak_avx512 = {
    .isa = "avx512",
    .fma_flops = CHAINS * 16 * 2,
    .fma_loop = fma_loop_avx512,
    .bf16_flops = CHAINS * 16 * 2 * 2,
    .bf16_loop = bf16_loop_avx512,
#ifdef FA_HAVE_AMX
    .amx_flops = FA_PEAK_AMX_FLOPS,
    .amx_loop = fa_peak_amx_loop,
#endif
    .read_sum = read_sum_avx512,
};
