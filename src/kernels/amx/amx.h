/* AMX kernels: the AVX-512 table with gemm_bf16 on AMX-BF16's TDPBF16PS. */
#ifndef FA_KERNELS_AMX_H
#define FA_KERNELS_AMX_H

#include "kernels/kernels.h"

void fa_gemm_bf16_amx(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                      const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                      float alpha);

/* The same kernel source with the tile instructions emulated in C (tests
 * only: CPUs without AMX still run its configuration, strides, remainders
 * and epilogue against the portable definition, bit for bit). */
void fa_gemm_bf16_amx_emulated(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                               const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
                               int accumulate, float alpha);

/* The AMX peak loop (kernels/peak.h): `iters` x 4 TDPBF16PS of 16384 flops. */
float fa_peak_amx_loop(int64_t iters);
#define FA_PEAK_AMX_FLOPS (4.0 * 16 * 16 * 32 * 2)

#endif
