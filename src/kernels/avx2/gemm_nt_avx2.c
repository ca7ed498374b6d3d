/*
 * AVX2 C = A . B^T with B given as rows (contract: kernels.h, gemm_nt).
 * Every element is the same computation whatever m, n or its place in C:
 * gemm_nt_ref's order exactly (lane l sums the terms p = l (mod 8) in
 * increasing p, then ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7))), except
 * that each term is one FMA where the reference multiplies, then adds: so
 * results agree with it to rounding, not bit for bit.
 *
 * Register tile: mr rows of A x nr rows of B, always 8 accumulators (ymm),
 * 8 floats of k per step. 8 independent FMA chains is what the two FMA
 * ports need to hide the 4-cycle latency, and 8 accumulators plus the
 * loaded rows fit the 16 ymm registers: 4 x 2 for decode's GQA groups of
 * 4 (6 loads per 8 FMAs); 3 x 2 (reduced as 4 x 2), 2 x 4 and 1 x 8 for
 * fewer rows. Columns past n repeat the last row of B and are not stored,
 * so edge tiles run the same code as full ones.
 *
 * The 8 horizontal sums of a tile are done together, like a transpose:
 * each level pairs two vectors, keeping one's lanes with a blend and
 * bringing the other's partners in with one permute: 7 such folds for 8
 * dot products, where separate reductions would take 8 instructions each.
 */
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/widen_avx2.h"

/* fold_W(p, q) works on groups of W lanes, each group one source vector's
 * partial sums: it adds partners W/2 apart, leaving per group p's W/2 new
 * partial sums followed by q's. The blend keeps p's lanes in the lower
 * half of every group and q's in the upper half; the permute brings their
 * partners in (it swaps the halves of each group of the opposite blend). */
static inline __m256 fold8(__m256 p, __m256 q) {
    return _mm256_add_ps(_mm256_blend_ps(p, q, 0xf0), _mm256_permute2f128_ps(p, q, 0x21));
}

static inline __m256 fold4(__m256 p, __m256 q) {
    return _mm256_add_ps(_mm256_blend_ps(p, q, 0xcc),
                         _mm256_permute_ps(_mm256_blend_ps(p, q, 0x33), _MM_SHUFFLE(1, 0, 3, 2)));
}

static inline __m256 fold2(__m256 p, __m256 q) {
    return _mm256_add_ps(_mm256_blend_ps(p, q, 0xaa),
                         _mm256_permute_ps(_mm256_blend_ps(p, q, 0x55), _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Pairing v[i] with v[i + half] at each level leaves the sources in
 * order: lane s of the result is the sum of v[s]. */
static inline __m256 reduce8(const __m256 *v) {
    const __m256 w0 = fold8(v[0], v[4]), w1 = fold8(v[1], v[5]), w2 = fold8(v[2], v[6]),
                 w3 = fold8(v[3], v[7]);
    return fold2(fold4(w0, w2), fold4(w1, w3));
}

/* One step of 8 (or, masked, fewer) floats of k for the whole tile. The
 * masked step loads 0 on both sides in the lanes past k; adding the exact
 * 0 product leaves the partial sum as it is (it starts at +0 and so is
 * never -0). */
static inline __attribute__((always_inline)) void step(const int mr, const int nr,
                                                       flashattn_dtype bt, __m256 *acc,
                                                       const float *const *ar,
                                                       const char *const *br, int64_t p,
                                                       int64_t left, int64_t pf) {
    const int masked = left < 8;
    __m256 av[4];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        av[i] = masked ? fa256_widen_n(FLASHATTN_F32, ar[i] + p, left) : _mm256_loadu_ps(ar[i] + p);
#pragma GCC unroll 8
    for (int j = 0; j < nr; j++) {
        const char *bp = br[j] + p * fa_dtype_bytes(bt);
        const __m256 bv = masked ? fa256_widen_n(bt, bp, left) : fa256_widen(bt, bp);
        if (pf) fa_prefetch(bp, pf);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) acc[i * nr + j] = _mm256_fmadd_ps(av[i], bv, acc[i * nr + j]);
    }
}

/* C[mr x nv] for rows a.. of A and rows b.. of B, nv <= nr. mr, nr, bt
 * are literals at every call site, so loops unroll and acc[] stays in ymm. */
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
    __m256 acc[8];
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) acc[s] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) step(mr, nr, bt, acc, ar, br, p, 8, pf);
    if (p < k) step(mr, nr, bt, acc, ar, br, p, k - p, pf);

    /* Three rows reduce as four (a copy of the third): every tile reduces
     * 8 vectors with the same tree. */
#pragma GCC unroll 8
    for (int s = mr * nr; s < 8; s++) acc[s] = acc[s - nr];
    float sums[8];
    _mm256_storeu_ps(sums, reduce8(acc));
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nv; j++) c[i * ldc + j] = sums[i * nr + j];
}

#define FA_NT_NR1 8
#define FA_NT_NR2 4
#define FA_NT_NR3 2
#define FA_NT_NR4 2
#include "kernels/gemm_nt_loop.h"

void fa_gemm_nt_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                     flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_nt_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, pf);
}
