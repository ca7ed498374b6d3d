/*
 * AVX-512 C = A . B^T with B given as rows (contract: kernels.h, gemm_nt).
 * Every element is the same computation whatever m, n or its place in C:
 *
 *   16 partial sums:  lane l += a[p] * b[p] for p = l (mod 16), increasing
 *                     p, one FMA per term, from +0
 *   then a fixed tree over the lanes, each level adding lanes W/2 apart:
 *     s = (((x0+x8) + (x4+x12)) + ((x2+x10) + (x6+x14)))
 *       + (((x1+x9) + (x5+x13)) + ((x3+x11) + (x7+x15)))
 *
 * which is gemm_nt_ref's 8-lane tree after folding lane l + 8 into lane l,
 * so results agree with it to rounding (FMA, 16 lanes), not bit for bit.
 *
 * Register tile: mr rows of A x nr rows of B, one zmm accumulator per pair,
 * 16 floats of k per step. 4 x 4 is the shape decode needs (m = a GQA
 * group, typically 4 heads): per step 8 loads for 16 FMAs, so the FMA ports
 * bound it and 16 independent chains cover the FMA latency. Fewer rows
 * take more columns (3 x 4, 2 x 8, 1 x 8) to keep at least 8 chains in
 * flight. Columns past n repeat the last row of B and are not stored, so
 * edge tiles run the same code as full ones.
 *
 * The horizontal sums of all accumulators of a tile are done together,
 * like a transpose: each level pairs two vectors, keeping one's lanes with
 * a blend and bringing the other's partners in with one two-source permute,
 * so 16 dot products cost 15 (blend, permute, add) triples instead of 16
 * separate reductions of 8 instructions each.
 */
#include <immintrin.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/widen_avx512.h"

/* Level v of the tree works on groups of W = 16 >> v lanes, each group one
 * source vector's partial sums. fold(p, q) keeps p's lanes in the lower
 * half of every group and q's in the upper half (the blend), and brings in
 * their partners W/2 lanes away (the permute: lane l of a group takes
 * p[l + W/2] in the lower half, q[l - W/2] in the upper half). The sum
 * then holds, per group of W, p's W/2 new partial sums followed by q's. */
static const int32_t fold_index[4][16] = {
    {8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23},
    {4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27},
    {2, 3, 16, 17, 6, 7, 20, 21, 10, 11, 24, 25, 14, 15, 28, 29},
    {1, 16, 3, 18, 5, 20, 7, 22, 9, 24, 11, 26, 13, 28, 15, 30},
};
static const __mmask16 fold_upper[4] = {0xff00, 0xf0f0, 0xcccc, 0xaaaa};

static inline __attribute__((always_inline)) __m512 fold(__m512 p, __m512 q, int level) {
    const __m512i idx = _mm512_loadu_si512(fold_index[level]);
    return _mm512_add_ps(_mm512_mask_blend_ps(fold_upper[level], p, q),
                         _mm512_permutex2var_ps(p, idx, q));
}

/* The tree over v[0..r) (r a power of two up to 16): pairing v[i] with v[i + r/2] at
 * each level leaves sources in order, so source s ends in lane s * 16 / r.
 * With fewer than 16 sources the last levels fold a vector with itself:
 * the per-element tree is the same, the result is only spread out. */
static inline __attribute__((always_inline)) __m512 reduce(__m512 *v, const int r) {
    int live = r;
#pragma GCC unroll 4
    for (int level = 0; level < 4; level++) {
        const int half = live > 1 ? live / 2 : 1;
#pragma GCC unroll 8
        for (int i = 0; i < half; i++) v[i] = fold(v[i], v[live > 1 ? i + half : i], level);
        live = half;
    }
    return v[0];
}

/* One step of 16 (or, masked, fewer) floats of k for the whole tile.
 * Masked-off lanes load 0 on both sides; adding the exact 0 product leaves
 * the partial sum as it is (it starts at +0 and so is never -0). */
static inline __attribute__((always_inline)) void step(const int mr, const int nr,
                                                       flashattn_dtype bt, __m512 *acc,
                                                       const float *const *ar,
                                                       const char *const *br, int64_t p,
                                                       __mmask16 live, int64_t pf) {
    __m512 av[4];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) av[i] = _mm512_maskz_loadu_ps(live, ar[i] + p);
#pragma GCC unroll 8
    for (int j = 0; j < nr; j++) {
        const __m512 bv = fa512_widen(bt, br[j] + p * fa_dtype_bytes(bt), live);
        /* one prefetch a cache line: a step reads 16 elements, a quarter of a line of int8 */
        if (pf && (p * fa_dtype_bytes(bt)) % 64 == 0) fa_prefetch(br[j] + p * fa_dtype_bytes(bt), pf);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) acc[i * nr + j] = _mm512_fmadd_ps(av[i], bv, acc[i * nr + j]);
    }
}

/* C[mr x nv] for rows a.. of A and rows b.. of B, nv <= nr. mr, nr are
 * literals at every call site, so loops unroll and acc[] stays in zmm. */
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
    __m512 acc[16];
#pragma GCC unroll 16
    for (int s = 0; s < mr * nr; s++) acc[s] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) step(mr, nr, bt, acc, ar, br, p, (__mmask16)0xffff, pf);
    if (p < k) step(mr, nr, bt, acc, ar, br, p, (__mmask16)((1u << (k - p)) - 1u), pf);

    /* Three rows reduce as four (a copy of the third), so that every tile
     * reduces 8 or 16 vectors with the same tree. */
    const int rows = mr == 3 ? 4 : mr;
#pragma GCC unroll 8
    for (int s = mr * nr; s < rows * nr; s++) acc[s] = acc[s - nr];
    const __m512 sums = reduce(acc, rows * nr);
    const int spread = 16 / (rows * nr);
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        unsigned lanes = 0;
        for (int j = 0; j < nv; j++) lanes |= 1u << ((i * nr + j) * spread);
        _mm512_mask_storeu_ps(c + i * ldc, (__mmask16)((1u << nv) - 1u),
                              _mm512_maskz_compress_ps((__mmask16)lanes, sums));
    }
}

#define FA_NT_NR1 8
#define FA_NT_NR2 8
#define FA_NT_NR3 4
#define FA_NT_NR4 4
#define FA_NT_ONE
#include "kernels/gemm_nt_loop.h"

void fa_gemm_nt_avx512(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                       flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    fa_gemm_nt_dispatch(m, n, k, a, lda, b, bt, ldb, c, ldc, pf);
}
