/*
 * The loop around an ISA's gemm_nt register tile (contract: kernels.h),
 * shared by the AVX2 and AVX-512 files, which include it after defining
 *   tile(mr, nr, bt, nv, k, a, lda, b, ldb, c, ldc, pf)   always_inline: C
 *       for mr rows of A and nv <= nr rows of B (b in bytes, ldb in
 *       elements), prefetching pf bytes past the B rows when pf != 0
 *   FA_NT_NR1 .. FA_NT_NR4   rows of B per tile for tiles of 1..4 rows of A
 *   FA_NT_TAIL2 (optional)   tile(mr, 2, ...) exists for every mr: strips
 *                            ending in 2 rows of B use it
 *   FA_NT_ONE (optional)     tile(mr, 1, ...) exists for every mr: a strip
 *                            of one row of B uses it
 * and then define their entry point as one call to fa_gemm_nt_dispatch.
 */
#ifndef FA_GEMM_NT_LOOP_H
#define FA_GEMM_NT_LOOP_H

#include "kernels/kernels.h"

/* Tiles of mr rows side by side over nv <= 8 rows of B. */
static inline __attribute__((always_inline)) void across(const int mr, const int nr,
                                                         flashattn_dtype bt, int nv, int64_t k,
                                                         const float *a, int64_t lda,
                                                         const char *b, int64_t ldb, float *c,
                                                         int64_t ldc, int64_t pf) {
#ifdef FA_NT_ONE
    /* One key (a 1 x 1 call, the last of a length): one chain per row,
     * not nr copies of it. */
    if (nr > 1 && nv == 1) {
        tile(mr, 1, bt, 1, k, a, lda, b, ldb, c, ldc, pf);
        return;
    }
#endif
    for (int j = 0; j < nv; j += nr) {
        const char *bj = b + j * ldb * fa_dtype_bytes(bt);
#ifdef FA_NT_TAIL2
        /* A tile of 3 over a strip of 8 ends in 2 rows: a tile of 2 runs
         * them without a third, repeated row. */
        if (nr > 2 && nv - j == 2) {
            tile(mr, 2, bt, 2, k, a, lda, bj, ldb, c + j, ldc, pf);
            continue;
        }
#endif
        tile(mr, nr, bt, nv - j < nr ? nv - j : nr, k, a, lda, bj, ldb, c + j, ldc, pf);
    }
}

/* Rows of A per pass over B: a pass takes B in strips of 8 rows (4 KiB
 * at k = 128), each used by every row of the pass while it is in L1, and
 * 16 KiB of A rows (a third of a 48 KiB L1d, 32 rows at k = 128) stay
 * in L1 across strips. So B, decode's K rows, is read once per pass, not
 * once per 4 rows of A, and A is not read from L2 once per strip. */
#define FA_NT_A_PASS_BYTES (16 << 10)

static inline __attribute__((always_inline)) void fa_gemm_nt_loop(flashattn_dtype bt, int m,
                                                                  int n, int64_t k,
                                                                  const float *a, int64_t lda,
                                                                  const char *b, int64_t ldb,
                                                                  float *c, int64_t ldc,
                                                                  int64_t pf) {
    const int64_t fit = FA_NT_A_PASS_BYTES / ((k > 0 ? k : 1) * (int64_t)sizeof(float)) / 4 * 4;
    const int pass = fit < 4 ? 4 : fit < m ? (int)fit : m;
    const int64_t es = fa_dtype_bytes(bt);
    for (int i0 = 0; i0 < m; i0 += pass) {
        const int i1 = m - i0 < pass ? m : i0 + pass;
        for (int j = 0; j < n; j += 8) {
            const int nv = n - j < 8 ? n - j : 8;
            const char *bj = b + j * ldb * es;
            /* Passes are whole 4-row tiles, so only the last rows of A
             * fall into a smaller tile. */
            for (int i = i0; i < i1; i += 4) {
                const float *ai = a + i * lda;
                float *ci = c + i * ldc + j;
                switch (i1 - i) {
                case 1: across(1, FA_NT_NR1, bt, nv, k, ai, lda, bj, ldb, ci, ldc, pf); break;
                case 2: across(2, FA_NT_NR2, bt, nv, k, ai, lda, bj, ldb, ci, ldc, pf); break;
                case 3: across(3, FA_NT_NR3, bt, nv, k, ai, lda, bj, ldb, ci, ldc, pf); break;
                default: across(4, FA_NT_NR4, bt, nv, k, ai, lda, bj, ldb, ci, ldc, pf); break;
                }
            }
        }
    }
}

/* One compiled loop per dtype of B. */
static inline __attribute__((always_inline)) void fa_gemm_nt_dispatch(
    int m, int n, int64_t k, const float *a, int64_t lda, const void *b, flashattn_dtype bt,
    int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    switch (bt) {
    case FLASHATTN_F32: fa_gemm_nt_loop(FLASHATTN_F32, m, n, k, a, lda, b, ldb, c, ldc, pf); break;
    case FLASHATTN_F16: fa_gemm_nt_loop(FLASHATTN_F16, m, n, k, a, lda, b, ldb, c, ldc, pf); break;
    case FLASHATTN_BF16: fa_gemm_nt_loop(FLASHATTN_BF16, m, n, k, a, lda, b, ldb, c, ldc, pf); break;
    case FLASHATTN_INT8: fa_gemm_nt_loop(FLASHATTN_INT8, m, n, k, a, lda, b, ldb, c, ldc, pf); break;
    case FLASHATTN_FP8_E4M3: fa_gemm_nt_loop(FLASHATTN_FP8_E4M3, m, n, k, a, lda, b, ldb, c, ldc, pf); break;
    case FLASHATTN_FP8_E5M2: fa_gemm_nt_loop(FLASHATTN_FP8_E5M2, m, n, k, a, lda, b, ldb, c, ldc, pf); break;
    default: break;
    }
}

#endif
