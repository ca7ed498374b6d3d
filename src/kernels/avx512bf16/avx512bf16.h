/* AVX512_BF16 kernels: the AVX-512 table plus gemm_bf16 on VDPBF16PS. */
#ifndef FA_KERNELS_AVX512BF16_H
#define FA_KERNELS_AVX512BF16_H

#include "kernels/kernels.h"

void fa_gemm_bf16_avx512bf16(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                             const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
                             int accumulate, float alpha);

/* The same kernel source built with the instruction emulated in AVX-512F
 * (tests only: CPUs without AVX512_BF16 still run the kernel's loads,
 * broadcasts, tile shape and epilogue against the portable definition). */
void fa_gemm_bf16_emulated(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                           const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                           float alpha);

/* Whether the CPU runs this table (cpu_avx512bf16.c, built without its flags). */
int fa_cpu_avx512bf16(void);

#endif
