/*
 * NEON C (=, +=) A . B, B given as rows in a storage dtype (contract:
 * kernels.h, gemm_rows): decode's acc += P V read straight from the cache.
 * Each element is one FMA chain over k in increasing order, as the
 * portable gemm computes it, so results match it bit for bit.
 *
 * Register tile: up to 4 rows of A x 16 columns of B, 16 q accumulators
 * (with the 4 widened B vectors and a broadcast, 21 of the 32 registers).
 * Per k step: 4 B loads, 4 broadcasts, 16 FMAs. Columns past n are
 * neither read nor written: a short tile (w < 16) reads its B rows
 * through zero-padded copies and writes C through one.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/neon/neon.h"
#include "kernels/neon/widen_neon.h"

/* C[m x w] for m <= 4 rows, w <= 16 columns; m, bt literals; `full`: w == 16. */
static inline __attribute__((always_inline)) void tile(const int m, flashattn_dtype bt,
                                                       const int full, int w, int64_t k,
                                                       const float *a, int64_t lda,
                                                       const char *b, int64_t ldb, float *c,
                                                       int64_t ldc, int accumulate, int64_t pf) {
    const int64_t es = fa_dtype_bytes(bt);
    float32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        float row[16] = {0};
        const float *ci = c + i * ldc;
        if (accumulate && !full) memcpy(row, ci, (size_t)w * sizeof(float)), ci = row;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[i][j] = accumulate ? vld1q_f32(ci + 4 * j) : vdupq_n_f32(0.0f);
    }
    for (int64_t p = 0; p < k; p++) {
        float32x4_t bv[4];
        if (full) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) bv[j] = fa_neon_widen(bt, b + 4 * j * es);
        } else {
            _Alignas(16) unsigned char row[16 * 4] = {0};
            memcpy(row, b, (size_t)(w * es));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) bv[j] = fa_neon_widen(bt, row + 4 * j * es);
        }
        if (pf) fa_prefetch(b, pf);
        b += ldb * es;
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            const float32x4_t ai = vld1q_dup_f32(a + i * lda + p);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[i][j] = vfmaq_f32(acc[i][j], ai, bv[j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        if (full) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) vst1q_f32(c + i * ldc + 4 * j, acc[i][j]);
        } else {
            float row[16];
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) vst1q_f32(row + 4 * j, acc[i][j]);
            memcpy(c + i * ldc, row, (size_t)w * sizeof(float));
        }
    }
}

static inline __attribute__((always_inline)) void tile_cols(const int m, flashattn_dtype bt, int w,
                                                            int64_t k, const float *a,
                                                            int64_t lda, const char *b,
                                                            int64_t ldb, float *c, int64_t ldc,
                                                            int accumulate, int64_t pf) {
    if (w == 16)
        tile(m, bt, 1, 16, k, a, lda, b, ldb, c, ldc, accumulate, pf);
    else
        tile(m, bt, 0, w, k, a, lda, b, ldb, c, ldc, accumulate, pf);
}

#define FA_ROWS_COLS 16
#include "kernels/gemm_rows_loop.h"

void fa_gemm_rows_neon(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                       flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                       int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_rows_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, accumulate, pf);
}
