/* AMX kernels: the AVX-512 table with gemm_bf16 on AMX-BF16's TDPBF16PS. */
#ifndef FA_KERNELS_AMX_H
#define FA_KERNELS_AMX_H

#include <stdint.h>

#include "kernels/kernels.h"

/* LDTILECFG's 64-byte operand (palette 1: up to 16 rows of 64 bytes a tile). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} fa_tile_config;

void fa_gemm_bf16_amx(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                      const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                      float alpha);

void fa_gemm_bf16_amx_done(void);

/* The same kernel source with the tile instructions emulated in C (tests
 * only: CPUs without AMX still run its configuration, strides, remainders
 * and epilogue against the portable definition, bit for bit). */
void fa_gemm_bf16_amx_emulated(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                               const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
                               int accumulate, float alpha);
void fa_gemm_bf16_amx_emulated_done(void);
int fa_gemm_bf16_amx_emulated_loaded(void);

/* gemm_i8 on AMX-INT8's TDPBUSD (gemm_bf16_amx.c; the tiles it leaves
 * configured are gemm_bf16's, released by fa_gemm_bf16_amx_done), and the
 * table's entry, which takes it where the CPU has AMX-INT8 and the AVX-512
 * kernel elsewhere. */
void fa_gemm_i8_amx_tiles(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                          int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                          const float *add, float *c, int64_t ldc);
void fa_gemm_i8_amx(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                    const float *add, float *c, int64_t ldc);
const char *fa_gemm_i8_way_amx(void);
void fa_gemm_i8_amx_emulated(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                             int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                             const float *add, float *c, int64_t ldc);
/* gemm_u8 likewise: on TDPBUSD (tiles as gemm_i8's), the table's entry,
 * and the tests' emulated one. */
void fa_gemm_u8_amx_tiles(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                          int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                          int accumulate);
void fa_gemm_u8_amx(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                    int accumulate);
void fa_gemm_u8_amx_emulated(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                             int64_t ldb, const float *bscale, const float *ascale, float *c,
                             int64_t ldc, int accumulate);
/* Whether the CPU has AMX-INT8 (CPUID.7.0:EDX bit 25) besides the table. */
int fa_cpu_amx_int8(void);

/* Whether the CPU (and OS) run this table (cpu_amx.c, built without AMX flags). */
int fa_cpu_amx(void);

#endif
