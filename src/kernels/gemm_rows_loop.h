/*
 * The loop around an ISA's gemm_rows register tile (contract: kernels.h),
 * shared by the AVX2 and AVX-512 files, which include it after defining
 *   tile_cols(m, bt, w, k, a, lda, b, ldb, c, ldc, accumulate, pf)
 *       always_inline: C for m <= 4 rows and w <= FA_ROWS_COLS columns
 *       (b in bytes, ldb in elements), prefetching pf bytes past the B
 *       rows when pf != 0
 *   FA_ROWS_COLS   columns of one tile
 * and then define their entry point as one call to fa_gemm_rows_dispatch.
 * Rows go 4 at a time over the same columns while those B rows are in L1.
 */
#ifndef FA_GEMM_ROWS_LOOP_H
#define FA_GEMM_ROWS_LOOP_H

#include "kernels/kernels.h"

static inline __attribute__((always_inline)) void fa_gemm_rows_loop(
    flashattn_dtype bt, int m, int n, int64_t k, const float *a, int64_t lda, const char *b,
    int64_t ldb, float *c, int64_t ldc, int accumulate, int64_t pf) {
    const int64_t es = fa_dtype_bytes(bt);
    for (int j = 0; j < n; j += FA_ROWS_COLS) {
        const int w = n - j < FA_ROWS_COLS ? n - j : FA_ROWS_COLS;
        for (int i = 0; i < m; i += 4) {
            const float *ai = a + i * lda;
            float *ci = c + i * ldc + j;
            switch (m - i) {
            case 1: tile_cols(1, bt, w, k, ai, lda, b + j * es, ldb, ci, ldc, accumulate, pf); break;
            case 2: tile_cols(2, bt, w, k, ai, lda, b + j * es, ldb, ci, ldc, accumulate, pf); break;
            case 3: tile_cols(3, bt, w, k, ai, lda, b + j * es, ldb, ci, ldc, accumulate, pf); break;
            default: tile_cols(4, bt, w, k, ai, lda, b + j * es, ldb, ci, ldc, accumulate, pf); break;
            }
        }
    }
}

/* One compiled loop per dtype of B. */
static inline __attribute__((always_inline)) void fa_gemm_rows_dispatch(
    int m, int n, int64_t k, const float *a, int64_t lda, const void *b, flashattn_dtype bt,
    int64_t ldb, float *c, int64_t ldc, int accumulate, int64_t pf) {
    switch (bt) {
    case FLASHATTN_F32: fa_gemm_rows_loop(FLASHATTN_F32, m, n, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case FLASHATTN_F16: fa_gemm_rows_loop(FLASHATTN_F16, m, n, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case FLASHATTN_BF16: fa_gemm_rows_loop(FLASHATTN_BF16, m, n, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case FLASHATTN_INT8: fa_gemm_rows_loop(FLASHATTN_INT8, m, n, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case FLASHATTN_FP8_E4M3: fa_gemm_rows_loop(FLASHATTN_FP8_E4M3, m, n, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case FLASHATTN_FP8_E5M2: fa_gemm_rows_loop(FLASHATTN_FP8_E5M2, m, n, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    default: break;
    }
}

#endif
