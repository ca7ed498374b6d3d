/*
 * Loops that measure the machine rather than compute attention: the FP32
 * FMA peak, the BF16 dot-product peak and the memory read bandwidth, for
 * `flashattn peak` and the pct_peak column of `flashattn bench` (tools only:
 * not part of the shipped library). Each path has its table here in
 * tool/peak/, compiled with that path's flags (kernels/isa_list.h).
 *
 * The compute loops run `iters` iterations of `chains` independent
 * accumulator chains, enough to cover the FMA latency times the FMA ports
 * of the CPUs that ISA targets, so they run at the throughput limit. They
 * return a value that depends on every chain, so no compiler can drop work.
 */
#ifndef FA_TOOL_PEAK_LOOPS_H
#define FA_TOOL_PEAK_LOOPS_H

#include <stdint.h>

typedef struct fa_peak_kernels {
    const char *isa;
    /* FP32: `fma_flops` floating-point operations per iteration. */
    double fma_flops;
    float (*fma_loop)(int64_t iters);
    /* BF16 pairs summed into FP32 (AVX512_BF16 vdpbf16ps), or NULL. The
     * table holds it when the compiler can build it; the caller checks
     * that the CPU has the instruction before calling. */
    double bf16_flops;
    float (*bf16_loop)(int64_t iters);
    /* AMX-BF16 tiles (TDPBF16PS), or NULL; the caller checks that the
     * amx kernel table is available before calling. */
    double amx_flops;
    float (*amx_loop)(int64_t iters);
    /* Sum of x[0..n): a read-bandwidth loop (x 64-byte aligned, n % 64 == 0). */
    double (*read_sum)(const float *x, int64_t n);
} fa_peak_kernels;

/* The AMX loop (peak_amx.c): `iters` x 4 TDPBF16PS of 16384 flops. */
float fa_peak_amx_loop(int64_t iters);
#define FA_PEAK_AMX_FLOPS (4.0 * 16 * 16 * 32 * 2)

extern const fa_peak_kernels fa_peak_scalar;
extern const fa_peak_kernels fa_peak_avx2;
extern const fa_peak_kernels fa_peak_avx512;

#endif /* FA_PEAK_H */
