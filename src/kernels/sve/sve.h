/* AArch64 SVE kernels, vector-length agnostic: the fa_kernels_sve entries
 * that SVE does differently (the GEMM tile, exp2); the rest of the table
 * is the NEON path's (SVE implies Advanced SIMD). */
#ifndef FA_KERNELS_SVE_H
#define FA_KERNELS_SVE_H

#include "kernels/kernels.h"

/* GEMM register tile; gemm_sve.c explains the choice. */
#define FA_SVE_MR 12
#define FA_SVE_NR 16

void fa_gemm_sve(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int accumulate);
float fa_exp2_sum_sve(float *x, int64_t n, float m);

/* Whether the CPU (and OS) run this table (cpu_sve.c, built without the
 * path's flags). */
int fa_cpu_sve(void);

#endif
