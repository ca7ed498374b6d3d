/* Portable kernels: each defines the contract its SIMD versions follow. */
#ifndef FA_KERNELS_REF_H
#define FA_KERNELS_REF_H

#include "kernels/kernels.h"

#define FA_REF_MR 4
#define FA_REF_NR 16

void fa_gemm_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int accumulate);
/* gemm's FMA chains for any n <= FA_REF_NR (not only multiples of
 * FA_COL_ALIGN): the blocks of gemm_rows_ref and the tests' tilings. */
void fa_gemm_block_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float *c, int64_t ldc, int accumulate);
float fa_row_max_ref(const float *x, int64_t n);
int fa_all_finite_ref(const float *x, int64_t n);
float fa_exp2_sum_ref(float *x, int64_t n, float m);
void fa_softcap_row_ref(float *x, int64_t n, float cap, float *dcap);
void fa_alibi_row_ref(float *x, int64_t n, float a, float slope);
void fa_scale_ref(float *x, int64_t n, float a);
void fa_scale_cols_ref(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero);
void fa_load_ref(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul);
float fa_widen_ref(const void *src, flashattn_dtype dt, int64_t i);
void fa_transpose_ref(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                      int rows, int64_t cols);
void fa_store_ref(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
void fa_gemm_nt_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                    flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf);
void fa_gemm_rows_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                      flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                      int64_t pf);
void fa_gemm_bf16_ref(int m, int n, int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b,
                      int64_t ldb, float *c, int64_t ldc, int accumulate, float alpha);
void fa_gemm_i8_ref(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                    const float *add, float *c, int64_t ldc);
const char *fa_gemm_i8_way_ref(void);
void fa_gemm_u8_ref(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                    int accumulate);
void fa_quant_u8_ref(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale);
void fa_quant_i8_row_ref(float *x, const float *sub, int64_t n, int8_t *q, float *scale);
void fa_amax_acc_ref(const float *x, int64_t n, uint32_t *amax);
void fa_quant_i8_with_ref(const float *x, const float *inv, int64_t n, int8_t *q);
/* gemm, gemm_nt, gemm_rows and gemm_bf16 with every term that has a zero
 * factor left out (gemm_skip_ref.c): the non-finite rerun's products, for
 * any m and n. */
void fa_gemm_skip_ref(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float *c, int64_t ldc, int accumulate);
void fa_gemm_nt_skip_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                         flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf);
void fa_gemm_rows_skip_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                           flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                           int64_t pf);
void fa_gemm_bf16_skip_ref(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                           const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                           float alpha);
void fa_dropout_row_ref(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                        int64_t j0, uint32_t threshold, float scale);
void fa_dropout_cols_ref(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                          uint64_t offset, int64_t j0, uint32_t threshold, float scale);
/* The entries with nothing to do on a path: store_fence where store_stream
 * is the plain store, gemm_bf16_done where gemm_bf16 keeps no state. */
void fa_noop_ref(void);
/* cpu_supported of the portable table: it runs anywhere. */
int fa_cpu_scalar(void);

#endif
