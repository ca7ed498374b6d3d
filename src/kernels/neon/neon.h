/* AArch64 Advanced SIMD (NEON) kernels: the fa_kernels_neon entries. */
#ifndef FA_KERNELS_NEON_H
#define FA_KERNELS_NEON_H

#include "kernels/kernels.h"

/* GEMM register tile; gemm_neon.c explains the choice. */
#define FA_NEON_MR 6
#define FA_NEON_NR 16

void fa_gemm_neon(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate);
float fa_row_max_neon(const float *x, int64_t n);
float fa_exp2_sum_neon(float *x, int64_t n, float m);
void fa_softcap_row_neon(float *x, int64_t n, float cap, float *dcap);
void fa_alibi_row_neon(float *x, int64_t n, float a, float slope);
void fa_scale_neon(float *x, int64_t n, float a);
void fa_load_neon(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul);
void fa_transpose_neon(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                       int rows, int64_t cols);
void fa_store_neon(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
void fa_gemm_nt_neon(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                     flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf);
void fa_gemm_rows_neon(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                       flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                       int64_t pf);
void fa_dropout_row_neon(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                         int64_t j0, uint32_t threshold, float scale);
void fa_dropout_cols_neon(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                          uint64_t offset, int64_t j0, uint32_t threshold, float scale);

/* Whether the CPU runs this table (cpu_neon.c, built without the path's
 * flags); fa_cpu_arm_bf16: whether it has FEAT_BF16 (BFCVT). */
int fa_cpu_neon(void);
int fa_cpu_arm_bf16(void);

#endif
