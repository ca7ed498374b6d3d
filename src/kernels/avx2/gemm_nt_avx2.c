/*
 * AVX2 C = A . B^T with B given as rows (contract: kernels.h, gemm_nt).
 * Every element is the same computation whatever m, n or its place in C:
 * gemm_nt_ref's order exactly (lane l sums the terms p = l (mod 8) in
 * increasing p, then ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7))), except
 * that each term is one FMA where the reference multiplies, then adds: so
 * results agree with it to rounding, not bit for bit.
 *
 * Register tile: mr rows of A x nr rows of B, 8 floats of k per step, at
 * most 12 accumulators (ymm), A read as the FMAs' memory operand. 8
 * independent FMA chains is the least that hides the 4-cycle latency on
 * two ports, but the loop around a tile (pointers, the reduction, the
 * stores) is paid once per tile, so bigger tiles win: 4 x 3 (12 chains,
 * decode's GQA groups of 4), 3 x 4 and 2 x 4 for fewer rows, 1 x 8
 * (docs/performance.md has the measurements against 4 x 2).
 * Columns past n repeat the last row of B and are not stored, so edge
 * tiles run the same code as full ones.
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
 * never -0). A full step reads A inside the FMAs: with 12 accumulators
 * there are no registers left to hold A's rows. */
static inline __attribute__((always_inline)) void step(const int mr, const int nr,
                                                       flashattn_dtype bt, __m256 *acc,
                                                       const float *const *ar,
                                                       const char *const *br, int64_t p,
                                                       int64_t left) {
    const int masked = left < 8;
    __m256 av[4];
    if (masked)
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) av[i] = fa256_widen_n(FLASHATTN_F32, ar[i] + p, left);
#pragma GCC unroll 8
    for (int j = 0; j < nr; j++) {
        const char *bp = br[j] + p * fa_dtype_bytes(bt);
        const __m256 bv = masked ? fa256_widen_n(bt, bp, left) : fa256_widen(bt, bp);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++)
            acc[i * nr + j] = _mm256_fmadd_ps(masked ? av[i] : _mm256_loadu_ps(ar[i] + p), bv,
                                              acc[i * nr + j]);
    }
}

/* The 4 sums of v[0..3] in lanes 0, 2, 4, 6, by reduce8's tree. */
static inline __m256 reduce4(const __m256 *v) {
    const __m256 z = fold4(fold8(v[0], v[2]), fold8(v[1], v[3]));
    return fold2(z, z);
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
    __m256 acc[12];
#pragma GCC unroll 12
    for (int s = 0; s < mr * nr; s++) acc[s] = _mm256_setzero_ps();
    /* With pf, one prefetch a cache line of each B row, then the steps
     * that read that line: a test of pf inside the steps' loop slowed the
     * whole tile (docs/performance.md). */
    const int line = 64 / (8 * (int)fa_dtype_bytes(bt)); /* steps a line */
    int64_t p = 0;
    if (pf)
        for (; p + 8 * line <= k; p += 8 * line) {
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) fa_prefetch(br[j] + p * fa_dtype_bytes(bt), pf);
#pragma GCC unroll 8
            for (int u = 0; u < line; u++) step(mr, nr, bt, acc, ar, br, p + 8 * u, 8);
        }
    for (; p + 8 <= k; p += 8) step(mr, nr, bt, acc, ar, br, p, 8);
    if (p < k) step(mr, nr, bt, acc, ar, br, p, k - p);

    /* Fewer than 8 accumulators reduce as 8 (copies): every sum goes
     * through the same tree. */
#pragma GCC unroll 8
    for (int s = mr * nr; s < 8; s++) acc[s] = acc[s - nr];
    float sums[16];
    _mm256_storeu_ps(sums, reduce8(acc));
    if (mr * nr == 12) {
        const __m256 r = reduce4(acc + 8);
        const __m128 lo = _mm256_castps256_ps128(r), hi = _mm256_extractf128_ps(r, 1);
        _mm_storeu_ps(sums + 8, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    }
    if (nv == nr) {
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
            for (int j = 0; j < nr; j++) c[i * ldc + j] = sums[i * nr + j];
    } else {
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < nv; j++) c[i * ldc + j] = sums[i * nr + j];
    }
}

#define FA_NT_NR1 8
#define FA_NT_NR2 4
#define FA_NT_NR3 4
#define FA_NT_NR4 3
#define FA_NT_TAIL2
#include "kernels/gemm_nt_loop.h"

void fa_gemm_nt_avx2(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                     flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_nt_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, pf);
}
