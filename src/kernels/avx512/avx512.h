/* AVX-512 kernels (F, BW, VL, DQ + FMA, F16C): the fa_kernels_avx512 entries. */
#ifndef FA_KERNELS_AVX512_H
#define FA_KERNELS_AVX512_H

#include "kernels/kernels.h"

/* The table's f32 entries, shared with the AVX512_BF16 and AMX tables,
 * which add their bf16 tile and CPU check. */
#define FA_AVX512_ENTRIES                                                                         \
    .mr = FA_AVX512_MR, .nr = FA_AVX512_NR, .gemm = fa_gemm_avx512, .row_max = fa_row_max_avx512,  \
    .all_finite = fa_all_finite_avx512,                                                            \
    .exp2_sum = fa_exp2_sum_avx512, .scale = fa_scale_avx512, .load = fa_load_avx512,              \
    .scale_cols = fa_scale_cols_avx512,                                                            \
    .store = fa_store_avx512, .store_stream = fa_store_stream_avx512,                              \
    .store_fence = fa_store_fence_avx512, .gemm_nt = fa_gemm_nt_avx512,                            \
    .gemm_rows = fa_gemm_rows_avx512, .transpose = fa_transpose_avx512

/* GEMM register tile; gemm_avx512.c explains the choice. */
#define FA_AVX512_MR 12
#define FA_AVX512_NR 32

void fa_gemm_avx512(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, int accumulate);
float fa_row_max_avx512(const float *x, int64_t n);
int fa_all_finite_avx512(const float *x, int64_t n);
float fa_exp2_sum_avx512(float *x, int64_t n, float m);
void fa_scale_avx512(float *x, int64_t n, float a);
void fa_scale_cols_avx512(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero);
void fa_load_avx512(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul);
void fa_transpose_avx512(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                         int rows, int64_t cols);
void fa_store_avx512(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
void fa_store_stream_avx512(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
void fa_store_fence_avx512(void);
void fa_gemm_nt_avx512(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                       flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf);
void fa_gemm_rows_avx512(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                         flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                         int64_t pf);

/* gemm_i8 on AVX512_VNNI where the CPU has it, else on VPMADDUBSW; both
 * callable (tests/test_kernels.c runs each; _vnni only where the CPU has it). */
void fa_gemm_i8_avx512(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                       int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                       const float *add, float *c, int64_t ldc);
const char *fa_gemm_i8_way_avx512(void);
void fa_gemm_i8_avx512_vnni(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                            const int8_t *b, int64_t ldb, const int32_t *bsum,
                            const float *bscale, const float *ascale, const float *add, float *c,
                            int64_t ldc);
void fa_gemm_i8_avx512_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                            const int8_t *b, int64_t ldb, const int32_t *bsum,
                            const float *bscale, const float *ascale, const float *add, float *c,
                            int64_t ldc);

/* gemm_u8 on AVX512_VNNI where the CPU has it, else _madd: the AVX2
 * tile on P's nibbles (full-range u8 A would saturate VPMADDUBSW's pair
 * sums), 6 rows x 16 columns at a time; _vnni callable only where the CPU
 * has it. */
void fa_gemm_u8_avx512(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                       int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                       int accumulate);
void fa_gemm_u8_avx512_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                            int64_t ldb, const float *bscale, const float *ascale, float *c,
                            int64_t ldc, int accumulate);
void fa_gemm_u8_avx512_vnni(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                            int64_t ldb, const float *bscale, const float *ascale, float *c,
                            int64_t ldc, int accumulate);

void fa_quant_u8_avx512(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale);
void fa_quant_i8_row_avx512(float *x, const float *sub, int64_t n, int8_t *q, float *scale);
void fa_amax_acc_avx512(const float *x, int64_t n, uint32_t *amax);
void fa_quant_i8_with_avx512(const float *x, const float *inv, int64_t n, int8_t *q);

/* Whether the CPU has AVX512_VNNI (CPUID.7.0:ECX bit 11) besides the table. */
int fa_cpu_avx512_vnni(void);

/* Whether the CPU runs this table (cpu_avx512.c, built without AVX-512 flags). */
int fa_cpu_avx512(void);

#endif
