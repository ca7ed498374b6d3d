/*
 * AVX-512 C (=, +=) A . B, B given as rows in a storage dtype (contract:
 * kernels.h, gemm_rows): decode's acc += P V read straight from the cache.
 * Each element is one FMA chain over k in increasing order, as the
 * portable gemm computes it, so results match it bit for bit.
 *
 * Register tile: up to 4 rows of A x 64 columns of B (16 zmm accumulators).
 * Per k step: 4 B loads widened to f32 (VCVTPH2PS, or a shift for bf16),
 * 4 broadcasts of A, 16 FMAs: the FMA ports bound it, and 16 chains cover
 * the FMA latency. 4 rows is decode's usual m (one GQA group of one query
 * position); more rows go 4 at a time over the same columns while those B
 * rows are in L1. Columns past n are masked: they are neither read nor
 * written, so rows of any length (head_dim 72, 100) need no padding.
 */
#include <immintrin.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/widen_avx512.h"

static inline __mmask16 lanes(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
}

/* C[m x w] for m <= 4 rows and w <= 16 * nv columns; m, nv, bt literals. */
static inline __attribute__((always_inline)) void tile(const int m, const int nv,
                                                       flashattn_dtype bt, int w, int64_t k,
                                                       const float *a, int64_t lda,
                                                       const char *b, int64_t ldb, float *c,
                                                       int64_t ldc, int accumulate, int64_t pf) {
    const int64_t es = fa_dtype_bytes(bt);
    __mmask16 live[4];
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) live[j] = lanes(w - 16 * j);
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++)
            acc[i][j] = accumulate ? _mm512_maskz_loadu_ps(live[j], c + i * ldc + 16 * j)
                                   : _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        __m512 bv[4];
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) bv[j] = fa512_widen(bt, b + 16 * j * es, live[j]);
        if (pf)
            for (int x = 0; x < 16 * nv * es; x += 64) fa_prefetch(b + x, pf);
        b += ldb * es;
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            const __m512 ai = _mm512_set1_ps(a[i * lda + p]);
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) _mm512_mask_storeu_ps(c + i * ldc + 16 * j, live[j], acc[i][j]);
}

static inline __attribute__((always_inline)) void tile_cols(const int m, flashattn_dtype bt,
                                                            int w, int64_t k, const float *a,
                                                            int64_t lda, const char *b,
                                                            int64_t ldb, float *c, int64_t ldc,
                                                            int accumulate, int64_t pf) {
    switch ((w + 15) / 16) {
    case 1: tile(m, 1, bt, w, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case 2: tile(m, 2, bt, w, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    case 3: tile(m, 3, bt, w, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    default: tile(m, 4, bt, w, k, a, lda, b, ldb, c, ldc, accumulate, pf); break;
    }
}

#define FA_ROWS_COLS 64
#include "kernels/gemm_rows_loop.h"

void fa_gemm_rows_avx512(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                         flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                         int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_rows_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, accumulate, pf);
}
