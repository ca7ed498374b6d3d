/*
 * AVX2 C (=, +=) A . B, B given as rows in a storage dtype (contract:
 * kernels.h, gemm_rows): decode's acc += P V read straight from the cache.
 * Each element is one FMA chain over k in increasing order, as the
 * portable gemm computes it, so results match it bit for bit.
 *
 * Register tile: up to 4 rows of A x 16 columns of B, 8 ymm accumulators
 * (with the 2 widened B vectors and a broadcast, 11 of the 16 ymm
 * registers). Per k step: 2 B loads, 4 broadcasts, 8 FMAs; 8 chains cover
 * the FMA latency on two ports. Columns past n are neither read nor
 * written (a short last vector goes through a mask, or a copy for 16-bit
 * rows, which AVX2 cannot load under a mask).
 */
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/widen_avx2.h"

static inline __m256i lanes(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* C[m x w] for m <= 4 rows, w <= 16 columns; m, bt literals; `full`: w == 16. */
static inline __attribute__((always_inline)) void tile(const int m, flashattn_dtype bt,
                                                       const int full, int w, int64_t k,
                                                       const float *a, int64_t lda,
                                                       const char *b, int64_t ldb, float *c,
                                                       int64_t ldc, int accumulate, int64_t pf) {
    const int64_t es = fa_dtype_bytes(bt);
    const int w1 = w - 8; /* columns of the second vector, may be <= 0 */
    const __m256i live0 = lanes(w), live1 = lanes(w1);
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        if (!accumulate) {
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        } else if (full) {
            acc[i][0] = _mm256_loadu_ps(c + i * ldc);
            acc[i][1] = _mm256_loadu_ps(c + i * ldc + 8);
        } else {
            acc[i][0] = _mm256_maskload_ps(c + i * ldc, live0);
            acc[i][1] = w1 > 0 ? _mm256_maskload_ps(c + i * ldc + 8, live1) : _mm256_setzero_ps();
        }
    }
    for (int64_t p = 0; p < k; p++) {
        __m256 b0, b1;
        if (full) {
            b0 = fa256_widen(bt, b);
            b1 = fa256_widen(bt, b + 8 * es);
        } else {
            b0 = w >= 8 ? fa256_widen(bt, b) : fa256_widen_n(bt, b, w);
            b1 = w1 > 0 ? fa256_widen_n(bt, b + 8 * es, w1) : _mm256_setzero_ps();
        }
        if (pf) fa_prefetch(b, pf);
        b += ldb * es;
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + i * lda + p);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        if (full) {
            _mm256_storeu_ps(c + i * ldc, acc[i][0]);
            _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
        } else {
            _mm256_maskstore_ps(c + i * ldc, live0, acc[i][0]);
            if (w1 > 0) _mm256_maskstore_ps(c + i * ldc + 8, live1, acc[i][1]);
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

void fa_gemm_rows_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                       flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                       int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_rows_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, accumulate, pf);
}
