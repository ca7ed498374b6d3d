/*
 * NEON C = A . B^T with B given as rows (contract: kernels.h, gemm_nt).
 * Every element is the same computation whatever m, n or its place in C:
 * gemm_nt_ref's order exactly (partial sum l, l < 8, takes the terms
 * p = l (mod 8) in increasing p, held in two q registers as lanes 0..3
 * and 4..7; then ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7))), except that
 * each term is one FMA where the reference multiplies, then adds: so
 * results agree with it to rounding, not bit for bit.
 *
 * Register tile: mr rows of A x nr rows of B, 8 dot products of two
 * accumulators each (16 of the 32 registers), 8 floats of k per step:
 * 4 x 2 for decode's GQA groups of 4 (12 loads for 16 FMAs, 28
 * registers), 3 x 2, 2 x 4 and 1 x 8 for fewer rows. Columns past n
 * repeat the last row of B and are not stored, so edge tiles run the
 * same code as full ones. A step short of 8 (the end of k) reads its
 * rows through zero-padded copies: the 0 * 0 terms leave a partial sum
 * (never -0: it starts at +0) as it is.
 */
#include <arm_neon.h>

#include "kernels/neon/neon.h"
#include "kernels/neon/widen_neon.h"

/* s[0..3] + s[4..7] lane by lane, then the reference's tree: (v0 + v2) +
 * (v1 + v3). */
static inline float reduce(float32x4_t lo, float32x4_t hi) {
    const float32x4_t v = vaddq_f32(lo, hi);
    const float32x4_t w = vaddq_f32(v, vextq_f32(v, v, 2));
    return vgetq_lane_f32(w, 0) + vgetq_lane_f32(w, 1);
}

/* One step of len (8, or fewer at the end of k) floats of k. */
static inline __attribute__((always_inline)) void step(const int mr, const int nr,
                                                       flashattn_dtype bt, float32x4_t *acc,
                                                       const float *const *ar,
                                                       const char *const *br, int64_t p,
                                                       int64_t len, int64_t pf) {
    const int64_t es = fa_dtype_bytes(bt);
    float32x4_t av[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        if (len == 8) {
            av[i][0] = vld1q_f32(ar[i] + p), av[i][1] = vld1q_f32(ar[i] + p + 4);
        } else {
            av[i][0] = len >= 4 ? vld1q_f32(ar[i] + p) : fa_neon_widen_n(FLASHATTN_F32, ar[i] + p, len);
            av[i][1] = len > 4 ? fa_neon_widen_n(FLASHATTN_F32, ar[i] + p + 4, len - 4) : vdupq_n_f32(0.0f);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nr; j++) {
        const char *bp = br[j] + p * es;
        float32x4_t b0, b1;
        if (len == 8) {
            b0 = fa_neon_widen(bt, bp), b1 = fa_neon_widen(bt, bp + 4 * es);
        } else {
            b0 = len >= 4 ? fa_neon_widen(bt, bp) : fa_neon_widen_n(bt, bp, len);
            b1 = len > 4 ? fa_neon_widen_n(bt, bp + 4 * es, len - 4) : vdupq_n_f32(0.0f);
        }
        if (pf) fa_prefetch(bp, pf);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            acc[2 * (i * nr + j)] = vfmaq_f32(acc[2 * (i * nr + j)], av[i][0], b0);
            acc[2 * (i * nr + j) + 1] = vfmaq_f32(acc[2 * (i * nr + j) + 1], av[i][1], b1);
        }
    }
}

/* C[mr x nv] for rows a.. of A and rows b.. of B, nv <= nr. mr, nr, bt
 * are literals at every call site, so loops unroll and acc[] stays in
 * registers. */
static inline __attribute__((always_inline)) void tile(const int mr, const int nr,
                                                       flashattn_dtype bt, int nv, int64_t k,
                                                       const float *a, int64_t lda,
                                                       const char *b, int64_t ldb, float *c,
                                                       int64_t ldc, int64_t pf) {
    const float *ar[4];
    const char *br[8];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) ar[i] = a + i * lda;
#pragma GCC unroll 8
    for (int j = 0; j < nr; j++) br[j] = b + (j < nv ? j : nv - 1) * ldb * fa_dtype_bytes(bt);
    float32x4_t acc[16];
#pragma GCC unroll 16
    for (int s = 0; s < 2 * mr * nr; s++) acc[s] = vdupq_n_f32(0.0f);
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) step(mr, nr, bt, acc, ar, br, p, 8, pf);
    if (p < k) step(mr, nr, bt, acc, ar, br, p, k - p, pf);
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nr; j++)
            if (j < nv) c[i * ldc + j] = reduce(acc[2 * (i * nr + j)], acc[2 * (i * nr + j) + 1]);
}

#define FA_NT_NR1 8
#define FA_NT_NR2 4
#define FA_NT_NR3 2
#define FA_NT_NR4 2
#include "kernels/gemm_nt_loop.h"

void fa_gemm_nt_neon(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                     flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_nt_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, pf);
}
