/* AVX2 + FMA + F16C kernels: the fa_kernels_avx2 entries. */
#ifndef FA_KERNELS_AVX2_H
#define FA_KERNELS_AVX2_H

#include "kernels/kernels.h"

/* GEMM register tile; gemm_avx2.c explains the choice. */
#define FA_AVX2_MR 6
#define FA_AVX2_NR 16

void fa_gemm_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc, int accumulate);
float fa_row_max_avx2(const float *x, int64_t n);
int fa_all_finite_avx2(const float *x, int64_t n);
float fa_exp2_sum_avx2(float *x, int64_t n, float m);
void fa_softcap_row_avx2(float *x, int64_t n, float cap, float *dcap);
void fa_alibi_row_avx2(float *x, int64_t n, float a, float slope);
void fa_scale_avx2(float *x, int64_t n, float a);
void fa_scale_cols_avx2(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero);
void fa_load_avx2(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul);
void fa_transpose_avx2(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                       int rows, int64_t cols);
void fa_store_avx2(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
void fa_store_stream_avx2(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
void fa_store_fence_avx2(void);
void fa_gemm_nt_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                     flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf);
void fa_gemm_rows_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                       flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                       int64_t pf);

void fa_dropout_row_avx2(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                         int64_t j0, uint32_t threshold, float scale);
void fa_dropout_cols_avx2(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                          uint64_t offset, int64_t j0, uint32_t threshold, float scale);

/* Whether the CPU runs this table (cpu_avx2.c, built without AVX2 flags). */
int fa_cpu_avx2(void);

/* gemm_i8 on AVX-VNNI where the CPU has it, else on VPMADDUBSW; both
 * callable (tests/test_kernels.c runs each; _vnni only where the CPU has it). */
void fa_gemm_i8_avx2(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                     int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                     const float *add, float *c, int64_t ldc);
const char *fa_gemm_i8_way_avx2(void);
void fa_gemm_i8_avx2_vnni(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                          const int8_t *b, int64_t ldb, const int32_t *bsum, const float *bscale,
                          const float *ascale, const float *add, float *c, int64_t ldc);
void fa_gemm_i8_avx2_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                          const int8_t *b, int64_t ldb, const int32_t *bsum, const float *bscale,
                          const float *ascale, const float *add, float *c, int64_t ldc);
/* gemm_u8 likewise: AVX-VNNI, else VPMADDUBSW on P's nibbles. */
void fa_gemm_u8_avx2(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb,
                     const float *bscale, const float *ascale, float *c, int64_t ldc, int accumulate);
void fa_gemm_u8_avx2_vnni(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                          int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                          int accumulate);
void fa_gemm_u8_avx2_madd(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                          int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                          int accumulate);
void fa_quant_u8_avx2(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale);
void fa_quant_i8_row_avx2(float *x, const float *sub, int64_t n, int8_t *q, float *scale);
void fa_amax_acc_avx2(const float *x, int64_t n, uint32_t *amax);
void fa_quant_i8_with_avx2(const float *x, const float *inv, int64_t n, int8_t *q);
/* Tests: the AVX-VNNI tiles with the instruction emulated (tests/avxvnni_emulated.c). */
void fa_gemm_i8_avx2_vnni_emulated(int m, int n, int64_t k4, const uint8_t *a, int64_t lda,
                                   const int8_t *b, int64_t ldb, const int32_t *bsum, const float *bscale,
                                   const float *ascale, const float *add, float *c, int64_t ldc);
void fa_gemm_u8_avx2_vnni_emulated(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                                   int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                                   int accumulate);
/* Whether the CPU has AVX-VNNI (CPUID.7.1:EAX bit 4) besides the table. */
int fa_cpu_avx_vnni(void);

#endif
