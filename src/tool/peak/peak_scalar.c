/*
 * Portable peak loops: what plain C reaches on the build's baseline target
 * (the compiler may vectorise the chains, without FMA: a multiply and an
 * add, 2 flops, per chain step). Used where no SIMD table applies.
 */
#include "tool/peak_loops.h"

#define CHAINS 16

/* acc = acc * m + a converges to a / (1 - m): no overflow, no denormals. */
static float fma_loop_ref(int64_t iters) {
    float acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = (float)c;
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * 0.999999f + 1e-6f;
    float s = 0.0f;
    for (int c = 0; c < CHAINS; c++) s += acc[c];
    return s;
}

static double read_sum_ref(const float *x, int64_t n) {
    float acc[CHAINS] = {0};
    for (int64_t i = 0; i < n; i += CHAINS)
        for (int c = 0; c < CHAINS; c++) acc[c] += x[i + c];
    double s = 0.0;
    for (int c = 0; c < CHAINS; c++) s += acc[c];
    return s;
}

const fa_peak_kernels fa_peak_scalar = {
    .isa = "scalar",
    .fma_flops = CHAINS * 2,
    .fma_loop = fma_loop_ref,
    .read_sum = read_sum_ref,
};
