/*
 * Every SIMD kernel table this CPU can run against the portable kernels
 * (kernels/ref), which define the contract of kernels.h.
 *
 * Pass rules: gemm, row_max, scale, load and store bit-identical to the
 * reference (whole buffers compared, so writes outside the tile or row
 * fail too). gemm_nt: within the bound on two summation orders of the
 * same dot product, each element bit-identical to the same row pair
 * computed alone (the position rule of kernels.h), nothing outside the
 * tile written. exp2_sum: each element within 4 ulp of exp2 of the float
 * difference x - m evaluated in double, exactly +0 for -inf and for
 * differences below -150; the sum within (n + 8) ulp of the exact sum of
 * the exact terms (any summation order of n non-negative terms is within
 * (n - 1) ulp; 8 more covers the terms' own 4 ulp).
 * Sweeps follow XNNPACK's testers: every m up to MR, every n up to NR, k
 * below, at and above the usual blocks, odd strides, misaligned pointers;
 * a failure prints the table, the kernel and the shape.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/quant.h"
#include "dispatch/isa.h"
#include "kernels/ref/ref.h"
#ifdef FA_HAVE_AVX2
#include "kernels/avx2/avx2.h"
#endif
#ifdef FA_HAVE_AVX512
#include "kernels/avx512/avx512.h"
#endif
#if defined(FA_HAVE_AMX) || defined(FA_TEST_BF16_EMULATED)
#include "kernels/amx/amx.h"
#endif
#include "testutil.h"

/* Random float of either sign over a wide range of magnitudes, with some
 * signed zeros (0 * x and 0 + -0 are where sign rules show). */
static float rand_float(uint64_t *rng) {
    uint64_t r = tt_rand_u64(rng);
    if (r % 23 == 0) return (r >> 8) & 1 ? -0.0f : 0.0f;
    return (float)ldexp(tt_rand_normal(rng), (int)((r >> 16) % 17) - 8);
}

static float *alloc_floats(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

static int64_t first_diff(const void *x, const void *y, int64_t n, size_t elem) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)x + i * elem, (const char *)y + i * elem, elem)) return i;
    return -1;
}

/* ---- gemm ------------------------------------------------------------- */

/* The reference over a bigger tile, in reference-sized pieces: each C
 * element is its own FMA chain, so the pieces give the same bits. */
static void gemm_ref_tiled(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                           int64_t ldb, float *c, int64_t ldc, int acc) {
    for (int i = 0; i < m; i += FA_REF_MR)
        for (int j = 0; j < n; j += FA_REF_NR)
            fa_gemm_block_ref(m - i < FA_REF_MR ? m - i : FA_REF_MR, n - j < FA_REF_NR ? n - j : FA_REF_NR,
                        k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, acc);
}

static void gemm_case(const fa_kernels *kn, int m, int n, int64_t k, int odd, int acc, int mis,
                      uint64_t *rng) {
    const int64_t lda = (k > 0 ? k : 1) + (odd ? 3 : 0), ldb = n + (odd ? 5 : 0),
                  ldc = n + (odd ? 7 : 0);
    /* Exact sizes plus the misalignment, so ASan sees any read past A or B. */
    const int64_t na = (m - 1) * lda + k, nb = k > 0 ? (k - 1) * ldb + n : 0;
    const int64_t nc = m * ldc + 16; /* a guard row past the tile */
    float *abuf = alloc_floats(na + mis), *bbuf = alloc_floats(nb + mis);
    float *cbuf = alloc_floats(nc + mis), *rbuf = alloc_floats(nc + mis);
    float *a = abuf + mis, *b = bbuf + mis, *c = cbuf + mis, *r = rbuf + mis;
    for (int64_t i = 0; i < na; i++) a[i] = rand_float(rng);
    for (int64_t i = 0; i < nb; i++) b[i] = rand_float(rng);
    /* NaN garbage everywhere: with accumulate = 0 a kernel that reads C
     * turns the tile into NaNs; outside the tile it must stay as is. */
    for (int64_t i = 0; i < nc; i++) c[i] = fa_bits_f32(0x7fc00000u | (uint32_t)(tt_rand_u64(rng) & 0x3fffff));
    if (acc)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[i * ldc + j] = rand_float(rng);
    memcpy(r, c, (size_t)nc * sizeof(float));

    gemm_ref_tiled(m, n, k, a, lda, b, ldb, r, ldc, acc);
    kn->gemm(m, n, k, a, lda, b, ldb, c, ldc, acc);

    int64_t d = first_diff(c, r, nc, sizeof(float));
    TT_CHECK(d < 0,
             "[%s] gemm m=%d n=%d k=%lld lda=%lld ldb=%lld ldc=%lld accumulate=%d misaligned=%d: "
             "C[%lld][%lld] = %a (0x%08x), reference %a (0x%08x)",
             kn->isa, m, n, (long long)k, (long long)lda, (long long)ldb, (long long)ldc, acc,
             mis, (long long)(d / ldc), (long long)(d % ldc), d < 0 ? 0.0 : c[d],
             d < 0 ? 0u : fa_f32_bits(c[d]), d < 0 ? 0.0 : r[d], d < 0 ? 0u : fa_f32_bits(r[d]));
    free(abuf);
    free(bbuf);
    free(cbuf);
    free(rbuf);
}

static void test_gemm(const fa_kernels *kn, uint64_t *rng) {
    static const int64_t ks[] = {0, 1, 2, 3, 7, 16, 17, 64, 255, 256};
    TT_CHECK(kn->mr >= 1 && kn->mr <= FA_MAX_MR, "[%s] MR %d: must be 1..%d", kn->isa, kn->mr, FA_MAX_MR);
    TT_CHECK(kn->mr >= 1 && kn->nr >= FA_COL_ALIGN && kn->nr % FA_COL_ALIGN == 0,
             "[%s] tile %d x %d: NR must be a positive multiple of %d", kn->isa, kn->mr, kn->nr,
             FA_COL_ALIGN);
    for (int m = 1; m <= kn->mr; m++)
        for (int n = 0; n <= kn->nr; n += FA_COL_ALIGN)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                for (int odd = 0; odd < 2; odd++)
                    for (int acc = 0; acc < 2; acc++)
                        for (int mis = 0; mis < 2; mis++) gemm_case(kn, m, n, ks[ki], odd, acc, mis, rng);
}

/* ---- gemm_nt ---------------------------------------------------------- */

/* Any summation tree in which no term meets more than d roundings is
 * within d * 2^-24 * sum |a_p b_p| of the exact dot product (to first
 * order; the bound adds one unit for the second). The reference's terms
 * meet at most 1 + ceil(k/8) + 3 (product, its lane's chain, the tree),
 * an FMA kernel's at most ceil(k/L) + log2(L) with L = 8 or 16 lanes: so
 * the two differ by at most 2 ceil(k/8) + 8 units, plus 1. */
static double gemm_nt_units(int64_t k) { return 2.0 * (double)((k + 7) / 8) + 9.0; }

static void gemm_nt_case(const fa_kernels *kn, int m, int n, int64_t k, int odd, int mis,
                         uint64_t *rng) {
    const int64_t lda = k + (odd ? 3 : 0), ldb = k + (odd ? 5 : 0),
                  ldc = (n > 0 ? n : 1) + (odd ? 7 : 0);
    /* Exact sizes plus the misalignment, so ASan sees any read past the
     * last row of A or B. */
    const int64_t na = m > 0 ? (m - 1) * lda + k : 0, nb = n > 0 ? (n - 1) * ldb + k : 0;
    const int64_t nc = m * ldc + 16; /* a guard row past C */
    float *abuf = alloc_floats(na + mis), *bbuf = alloc_floats(nb + mis);
    float *cbuf = alloc_floats(nc + mis), *rbuf = alloc_floats(nc + mis);
    float *a = abuf + mis, *b = bbuf + mis, *c = cbuf + mis, *r = rbuf + mis;
    for (int64_t i = 0; i < na; i++) a[i] = rand_float(rng);
    for (int64_t i = 0; i < nb; i++) b[i] = rand_float(rng);
    /* NaN garbage: a kernel that reads C turns elements into NaNs; outside
     * the m x n tile it must stay as is. */
    for (int64_t i = 0; i < nc; i++) c[i] = fa_bits_f32(0x7fc00000u | (uint32_t)(tt_rand_u64(rng) & 0x3fffff));
    memcpy(r, c, (size_t)nc * sizeof(float));

    fa_gemm_nt_ref(m, n, k, a, lda, b, FLASHATTN_F32, ldb, r, ldc, 0);
    kn->gemm_nt(m, n, k, a, lda, b, FLASHATTN_F32, ldb, c, ldc, 0);

    int64_t outside = -1;
    for (int64_t e = 0; e < nc && outside < 0; e++)
        if (!(e / ldc < m && e % ldc < n) && fa_f32_bits(c[e]) != fa_f32_bits(r[e])) outside = e;
    TT_CHECK(outside < 0, "[%s] gemm_nt m=%d n=%d k=%lld lda=%lld ldb=%lld ldc=%lld misaligned=%d: "
             "wrote C[%lld][%lld] outside the tile", kn->isa, m, n, (long long)k, (long long)lda,
             (long long)ldb, (long long)ldc, mis, (long long)(outside / ldc), (long long)(outside % ldc));

    double worst = 0.0;
    int wi = 0, wj = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double mag = 0.0;
            for (int64_t p = 0; p < k; p++) mag += fabs((double)a[i * lda + p] * b[j * ldb + p]);
            const double err = fabs((double)c[i * ldc + j] - r[i * ldc + j]);
            const double units = err == 0.0 ? 0.0 : mag > 0.0 ? err / (mag * 0x1p-24) : INFINITY;
            if (!(units <= worst)) worst = units, wi = i, wj = j; /* NaN counts as worst */
        }
    TT_CHECK(worst <= gemm_nt_units(k), "[%s] gemm_nt m=%d n=%d k=%lld lda=%lld ldb=%lld ldc=%lld misaligned=%d: "
             "C[%d][%d] = %a, reference %a: %.3g units of 2^-24 sum|ab|, bound %.0f", kn->isa, m, n,
             (long long)k, (long long)lda, (long long)ldb, (long long)ldc, mis, wi, wj,
             m && n ? c[wi * ldc + wj] : 0.0, m && n ? r[wi * ldc + wj] : 0.0, worst, gemm_nt_units(k));

    /* The position rule, bit for bit: each element computed alone (the
     * smallest tile, at the origin of C) equals it inside this call. */
    int diff = 0, di = 0, dj = 0;
    float one = 0.0f;
    for (int i = 0; i < m && !diff; i++)
        for (int j = 0; j < n && !diff; j++) {
            kn->gemm_nt(1, 1, k, a + i * lda, lda, b + j * ldb, FLASHATTN_F32, ldb, &one, 1, 4096);
            if (fa_f32_bits(one) != fa_f32_bits(c[i * ldc + j])) diff = 1, di = i, dj = j;
        }
    TT_CHECK(!diff, "[%s] gemm_nt m=%d n=%d k=%lld lda=%lld ldb=%lld ldc=%lld misaligned=%d: "
             "C[%d][%d] = %a, alone %a", kn->isa, m, n, (long long)k, (long long)lda,
             (long long)ldb, (long long)ldc, mis, di, dj, diff ? c[di * ldc + dj] : 0.0, one);
    free(abuf);
    free(bbuf);
    free(cbuf);
    free(rbuf);
}

/* Every m up to two 4-row tiles and one more, every n up to five 8-column
 * tiles, k around each multiple of 8 and 16 up to 256. Padded strides
 * and misalignment take their four combinations in turn, so every m, every
 * n and every k meets each of them. Then shapes with more rows than a
 * kernel takes in one pass over B (16 KiB of A rows: 16 at k = 256). */
static void test_gemm_nt(const fa_kernels *kn, uint64_t *rng) {
    static const int64_t ks[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 64, 127, 128, 255, 256};
    static const int big[][3] = {{37, 19, 256}, {70, 9, 128}, {13, 33, 1000}, {130, 64, 128}, {33, 8, 4097}};
    int turn = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (int m = 0; m <= 9; m++)
            for (int n = 0; n <= 40; n++, turn++) gemm_nt_case(kn, m, n, ks[ki], turn & 1, turn >> 1 & 1, rng);
    for (size_t s = 0; s < sizeof big / sizeof big[0]; s++)
        gemm_nt_case(kn, big[s][0], big[s][1], big[s][2], 1, 1, rng);
}

/* ---- rows --------------------------------------------------------------- */

static const int64_t long_rows[] = {255, 256, 1000, 4099};

/* Calls f(kn, x, n, rng) for n = 0..70 and a few long rows, at
 * misalignments of 0..3 floats, with 8 guard floats each side. */
static void for_rows(const fa_kernels *kn, uint64_t *rng,
                     void (*f)(const fa_kernels *, float *, int64_t, int, uint64_t *)) {
    for (int64_t li = -71; li < (int64_t)(sizeof long_rows / sizeof long_rows[0]); li++) {
        const int64_t n = li < 0 ? li + 71 : long_rows[li];
        for (int mis = 0; mis < 4; mis++) {
            float *buf = alloc_floats(n + 16 + mis);
            f(kn, buf + 8 + mis, n, mis, rng);
            free(buf);
        }
    }
}

static int guards_ok(const float *x, int64_t n) {
    for (int i = 1; i <= 8; i++)
        if (fa_f32_bits(x[-i]) != 0x7fa5a5a5u || fa_f32_bits(x[n + i - 1]) != 0x7fa5a5a5u) return 0;
    return 1;
}

static void set_guards(float *x, int64_t n) {
    for (int i = 1; i <= 8; i++) x[-i] = x[n + i - 1] = fa_bits_f32(0x7fa5a5a5u);
}

static void row_max_case(const fa_kernels *kn, float *x, int64_t n, int mis, uint64_t *rng) {
    /* 0 random, 1 some -inf, 2 all -inf, 3 max is a signed zero (the
     * reference returns the first zero), 4 some NaNs (may be skipped or
     * propagated: the result is the reference's or NaN). */
    for (int kind = 0; kind < 5; kind++) {
        set_guards(x, n);
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = tt_rand_u64(rng);
            float v = rand_float(rng);
            if (kind == 1 && r % 4 == 0) v = -INFINITY;
            if (kind == 2) v = -INFINITY;
            if (kind == 3) v = r % 5 == 0 ? ((r >> 8) & 1 ? -0.0f : 0.0f) : -fabsf(v) - 1.0f;
            if (kind == 4 && r % 6 == 0) v = fa_bits_f32(0x7fc00000u | (uint32_t)(r >> 40));
            x[i] = v;
        }
        const float got = kn->row_max(x, n), want = fa_row_max_ref(x, n);
        const int ok = fa_f32_bits(got) == fa_f32_bits(want) || (kind == 4 && isnan(got));
        TT_CHECK(ok && guards_ok(x, n), "[%s] row_max n=%lld misaligned=%d kind=%d: %a (0x%08x), reference %a (0x%08x)%s",
                 kn->isa, (long long)n, mis, kind, got, fa_f32_bits(got), want, fa_f32_bits(want),
                 guards_ok(x, n) ? "" : ", wrote outside the row");
    }
}

static void scale_case(const fa_kernels *kn, float *x, int64_t n, int mis, uint64_t *rng) {
    static const float as[] = {0.5f, 1.0f / 3.0f, -2.5f, 0.0f, 1e-30f};
    float *ref = alloc_floats(n);
    for (size_t ai = 0; ai < sizeof as / sizeof as[0]; ai++) {
        set_guards(x, n);
        for (int64_t i = 0; i < n; i++) ref[i] = x[i] = rand_float(rng);
        fa_scale_ref(ref, n, as[ai]);
        kn->scale(x, n, as[ai]);
        int64_t d = first_diff(x, ref, n, sizeof(float));
        TT_CHECK(d < 0 && guards_ok(x, n), "[%s] scale n=%lld misaligned=%d a=%a: x[%lld] = %a, reference %a%s",
                 kn->isa, (long long)n, mis, as[ai], (long long)d, d < 0 ? 0.0 : x[d],
                 d < 0 ? 0.0 : ref[d], guards_ok(x, n) ? "" : ", wrote outside the row");
    }
    free(ref);
}

/* scale_cols over rows of n with ld - n untouched floats between them:
 * the whole buffer bit for bit against the portable kernel, so a write
 * between rows or past the block fails too. x holds signed zeros, NaNs and
 * infinities, s NaN, infinite and zero scales (skip_zero must turn every
 * zero weight into +0 whatever its scale). */
static void test_scale_cols(const fa_kernels *kn, uint64_t *rng) {
    static const int rows_list[] = {0, 1, 3, 4, 8};
    static const int64_t long_n[] = {127, 128, 129, 256};
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
        for (int64_t li = -71; li < (int64_t)(sizeof long_n / sizeof long_n[0]); li++)
            for (int pad = 0; pad < 3; pad++)
                for (int skip = 0; skip < 2; skip++) {
                    const int rows = rows_list[ri];
                    const int64_t n = li < 0 ? li + 71 : long_n[li], ld = n + (int64_t)pad * 5, mis = pad;
                    const int64_t total = rows ? (rows - 1) * ld + n : 0;
                    float *buf = alloc_floats(total + 16 + mis), *ref = alloc_floats(total + 16 + mis);
                    float *sb = alloc_floats(n + 1 + mis);
                    float *x = buf + 8 + mis, *y = ref + 8 + mis, *sc = sb + mis;
                    set_guards(x, total);
                    for (int64_t i = 0; i < total; i++) {
                        const uint64_t r = tt_rand_u64(rng);
                        float v = r % 5 == 0 ? ((r >> 8) & 1 ? -0.0f : 0.0f) : rand_float(rng);
                        if (r % 37 == 1) v = NAN;
                        if (r % 41 == 2) v = (r >> 9) & 1 ? INFINITY : -INFINITY;
                        x[i] = v;
                    }
                    for (int64_t c = 0; c < n; c++) {
                        const uint64_t r = tt_rand_u64(rng);
                        sc[c] = r % 11 == 0 ? NAN : r % 13 == 0 ? INFINITY : r % 17 == 0 ? 0.0f : rand_float(rng);
                    }
                    memcpy(ref, buf, (size_t)(total + 16 + mis) * sizeof(float));
                    kn->scale_cols(x, ld, rows, n, sc, skip);
                    fa_scale_cols_ref(y, ld, rows, n, sc, skip);
                    const int64_t d = first_diff(buf, ref, total + 16 + mis, sizeof(float));
                    TT_CHECK(d < 0, "[%s] scale_cols rows=%d n=%lld ld=%lld skip_zero=%d: float %lld of the buffer "
                             "is 0x%08x, reference 0x%08x", kn->isa, rows, (long long)n, (long long)ld, skip,
                             (long long)(d - 8 - mis), d < 0 ? 0u : fa_f32_bits(buf[d]), d < 0 ? 0u : fa_f32_bits(ref[d]));
                    free(buf), free(ref), free(sb);
                }
}

/* Checks y[i] against exp2 of t[i] = x[i] - m, returns a description of
 * the first violation or NULL. */
static const char *exp2_violation(const float *t, const float *y, int64_t n, int64_t *where) {
    for (int64_t i = 0; i < n; i++) {
        *where = i;
        if (t[i] < -150.0f) {
            if (fa_f32_bits(y[i]) != 0u) return "not exactly +0 below -150 (or -inf)";
            continue;
        }
        const double e = exp2((double)t[i]);
        int ex = ilogb(e);
        const double ulp = ldexp(1.0, (ex < -126 ? -126 : ex) - 23);
        if (!(fabs((double)y[i] - e) <= 4.0 * ulp)) return "more than 4 ulp from exp2";
    }
    return NULL;
}

static void exp2_sum_case(const fa_kernels *kn, float *x, int64_t n, int mis, uint64_t *rng) {
    /* 0: scores ~ 200 +- 30, whose exp2 overflows unless the max is
     * subtracted; 1: the same with m above every x (an older row max);
     * 2: -inf entries and values 126.5, 140 and 200 below the max
     * (subnormal results, underflow to 0). */
    float *t = alloc_floats(n);
    for (int kind = 0; kind < 3; kind++) {
        set_guards(x, n);
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)(200.0 + 30.0 * tt_rand_normal(rng));
            uint64_t r = tt_rand_u64(rng);
            if (kind == 2 && r % 5 == 0) x[i] = -INFINITY;
        }
        float m = fa_row_max_ref(x, n);
        if (kind == 1 || m == -INFINITY) m = (m == -INFINITY ? 0.0f : m) + 37.25f;
        if (kind == 2)
            for (int64_t i = 1; i < n; i += 7) x[i] = m - (i % 3 == 0 ? 126.5f : i % 3 == 1 ? 140.0f : 200.0f);
        double exact = 0.0;
        for (int64_t i = 0; i < n; i++) {
            t[i] = x[i] - m;
            exact += exp2((double)t[i]);
        }
        const float s = kn->exp2_sum(x, n, m);
        int64_t at = 0;
        const char *bad = exp2_violation(t, x, n, &at);
        TT_CHECK(!bad && guards_ok(x, n), "[%s] exp2_sum n=%lld misaligned=%d kind=%d: element %lld: x - m = %a gives %a: %s",
                 kn->isa, (long long)n, mis, kind, (long long)at, n ? t[at] : 0.0, n ? x[at] : 0.0,
                 bad ? bad : "wrote outside the row");
        const double bound = (double)(n + 8) * 0x1p-24 * exact + (double)n * 0x1p-147;
        TT_CHECK(fabs(s - exact) <= bound, "[%s] exp2_sum n=%lld misaligned=%d kind=%d: sum %.9g, exact %.9g, bound %.3g",
                 kn->isa, (long long)n, mis, kind, s, exact, bound);
    }
    free(t);
}

/* The grain rule of exp2_sum (kernels.h): trailing -inf elements past a
 * multiple of FA_EXP2_SUM_GRAIN, and a multiple of it of leading ones,
 * change neither the sum nor the kept elements, bit for bit, and become +0. Every table, the portable one
 * included: the forward leaves masked columns out on all of them. */
static void test_exp2_sum_grain(const fa_kernels *kn, uint64_t *rng) {
    const int64_t maxn = 8 * FA_EXP2_SUM_GRAIN + 200;
    float *x = alloc_floats(maxn + 1), *y = alloc_floats(maxn + 1);
    for (int64_t keep = 0; keep <= 8 * FA_EXP2_SUM_GRAIN; keep += FA_EXP2_SUM_GRAIN)
        for (int64_t extra = 0; extra <= 200; extra += extra < 70 ? 1 : 13)
            for (int off = 0; off < 2; off++) {
                const int64_t n = keep + extra;
                float *xs = x + off, *ys = y + off;
                for (int64_t i = 0; i < keep; i++) {
                    xs[i] = (float)(30.0 * tt_rand_normal(rng));
                    if (tt_rand_u64(rng) % 9 == 0) xs[i] = -INFINITY;
                }
                for (int64_t i = keep; i < n; i++) xs[i] = -INFINITY;
                const float m = keep ? fa_row_max_ref(xs, keep) : 0.0f;
                const float mm = m == -INFINITY ? 0.0f : m;
                memcpy(ys, xs, (size_t)keep * sizeof(float));
                const float s_all = kn->exp2_sum(xs, n, mm), s_kept = kn->exp2_sum(ys, keep, mm);
                int64_t bad = first_diff(xs, ys, keep, sizeof(float));
                for (int64_t i = keep; i < n && bad < 0; i++)
                    if (fa_f32_bits(xs[i]) != 0u) bad = i;
                TT_CHECK(fa_f32_bits(s_all) == fa_f32_bits(s_kept) && bad < 0,
                         "[%s] exp2_sum grain: n=%lld against its first %lld (then -inf), offset %d: "
                         "sums %a and %a, first differing element %lld",
                         kn->isa, (long long)n, (long long)keep, off, s_all, s_kept, (long long)bad);
            }
    /* and leading ones: a multiple of the grain of -inf before the row */
    for (int64_t lead = FA_EXP2_SUM_GRAIN; lead <= 4 * FA_EXP2_SUM_GRAIN; lead += FA_EXP2_SUM_GRAIN)
        for (int64_t n = 0; n <= 200; n += n < 70 ? 1 : 13)
            for (int off = 0; off < 2; off++) {
                float *xs = x + off, *ys = y + off;
                for (int64_t i = 0; i < lead; i++) xs[i] = -INFINITY;
                for (int64_t i = 0; i < n; i++) {
                    xs[lead + i] = (float)(30.0 * tt_rand_normal(rng));
                    if (tt_rand_u64(rng) % 9 == 0) xs[lead + i] = -INFINITY;
                }
                const float m = n ? fa_row_max_ref(xs + lead, n) : 0.0f;
                const float mm = m == -INFINITY ? 0.0f : m;
                memcpy(ys, xs + lead, (size_t)n * sizeof(float));
                const float s_all = kn->exp2_sum(xs, lead + n, mm), s_body = kn->exp2_sum(ys, n, mm);
                int64_t bad = first_diff(xs + lead, ys, n, sizeof(float));
                for (int64_t i = 0; i < lead && bad < 0; i++)
                    if (fa_f32_bits(xs[i]) != 0u) bad = i;
                TT_CHECK(fa_f32_bits(s_all) == fa_f32_bits(s_body) && bad < 0,
                         "[%s] exp2_sum grain: %lld leading -inf then %lld, offset %d: sums %a and %a, "
                         "first differing element %lld",
                         kn->isa, (long long)lead, (long long)n, off, s_all, s_body, (long long)bad);
            }
    free(x);
    free(y);
}

/* exp2 over 2^20 floats spread evenly over the bit patterns of [-160, 0]:
 * every binade, the subnormal range and the underflow edge. */
static void test_exp2_dense(const fa_kernels *kn) {
    const uint32_t lo = 0x80000000u, hi = 0xc3200000u; /* -0 .. -160 */
    const int64_t n = 1 << 20;
    float *x = alloc_floats(n), *t = alloc_floats(n);
    for (int64_t i = 0; i < n; i++) t[i] = x[i] = fa_bits_f32(lo + (uint32_t)((uint64_t)(hi - lo) * i / (n - 1)));
    kn->exp2_sum(x, n, 0.0f);
    int64_t at = 0;
    const char *bad = exp2_violation(t, x, n, &at);
    TT_CHECK(!bad, "[%s] exp2 dense sweep: t = %a gives %a: %s", kn->isa, t[at], x[at], bad ? bad : "");
    free(x);
    free(t);
}

/* Each element's exp2 is a function of that element alone: a row of one
 * value t, and the same row with a -inf in each 16-float step, give t's
 * lanes the same bits. (AVX2 takes a shorter form for steps whose results
 * are all normal and the two-factor form for the others: they must agree
 * bit for bit, on both sides of the edge at -125 too.) */
static int hole(int i) { return i % 16 == 3 + 6 * (i / 16); } /* lanes 3, 25, 47 */

static void test_exp2_elementwise(const fa_kernels *kn) {
    enum { N = 48 };
    const uint32_t lo = 0x80000000u, hi = 0xc3060000u; /* -0 .. -134 */
    const int cases = 4096;
    for (int c = 0; c < cases + 6; c++) {
        static const float edge[6] = {-125.0f, -124.99999f, -125.00001f, -124.5f, -125.5f, -126.0f};
        const float t = c < cases ? fa_bits_f32(lo + (uint32_t)((uint64_t)(hi - lo) * c / (cases - 1))) : edge[c - cases];
        float a[N], b[N];
        for (int i = 0; i < N; i++) a[i] = t, b[i] = hole(i) ? -INFINITY : t;
        kn->exp2_sum(a, N, 0.0f);
        kn->exp2_sum(b, N, 0.0f);
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (!hole(i) && fa_f32_bits(a[i]) != fa_f32_bits(b[i])) bad = i;
        TT_CHECK(bad < 0, "[%s] exp2_sum: t = %a gives %a alone, %a beside a -inf (lane %d)", kn->isa, t,
                 bad < 0 ? 0.0 : a[bad], bad < 0 ? 0.0 : b[bad], bad);
    }
}

/* A NaN score (a NaN in the caller's Q or K) is outside exp2_sum's
 * contract, but every table turns it into NaN, as the portable exp2f
 * does, so that it reaches the row's sum and O on every path instead of
 * being dropped as a zero on some. Each position of a row of 37 (every
 * lane of the vector loops and of the masked tail) in turn. */
static void test_exp2_nan(const fa_kernels *kn) {
    enum { N = 37 };
    for (int at = 0; at < N; at++) {
        float x[N];
        for (int i = 0; i < N; i++) x[i] = i == 5 ? -INFINITY : -(float)i / 4;
        x[at] = NAN;
        const float s = kn->exp2_sum(x, N, 0.0f);
        TT_CHECK(isnan(x[at]) && isnan(s), "[%s] exp2_sum: a NaN at %d gave %a (sum %a)", kn->isa, at,
                 x[at], s);
    }
}

/* ---- conversions ------------------------------------------------------- */

static const float muls[] = {1.0f, 0.125f, 0.08838834764831845f, -3.0f, 0.12751743f};
static const char *const dt_names[] = {"f32", "f16", "bf16", "int8", "fp8_e4m3", "fp8_e5m2"};

static size_t dt_size(flashattn_dtype dt) { return flashattn_dtype_size(dt); }

static void load_case(const fa_kernels *kn, flashattn_dtype dt, const void *src, int64_t n,
                      float mul, const char *what) {
    float *got = alloc_floats(n + 8), *want = alloc_floats(n + 8);
    for (int64_t i = 0; i < n + 8; i++) got[i] = want[i] = fa_bits_f32(0x7fa5a5a5u);
    fa_load_ref(want, src, dt, n, mul);
    kn->load(got, src, dt, n, mul);
    int64_t d = first_diff(got, want, n + 8, sizeof(float));
    uint32_t in = 0;
    if (d >= 0 && d < n) memcpy(&in, (const char *)src + d * dt_size(dt), dt_size(dt));
    TT_CHECK(d < 0, "[%s] load %s %s n=%lld mul=%a: element %lld (input 0x%x) = 0x%08x, reference 0x%08x",
             kn->isa, dt_names[dt], what, (long long)n, mul, (long long)d, in,
             d < 0 ? 0u : fa_f32_bits(got[d]), d < 0 ? 0u : fa_f32_bits(want[d]));
    free(got);
    free(want);
}

/* store, and store_stream (the same bytes), into a 64-byte aligned buffer
 * at element offset off: guard elements on both sides must stay as they
 * were. */
static void store_case_at(const fa_kernels *kn, flashattn_dtype dt, const float *src, int64_t n,
                          float mul, int off, const char *what) {
    const size_t es = dt_size(dt), bytes = ((size_t)(n + off + 8) * es + 63) / 64 * 64;
    unsigned char *got = aligned_alloc(64, bytes), *want = aligned_alloc(64, bytes);
    memset(want, 0xa5, bytes);
    fa_store_ref(want + off * es, dt, src, n, mul);
    for (int stream = 0; stream < 2; stream++) {
        memset(got, 0xa5, bytes);
        (stream ? kn->store_stream : kn->store)(got + off * es, dt, src, n, mul);
        if (stream) kn->store_fence();
        int64_t d = first_diff(got, want, n + off + 8, es);
        uint32_t g = 0, w = 0;
        if (d >= 0) memcpy(&g, got + d * es, es), memcpy(&w, want + d * es, es);
        d -= off; /* element of the row; negative: a guard before it */
        TT_CHECK(d < -off, "[%s] %s %s %s n=%lld mul=%a at +%d: element %lld (input 0x%08x) = 0x%x, reference 0x%x",
                 kn->isa, stream ? "store_stream" : "store", dt_names[dt], what, (long long)n, mul,
                 off, (long long)d, d >= 0 && d < n ? fa_f32_bits(src[d]) : 0u, g, w);
    }
    free(got);
    free(want);
}

static void store_case(const fa_kernels *kn, flashattn_dtype dt, const float *src, int64_t n,
                       float mul, const char *what) {
    store_case_at(kn, dt, src, n, mul, 0, what);
}

static void test_convert(const fa_kernels *kn, uint64_t *rng) {
    /* Loads: every 16-bit pattern; random floats with specials for f32. */
    uint16_t *h = malloc(65536 * sizeof(uint16_t) + 8);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    const int64_t nf = 1 << 16;
    float *f = alloc_floats(nf + 8);
    for (int64_t i = 0; i < nf; i++) f[i] = rand_float(rng);
    static const uint32_t special[] = {0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u,
                                       0x7fc00000u, 0x7f800001u, 0xffc00001u, 0x7f7fffffu};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) f[i * 97] = fa_bits_f32(special[i]);
    for (size_t mi = 0; mi < sizeof muls / sizeof muls[0]; mi++) {
        load_case(kn, FLASHATTN_F16, h, 65536, muls[mi], "all patterns");
        load_case(kn, FLASHATTN_BF16, h, 65536, muls[mi], "all patterns");
        for (int dt = FLASHATTN_INT8; dt < FLASHATTN_DTYPE_COUNT; dt++) /* every byte, many times over */
            load_case(kn, (flashattn_dtype)dt, h, 131072, muls[mi], "all patterns");
        load_case(kn, FLASHATTN_F32, f, nf, muls[mi], "random");
    }

    /* Stores: every exponent and sign with the low 12 bits either zero
     * (exact f16 and bf16 rounding ties) or random, plus edge values. */
    const int64_t ns = 1 << 21;
    float *s = alloc_floats(ns);
    for (int64_t i = 0; i < ns; i++) {
        uint32_t lowbits = i & 1 ? (uint32_t)(tt_rand_u64(rng) & 0xfff) : 0u;
        s[i] = fa_bits_f32(((uint32_t)(i >> 1) << 12) | lowbits);
    }
    static const float edges[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 0x1p-14f, 0x1p-24f,
                                  0x1p-25f, 0x1.000002p-25f, 0x1.8p-25f, 0x1.fffffep-15f,
                                  -0x1p-25f, 0x1.ffep15f, 0x1.ffcp15f, 0x1.fep127f};
    const int64_t ne = sizeof edges / sizeof edges[0];
    for (int64_t i = 0; i < ne; i++) s[i] = edges[i];
    static const float smuls[] = {1.0f, 0.5f, 1.0f / 3.0f, 1e-3f};
    for (size_t mi = 0; mi < sizeof smuls / sizeof smuls[0]; mi++)
        for (int dt = 0; dt < 3; dt++)
            store_case(kn, (flashattn_dtype)dt, s, ns, smuls[mi], "sweep");

    /* Tails and misalignment: every length 0..40 at offsets 0..3. */
    for (int64_t n = 0; n <= 40; n++)
        for (int off = 0; off < 4; off++)
            for (int dt = 0; dt < FLASHATTN_DTYPE_COUNT; dt++) {
                load_case(kn, (flashattn_dtype)dt, dt == FLASHATTN_F32 ? (const void *)(f + off) : (const void *)(h + 30000 + off), n, 0.5f, "tail");
                if (dt <= FLASHATTN_BF16) store_case(kn, (flashattn_dtype)dt, s + 1001 + off, n, 1.0f, "tail");
            }
    /* Every start within a cache line (store_stream streams whole lines
     * between a head and a tail stored plainly), lengths around a line
     * and across several. */
    static const int64_t lens[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 96, 127, 128, 129, 200, 1000};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int off = 0; off < 33; off++)
            for (int dt = 0; dt < 3; dt++)
                store_case_at(kn, (flashattn_dtype)dt, s + 3000, lens[li], 0.5f, off, "line starts");
    free(h);
    free(f);
    free(s);
}

/* The transposing copy, bit for bit against the portable one over the
 * whole destination (so nothing outside the block may be written): rows
 * and columns 0..40 and the head dims, every dtype, destination strides
 * the driver uses and odd ones, odd source strides, misaligned pointers;
 * sources with random floats, NaNs and every 16-bit pattern. */
static void test_transpose(const fa_kernels *kn, uint64_t *rng) {
    const int64_t maxr = 40, maxc = 256, lds_max = maxc + 3, ldd_max = 64 + 5;
    const int64_t ns = maxr * lds_max + 8, nd = maxc * ldd_max + 8;
    float *src = alloc_floats(ns), *x = alloc_floats(nd), *y = alloc_floats(nd);
    uint16_t *h = malloc((size_t)ns * sizeof(uint16_t));
    for (int64_t i = 0; i < ns; i++) {
        src[i] = rand_float(rng);
        h[i] = (uint16_t)tt_rand_u64(rng);
    }
    src[5] = fa_bits_f32(0x7fc00001u);
    src[77] = fa_bits_f32(0xff800000u);
    static const int64_t colsv[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 31, 32, 33, 34, 35, 40, 64, 80, 96, 128, 256};
    static const int64_t lddv[] = {16, 32, 33, 64 + 5};
    for (int rows = 0; rows <= maxr; rows++)
        for (size_t ci = 0; ci < sizeof colsv / sizeof colsv[0]; ci++)
            for (size_t li = 0; li < sizeof lddv / sizeof lddv[0]; li++)
                for (int dt = 0; dt < FLASHATTN_DTYPE_COUNT; dt++) {
                    const int64_t cols = colsv[ci], ldd = lddv[li];
                    if (ldd < rows) continue;
                    const int mis = (rows + (int)ci) % 3 == 0;
                    const int64_t lds = cols + (rows % 4);
                    const void *s = dt == FLASHATTN_F32 ? (const void *)(src + mis) : (const void *)(h + mis);
                    for (int64_t i = 0; i < nd; i++) x[i] = y[i] = fa_bits_f32(0x7fc0dead);
                    fa_transpose_ref(y + mis, ldd, s, lds, (flashattn_dtype)dt, rows, cols);
                    kn->transpose(x + mis, ldd, s, lds, (flashattn_dtype)dt, rows, cols);
                    const int64_t at = first_diff(x, y, nd, sizeof(float));
                    TT_CHECK(at < 0, "[%s] transpose %s rows=%d cols=%lld lds=%lld ldd=%lld misaligned=%d: "
                             "first difference at %lld",
                             kn->isa, dt_names[dt], rows, (long long)cols, (long long)lds, (long long)ldd,
                             mis, (long long)at);
                }
    free(src);
    free(x);
    free(y);
    free(h);
}

/* The transposing copy reads nothing past a row's last element: the
 * source's last row ends where an unreadable page starts, so a partial
 * block read as a whole one faults. Sizes cut blocks of 8 and 16 in both
 * directions; rows are contiguous (lds = cols), as packed K and V are. */
static void test_transpose_page_end(const fa_kernels *kn) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TT_CHECK(map != MAP_FAILED && mprotect(map + page, page, PROT_NONE) == 0,
             "[%s] transpose page end: no guard page", kn->isa);
    if (map == MAP_FAILED) return;
    static const int rowsv[] = {1, 2, 5, 9, 16, 18, 21, 24};
    static const int64_t colsv[] = {1, 3, 4, 7, 17, 33, 40};
    float *x = alloc_floats(40 * 24), *y = alloc_floats(40 * 24);
    for (size_t r = 0; r < sizeof rowsv / sizeof rowsv[0]; r++)
        for (size_t c = 0; c < sizeof colsv / sizeof colsv[0]; c++)
            for (int dt = 0; dt < FLASHATTN_DTYPE_COUNT; dt++) {
                const int rows = rowsv[r];
                const int64_t cols = colsv[c], es = (int64_t)flashattn_dtype_size(dt);
                char *src = map + page - (size_t)(rows * cols * es);
                for (int64_t i = 0; i < rows * cols * es; i++) src[i] = (char)(i * 37 + 11);
                for (int64_t i = 0; i < 40 * 24; i++) x[i] = y[i] = 0.0f;
                fa_transpose_ref(y, rows, src, cols, (flashattn_dtype)dt, rows, cols);
                kn->transpose(x, rows, src, cols, (flashattn_dtype)dt, rows, cols);
                TT_CHECK(first_diff(x, y, 40 * 24, sizeof(float)) < 0,
                         "[%s] transpose at a page end %s rows=%d cols=%lld: differs", kn->isa,
                         dt_names[dt], rows, (long long)cols);
            }
    free(x);
    free(y);
    munmap(map, 2 * page);
}

/* dropout_row against the portable kernel, bit for bit: any start column
 * (whole Philox groups or not), lengths around the 32-column step, every
 * threshold from none dropped to nearly all, values of both signs and NaN;
 * dropout_cols likewise. */
static void test_dropout_row(const fa_kernels *kn, uint64_t *rng) {
    float x[300], y[300];
    static const uint32_t thresholds[] = {0u, 1u, 6554u, 32768u, 65535u};
    for (int c = 0; c < 60; c++) {
        const int64_t j0 = (int64_t)(tt_rand_u64(rng) % 200), n = c < 40 ? c : (int64_t)(tt_rand_u64(rng) % 300);
        const uint32_t key[2] = {(uint32_t)tt_rand_u64(rng), (uint32_t)tt_rand_u64(rng)};
        const uint32_t row = (uint32_t)tt_rand_u64(rng), thr = thresholds[c % 5];
        const uint64_t offset = tt_rand_u64(rng);
        for (int64_t t = 0; t < n; t++) x[t] = y[t] = (float)tt_rand_normal(rng);
        if (n > 5) x[5] = y[5] = NAN;
        kn->dropout_row(x, n, key, row, offset, j0, thr, 1.25f);
        fa_dropout_row_ref(y, n, key, row, offset, j0, thr, 1.25f);
        TT_CHECK(!memcmp(x, y, (size_t)n * sizeof(float)), "%s dropout_row j0=%lld n=%lld threshold %u differs",
                 kn->isa, (long long)j0, (long long)n, thr);
    }    /* dropout_cols: the table's against the portable, and the portable
     * against dropout_row on a row of ones (the same mask transposed),
     * blocks of every shape around the 8 x 8 step */
    static float z[70 * 40], zr[70 * 40], ones[70];
    for (int c = 0; c < 40; c++) {
        const int64_t n = c < 20 ? c : (int64_t)(tt_rand_u64(rng) % 70), m = (int64_t)(tt_rand_u64(rng) % 21);
        const int64_t ld = m + (int64_t)(tt_rand_u64(rng) % 4), j0 = (int64_t)(tt_rand_u64(rng) % 100);
        const uint32_t key[2] = {(uint32_t)tt_rand_u64(rng), (uint32_t)tt_rand_u64(rng)};
        const uint32_t row0 = (uint32_t)tt_rand_u64(rng), thr = thresholds[c % 5];
        const uint64_t offset = tt_rand_u64(rng);
        for (int i = 0; i < 70 * 40; i++) z[i] = zr[i] = -7.0f;
        kn->dropout_cols(z, ld, n, m, key, row0, offset, j0, thr, 1.25f);
        fa_dropout_cols_ref(zr, ld, n, m, key, row0, offset, j0, thr, 1.25f);
        TT_CHECK(!memcmp(z, zr, sizeof z), "%s dropout_cols j0=%lld n=%lld m=%lld threshold %u differs", kn->isa,
                 (long long)j0, (long long)n, (long long)m, thr);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t t = 0; t < n; t++) ones[t] = 1.0f;
            fa_dropout_row_ref(ones, n, key, row0 + (uint32_t)i, offset, j0, thr, 1.25f);
            for (int64_t t = 0; t < n; t++)
                TT_CHECK(ones[t] == zr[t * ld + i], "dropout_cols row %lld key %lld is not dropout_row's", (long long)i,
                         (long long)t);
        }
    }
}

/* softcap_row against the portable kernel: tanh bit for bit (the same
 * operations in the same order, kernels/ref/softcap_ref.c), the special
 * values included (+-inf to +-cap with a zero derivative, NaN to NaN,
 * +-0 kept), on random rows of every length around the vector width; the
 * derivative, through each table's own exp2, within 4 ulp of it. */
static void test_softcap_row(const fa_kernels *kn, uint64_t *rng) {
    float x[40], y[40], dx[40], dy[40];
    const float special[6] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e30f};
    for (int c = 0; c < 40; c++) {
        const int64_t n = c;
        for (int64_t t = 0; t < n; t++) x[t] = y[t] = (float)(tt_rand_normal(rng) * 20.0);
        for (int64_t t = 0; t < n && t < 6; t++) x[t] = y[t] = special[(t + c) % 6];
        kn->softcap_row(x, n, 7.5f, dx);
        fa_softcap_row_ref(y, n, 7.5f, dy);
        for (int64_t t = 0; t < n; t++) {
            const int same = isnan(y[t]) ? isnan(x[t]) && isnan(dx[t]) == isnan(dy[t])
                                         : !memcmp(&x[t], &y[t], 4) && fabsf(dx[t] - dy[t]) <= 4.8e-7f * dy[t];
            TT_CHECK(same, "%s softcap_row n=%lld [%lld]: %a (d %g) vs %a (d %g)", kn->isa, (long long)n,
                     (long long)t, (double)x[t], (double)dx[t], (double)y[t], (double)dy[t]);
        }
    }
}

/* all_finite: every length up to 130 from misaligned starts, all finite
 * (extremes included), then one NaN, infinity or signalling NaN at each
 * position in turn, which must be found; and never a value past n. */
static void test_all_finite(const fa_kernels *kn, uint64_t *rng) {
    static const uint32_t bad[] = {0x7fc00000u, 0xffc00001u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xffbfffffu};
    float buf[140];
    for (int64_t n = 0; n <= 130; n++)
        for (int off = 0; off < 3; off++) {
            float *x = buf + off;
            for (int64_t i = 0; i < n; i++) x[i] = (float)(tt_rand_normal(rng) * 1e30);
            if (n > 2) x[0] = FLT_MAX, x[1] = -FLT_MAX, x[n - 1] = 1e-45f;
            x[n] = fa_bits_f32(0x7fc00000u); /* past the end: never read */
            TT_CHECK(kn->all_finite(x, n) == 1 && fa_all_finite_ref(x, n) == 1, "%s all_finite n=%lld: finite row flagged",
                     kn->isa, (long long)n);
            for (int64_t at = 0; at < n; at++) {
                const float keep = x[at];
                x[at] = fa_bits_f32(bad[(at + n) % 6]);
                TT_CHECK(kn->all_finite(x, n) == 0, "%s all_finite n=%lld: %08x at %lld missed", kn->isa, (long long)n,
                         bad[(at + n) % 6], (long long)at);
                x[at] = keep;
            }
        }
}

/* alibi_row against the portable kernel, bit for bit: row lengths around
 * the vector width, distances on both sides of a, and past 2^24 (where a
 * itself is a rounded integer). */
static void test_alibi_row(const fa_kernels *kn, uint64_t *rng) {
    float x[40], y[40];
    const float as[5] = {0.0f, 17.0f, -5.0f, 16777216.0f, 3e9f};
    for (int c = 0; c < 40 * 5; c++) {
        const int64_t n = c % 40;
        const float a = as[c / 40], slope = (float)(0.01 + fabs(tt_rand_normal(rng)));
        for (int64_t t = 0; t < n; t++) x[t] = y[t] = (float)(tt_rand_normal(rng) * 4.0);
        kn->alibi_row(x, n, a, slope);
        fa_alibi_row_ref(y, n, a, slope);
        TT_CHECK(!memcmp(x, y, sizeof(float) * (size_t)n), "%s alibi_row n=%lld a=%g differs from the portable kernel",
                 kn->isa, (long long)n, (double)a);
    }
}

/* The rational tanh against double's at every 64th float y in [0, 9.5]
 * (cap 1, so y is the input): within the 6 ulp the portable kernel's
 * comment states (8 in the contract; every float gives 5.94 ulp). */
static void test_softcap_tanh(const fa_kernels *kn) {
    enum { B = 4096 };
    static float x[B];
    double worst = 0.0, wy = 0.0;
    const uint32_t end = 0x41180000u; /* 9.5f */
    for (uint32_t b0 = 0; b0 < end; b0 += 64u * B) {
        int n = 0;
        for (uint32_t b = b0; n < B && b < end; b += 64u) memcpy(&x[n++], &b, 4);
        float y[B];
        memcpy(y, x, sizeof(float) * (size_t)n);
        kn->softcap_row(x, n, 1.0f, NULL);
        for (int i = 0; i < n; i++) {
            const double e = tanh((double)y[i]);
            const float ef = (float)e;
            double ulp = (double)nextafterf(ef, 2.0f) - (double)ef;
            if (ef == 1.0f) ulp = 1.0 - (double)nextafterf(1.0f, 0.0f);
            if (ef < 1.17549435e-38f) ulp = 0x1p-149;
            const double err = fabs((double)x[i] - e) / ulp;
            if (err > worst || isnan(err)) worst = err, wy = y[i];
        }
    }
    TT_CHECK(worst <= 6.0, "%s softcap tanh: %.3f ulp at y = %.9g (6 allowed)", kn->isa, worst, wy);
}

/* Every table this build compiled: named by the list (kernels/isa_list.h),
 * no NULL entry (callers never test for one), and a bf16 route only on an
 * instruction of its own. Checked whether or not this CPU runs the table. */
/* gemm_i8 (kernels.h): bit for bit the portable kernel's, for every m
 * up to MR, every n the table takes, k4 from 0 past a head_dim of 576,
 * codes at the ends of their ranges and random ones, odd strides and
 * misaligned rows; nothing written outside the tile. */
typedef void (*gemm_i8_fn)(int, int, int64_t, const uint8_t *, int64_t, const int8_t *, int64_t,
                           const int32_t *, const float *, const float *, const float *, float *, int64_t);
static void gemm_i8_case(const char *isa, const char *name, gemm_i8_fn fn, int m, int n, int nr, int64_t k4,
                         int ends, uint64_t *rng) {
    const int64_t lda = 4 * k4 + 3, ldc = n + 5;
    uint8_t *a = malloc((size_t)(m * lda + 1));
    int8_t *b = malloc((size_t)(4 * k4 * nr + 1));
    int32_t bsum[64] = {0};
    float bscale[64], ascale[16], add[16];
    float *c = malloc((size_t)(m * ldc + 1) * sizeof(float)), *r = malloc((size_t)(m * ldc + 1) * sizeof(float));
    for (int64_t x = 0; x < m * lda + 1; x++)
        a[x] = (uint8_t)(ends ? (tt_rand_u64(rng) & 1 ? 255 : 1) : 1 + tt_rand_u64(rng) % 255);
    for (int64_t p = 0; p < k4; p++)
        for (int j = 0; j < nr; j++)
            for (int t = 0; t < 4; t++) {
                const int v = ends ? (tt_rand_u64(rng) & 1 ? 127 : -127) : (int)(tt_rand_u64(rng) % 255) - 127;
                b[4 * (p * nr + j) + t] = (int8_t)v;
                bsum[j] += v;
            }
    for (int j = 0; j < 64; j++) bscale[j] = (float)(tt_rand_normal(rng) * 1e-2);
    for (int i = 0; i < 16; i++) ascale[i] = (float)(tt_rand_normal(rng) * 1e-2), add[i] = (float)tt_rand_normal(rng);
    tt_fill_sentinel(c, (size_t)(m * ldc + 1) * sizeof(float));
    memcpy(r, c, (size_t)(m * ldc + 1) * sizeof(float));
    /* A one byte off its alignment */
    fn(m, n, k4, a + 1, lda, b, nr, bsum, bscale, ascale, add, c, ldc);
    fa_gemm_i8_ref(m, n, k4, a + 1, lda, b, nr, bsum, bscale, ascale, add, r, ldc);
    TT_CHECK(memcmp(c, r, (size_t)(m * ldc + 1) * sizeof(float)) == 0, "%s %s: m %d n %d k4 %lld ends %d",
             isa, name, m, n, (long long)k4, ends);
    free(a), free(b), free(c), free(r);
}

static void test_gemm_i8_fn(const char *isa, const char *name, gemm_i8_fn fn, int mr, int nr, uint64_t *rng) {
    const int64_t ks[] = {0, 1, 3, 16, 32, 144};
    for (int m = 1; m <= mr; m++)
        for (int n = FA_COL_ALIGN; n <= nr; n += FA_COL_ALIGN)
            for (size_t x = 0; x < sizeof ks / sizeof *ks; x++)
                for (int ends = 0; ends < 2; ends++) gemm_i8_case(isa, name, fn, m, n, nr, ks[x], ends, rng);
}

static void test_gemm_i8(const fa_kernels *kn, uint64_t *rng) {
    test_gemm_i8_fn(kn->isa, "gemm_i8", kn->gemm_i8, kn->mr, kn->nr, rng);
#ifdef FA_HAVE_AVX512
    if (strcmp(kn->isa, "avx512") == 0) { /* both of its ways, where they run */
        test_gemm_i8_fn(kn->isa, "gemm_i8 (VPMADDUBSW)", fa_gemm_i8_avx512_madd, kn->mr, kn->nr, rng);
        if (fa_cpu_avx512_vnni())
            test_gemm_i8_fn(kn->isa, "gemm_i8 (VNNI)", fa_gemm_i8_avx512_vnni, kn->mr, kn->nr, rng);
        else
            printf("avx512: no AVX512_VNNI on this CPU: its gemm_i8 way untested\n");
    }
#endif
#ifdef FA_HAVE_AVX2
    if (strcmp(kn->isa, "avx2") == 0) {
        test_gemm_i8_fn(kn->isa, "gemm_i8 (VPMADDUBSW)", fa_gemm_i8_avx2_madd, kn->mr, kn->nr, rng);
        if (fa_cpu_avx_vnni())
            test_gemm_i8_fn(kn->isa, "gemm_i8 (AVX-VNNI)", fa_gemm_i8_avx2_vnni, kn->mr, kn->nr, rng);
        else
            printf("avx2: no AVX-VNNI on this CPU: its gemm_i8 way tested on the emulated instruction\n");
        test_gemm_i8_fn(kn->isa, "gemm_i8 (AVX-VNNI emulated)", fa_gemm_i8_avx2_vnni_emulated, kn->mr, kn->nr, rng);
        gemm_i8_case(kn->isa, "gemm_i8 (AVX-VNNI emulated, longest)", fa_gemm_i8_avx2_vnni_emulated, kn->mr,
                     kn->nr, kn->nr, FLASHATTN_MAX_HEAD_DIM, 1, rng);
    }
#endif
#if defined(FA_HAVE_AVX512) && defined(FA_TEST_BF16_EMULATED)
    if (strcmp(kn->isa, "avx512") == 0) { /* AMX-INT8's tile, on emulated tile instructions */
        test_gemm_i8_fn("amx", "gemm_i8 (TDPBUSD emulated)", fa_gemm_i8_amx_emulated, kn->mr, kn->nr, rng);
        gemm_i8_case("amx", "gemm_i8 (TDPBUSD emulated, longest)", fa_gemm_i8_amx_emulated, kn->mr, kn->nr,
                     kn->nr, FLASHATTN_MAX_HEAD_DIM, 1, rng);
        fa_gemm_bf16_amx_emulated_done();
    }
#endif
#ifdef FA_HAVE_AMX
    if (strcmp(kn->isa, "avx512") == 0) {
        if (fa_kernels_by_name("amx") && fa_cpu_amx_int8()) {
            test_gemm_i8_fn("amx", "gemm_i8 (TDPBUSD)", fa_gemm_i8_amx_tiles, kn->mr, kn->nr, rng);
            gemm_i8_case("amx", "gemm_i8 (TDPBUSD, longest)", fa_gemm_i8_amx_tiles, kn->mr, kn->nr, kn->nr,
                         FLASHATTN_MAX_HEAD_DIM, 1, rng);
            fa_gemm_bf16_amx_done();
        } else {
            printf("amx: no AMX-INT8 on this CPU (or OS): its gemm_i8 tile untested here but emulated\n");
        }
    }
#endif
    /* the largest sums: k4 at the head-size limit, every code at its end */
    const int64_t k4 = FLASHATTN_MAX_HEAD_DIM;
    gemm_i8_case(kn->isa, "gemm_i8 (longest)", kn->gemm_i8, kn->mr, kn->nr, kn->nr, k4, 1, rng);
}

/* gemm_u8 (kernels.h): bit for bit the portable kernel's, overwriting
 * and accumulating, for every m up to MR, every n the table takes, k4
 * from 0 to the longest kv-block and past it to the sums' limit, bytes at
 * the ends of their ranges and random ones, odd strides, misaligned rows;
 * nothing written outside the tile. */
typedef void (*gemm_u8_fn)(int, int, int64_t, const uint8_t *, int64_t, const int8_t *, int64_t, const float *,
                           const float *, float *, int64_t, int);
static void gemm_u8_case(const char *isa, const char *name, gemm_u8_fn fn, int nr, int m, int n, int64_t k4,
                         int ends, int accumulate, uint64_t *rng) {
    const int64_t lda = 4 * k4 + 3, ldc = n + 5;
    uint8_t *a = malloc((size_t)(m * lda + 1));
    int8_t *b = malloc((size_t)(4 * k4 * nr + 1));
    float bscale[64], ascale[16];
    float *c = malloc((size_t)(m * ldc + 1) * sizeof(float)), *r = malloc((size_t)(m * ldc + 1) * sizeof(float));
    /* ends 2: every sum at its largest, of one sign per column */
    for (int64_t x = 0; x < m * lda + 1; x++)
        a[x] = (uint8_t)(ends == 2 ? 255 : ends ? (tt_rand_u64(rng) & 1 ? 255 : 0) : tt_rand_u64(rng) % 256);
    for (int64_t x = 0; x < 4 * k4 * nr; x++)
        b[x] = (int8_t)(ends == 2 ? (x / 4 % 2 ? 127 : -127)
                        : ends ? (tt_rand_u64(rng) & 1 ? 127 : -127) : (int)(tt_rand_u64(rng) % 255) - 127);
    for (int j = 0; j < 64; j++) bscale[j] = (float)(tt_rand_normal(rng) * 1e-2);
    for (int i = 0; i < 16; i++) ascale[i] = (float)(tt_rand_normal(rng) * 1e-3);
    for (int64_t x = 0; x < m * ldc + 1; x++) c[x] = (float)tt_rand_normal(rng);
    memcpy(r, c, (size_t)(m * ldc + 1) * sizeof(float));
    fn(m, n, k4, a + 1, lda, b, nr, bscale, ascale, c, ldc, accumulate);
    fa_gemm_u8_ref(m, n, k4, a + 1, lda, b, nr, bscale, ascale, r, ldc, accumulate);
    TT_CHECK(memcmp(c, r, (size_t)(m * ldc + 1) * sizeof(float)) == 0,
             "%s %s: m %d n %d k4 %lld ends %d accumulate %d", isa, name, m, n, (long long)k4, ends, accumulate);
    free(a), free(b), free(c), free(r);
}

/* quant_u8 (kernels.h): core/quant.h's fa_u8_row bit for bit, at every
 * length around the vector width, on softmax-like weights, on rows with a
 * zero, NaN, infinite or tiny largest weight, with the tail zeroed to n4. */
static void test_quant_u8(const fa_kernels *kn, uint64_t *rng) {
    float p[300];
    uint8_t q[304], r[304];
    for (int kind = 0; kind < 6; kind++)
        for (int n = 0; n <= 290; n += n < 40 ? 1 : 37) {
            for (int i = 0; i < n; i++) p[i] = exp2f((float)(-8.0 * tt_rand_u64(rng) / 1.8446744073709552e19));
            if (kind == 1) for (int i = 0; i < n; i++) p[i] = 0.0f;
            if (kind == 2 && n) p[n / 2] = NAN;
            if (kind == 3 && n) p[n - 1] = INFINITY;
            if (kind == 4) for (int i = 0; i < n; i++) p[i] *= 1e-38f; /* 255 / max overflows */
            if (kind == 5) for (int i = 0; i < n; i++) p[i] = (float)(i % 5) * 0.25f; /* halves: ties */
            const int n4 = (n + 3) / 4 * 4;
            float sq = -1.0f, sr = -2.0f;
            memset(q, 0xa5, sizeof q), memset(r, 0x5a, sizeof r);
            memset(q + n4, 0, sizeof q - (size_t)n4), memset(r + n4, 0, sizeof r - (size_t)n4);
            kn->quant_u8(p, n, q, n4, &sq);
            fa_u8_row(p, n, r, n4, &sr);
            TT_CHECK(memcmp(q, r, sizeof q) == 0 && memcmp(&sq, &sr, sizeof sq) == 0,
                     "%s quant_u8: kind %d n %d (scale %g / %g)", kn->isa, kind, n, (double)sq, (double)sr);
        }
}

/* quant_i8_row, amax_acc and quant_i8_with (kernels.h): the portable
 * definitions bit for bit, at every length around the vector width, with
 * and without the subtraction, on rows with a zero, NaN, infinite or tiny
 * largest value, exact halves (ties to even), factors of 0 against NaNs,
 * and products that round past +-127. */
static void test_quant_i8(const fa_kernels *kn, uint64_t *rng) {
    float x[300], y[300], sub[300], inv[300];
    int8_t q[300], r[300];
    uint32_t am[300], ar[300];
    for (int kind = 0; kind < 7; kind++)
        for (int n = 0; n <= 290; n += n < 40 ? 1 : 37) {
            for (int i = 0; i < n; i++) {
                x[i] = (float)tt_rand_normal(rng), sub[i] = (float)tt_rand_normal(rng) * 0.1f;
                inv[i] = (float)(tt_rand_u64(rng) % 4 ? 40.0 * tt_rand_u64(rng) / 1.8446744073709552e19 : 0.0);
            }
            if (kind == 1) for (int i = 0; i < n; i++) x[i] = 0.0f, sub[i] = 0.0f;
            if (kind == 2 && n) x[n / 2] = NAN;
            if (kind == 3 && n) x[n - 1] = -INFINITY;
            if (kind == 4) for (int i = 0; i < n; i++) x[i] *= 1e-38f, sub[i] = 0.0f;
            if (kind == 5) for (int i = 0; i < n; i++) x[i] = (float)(i % 9) * 0.5f - 2.0f, inv[i] = 1.0f;
            /* quant_i8_with's clamps: +-127.5 round (to even) past +-127 */
            if (kind == 6)
                for (int i = 0; i < n; i++) x[i] = i % 3 == 2 ? (float)(i % 7) - 2.5f : i % 3 ? 127.5f : -127.5f, inv[i] = 1.0f;
            for (int with_sub = 0; with_sub < 2; with_sub++) {
                float sq = -1.0f, sr = -2.0f, xr[300];
                memcpy(y, x, sizeof x), memcpy(xr, x, sizeof x);
                memset(q, 0x55, sizeof q), memset(r, 0x55, sizeof r);
                kn->quant_i8_row(y, with_sub ? sub : NULL, n, q, &sq);
                fa_quant_i8_row_ref(xr, with_sub ? sub : NULL, n, r, &sr);
                TT_CHECK(memcmp(q, r, sizeof q) == 0 && memcmp(&sq, &sr, sizeof sq) == 0 &&
                             memcmp(y, xr, sizeof y) == 0,
                         "%s quant_i8_row: kind %d n %d sub %d", kn->isa, kind, n, with_sub);
            }
            for (int i = 0; i < n; i++) am[i] = ar[i] = (uint32_t)(tt_rand_u64(rng) % 0x7f900000u);
            kn->amax_acc(x, n, am);
            fa_amax_acc_ref(x, n, ar);
            TT_CHECK(memcmp(am, ar, (size_t)n * sizeof(uint32_t)) == 0, "%s amax_acc: kind %d n %d", kn->isa, kind, n);
            /* quant_i8_with takes finite factors and, where the factor is
             * not 0, |x * inv| at most about 127 (its channel's largest) */
            for (int i = 0; i < n; i++)
                if (isfinite(x[i]) && fabsf(x[i] * inv[i]) > 127.5f) inv[i] = 127.0f / fabsf(x[i]);
                else if (!isfinite(x[i])) inv[i] = 0.0f;
            memset(q, 0x55, sizeof q), memset(r, 0x55, sizeof r);
            kn->quant_i8_with(x, inv, n, q);
            fa_quant_i8_with_ref(x, inv, n, r);
            TT_CHECK(memcmp(q, r, sizeof q) == 0, "%s quant_i8_with: kind %d n %d", kn->isa, kind, n);
        }
}

static void test_gemm_u8_fn(const char *isa, const char *name, gemm_u8_fn fn, int mr, int nr, uint64_t *rng) {
    const int64_t ks[] = {0, 1, 3, 8, 16, 21, 64};
    for (int m = 1; m <= mr; m++)
        for (int n = FA_COL_ALIGN; n <= nr; n += FA_COL_ALIGN)
            for (size_t x = 0; x < sizeof ks / sizeof *ks; x++)
                for (int e = 0; e < 4; e++) gemm_u8_case(isa, name, fn, nr, m, n, ks[x], e & 1, e >> 1, rng);
    /* the largest sums the contract allows: 65536 products of 255 and -+127 */
    gemm_u8_case(isa, name, fn, nr, mr, nr, 16384, 1, 1, rng);
    gemm_u8_case(isa, name, fn, nr, mr, nr, 16384, 2, 0, rng);
    gemm_u8_case(isa, name, fn, nr, mr, nr, 21, 2, 1, rng);
}

static void test_gemm_u8(const fa_kernels *kn, uint64_t *rng) {
    test_gemm_u8_fn(kn->isa, "gemm_u8", kn->gemm_u8, kn->mr, kn->nr, rng);
#ifdef FA_HAVE_AVX512
    if (strcmp(kn->isa, "avx512") == 0) { /* the way without AVX512_VNNI runs anywhere */
        test_gemm_u8_fn(kn->isa, "gemm_u8 (VPMADDUBSW nibbles)", fa_gemm_u8_avx512_madd, kn->mr, kn->nr, rng);
        if (!fa_cpu_avx512_vnni()) printf("avx512: no AVX512_VNNI on this CPU: its gemm_u8 way untested\n");
    }
#endif
#ifdef FA_HAVE_AVX2
    if (strcmp(kn->isa, "avx2") == 0) { /* both of its ways, the AVX-VNNI one emulated where the CPU lacks it */
        test_gemm_u8_fn(kn->isa, "gemm_u8 (VPMADDUBSW nibbles)", fa_gemm_u8_avx2_madd, kn->mr, kn->nr, rng);
        if (fa_cpu_avx_vnni())
            test_gemm_u8_fn(kn->isa, "gemm_u8 (AVX-VNNI)", fa_gemm_u8_avx2_vnni, kn->mr, kn->nr, rng);
        test_gemm_u8_fn(kn->isa, "gemm_u8 (AVX-VNNI emulated)", fa_gemm_u8_avx2_vnni_emulated, kn->mr, kn->nr, rng);
    }
#endif
#if defined(FA_HAVE_AVX512) && defined(FA_TEST_BF16_EMULATED)
    if (strcmp(kn->isa, "avx512") == 0) { /* AMX-INT8's P V tile, on emulated tile instructions */
        test_gemm_u8_fn("amx", "gemm_u8 (TDPBUSD emulated)", fa_gemm_u8_amx_emulated, kn->mr, kn->nr, rng);
        fa_gemm_bf16_amx_emulated_done();
    }
#endif
#ifdef FA_HAVE_AMX
    if (strcmp(kn->isa, "avx512") == 0) {
        if (fa_kernels_by_name("amx") && fa_cpu_amx_int8()) {
            test_gemm_u8_fn("amx", "gemm_u8 (TDPBUSD)", fa_gemm_u8_amx_tiles, kn->mr, kn->nr, rng);
            fa_gemm_bf16_amx_done();
        } else {
            printf("amx: no AMX-INT8 on this CPU (or OS): its gemm_u8 tile untested here but emulated\n");
        }
    }
#endif
}

static void test_tables(void) {
    const char *listed[16];
    const int nl = fa_listed_isas(listed, 16);
    int built = 0;
    for (const fa_kernels *const *t = fa_isa_built; *t; t++, built++) {
        const fa_kernels *k = *t;
        int named = 0;
        for (int i = 0; i < nl; i++) named |= strcmp(listed[i], k->isa) == 0;
        TT_CHECK(named, "table %s is not in kernels/isa_list.h", k->isa);
        const void *entries[] = {
            (const void *)k->cpu_supported, (const void *)k->gemm, (const void *)k->row_max, (const void *)k->all_finite,
            (const void *)k->exp2_sum, (const void *)k->scale, (const void *)k->scale_cols, (const void *)k->load,
            (const void *)k->store, (const void *)k->store_stream, (const void *)k->store_fence,
            (const void *)k->gemm_nt, (const void *)k->gemm_rows, (const void *)k->transpose,
            (const void *)k->gemm_bf16, (const void *)k->gemm_bf16_done, (const void *)k->dropout_row,
            (const void *)k->gemm_i8, (const void *)k->gemm_i8_way, (const void *)k->gemm_u8,
            (const void *)k->quant_u8, (const void *)k->quant_i8_row, (const void *)k->amax_acc,
            (const void *)k->quant_i8_with};
        for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++)
            TT_CHECK(entries[e] != NULL, "table %s: entry %zu is NULL", k->isa, e);
        TT_CHECK(!k->bf16_dot || k->gemm_bf16 != fa_gemm_bf16_ref,
                 "table %s takes the bf16 route on the portable gemm_bf16", k->isa);
        TT_CHECK(k->mr >= 1 && k->mr <= FA_MAX_MR && k->nr >= FA_COL_ALIGN && k->nr % FA_COL_ALIGN == 0,
                 "table %s: tile %d x %d", k->isa, k->mr, k->nr);
        TT_CHECK((fa_kernels_by_name(k->isa) != NULL) == (k->cpu_supported() != 0),
                 "table %s: dispatch and its CPU check disagree", k->isa);
    }
    TT_CHECK(built >= 1 && strcmp(fa_isa_built[0]->isa, "scalar") == 0,
             "the portable table must be built, first (%d built)", built);
    TT_CHECK(fa_active_kernels() != NULL && fa_isa_automatic(fa_active_kernels()->isa) +
                 (getenv("FLASHATTN_ISA") != NULL) > 0,
             "the active path is neither automatic nor forced");
}

int main(void) {
    test_tables();
    const fa_kernels *tables[4];
    int nt = tt_isas(tables, 4), tested = 0;
    for (int t = 0; t < nt; t++) {
        const fa_kernels *kn = tables[t];
        uint64_t grng = 7;
        test_exp2_sum_grain(kn, &grng);
        test_exp2_nan(kn);
        test_exp2_elementwise(kn);
        test_softcap_tanh(kn);
        if (kn == &fa_kernels_scalar) continue; /* it is the reference */
        uint64_t rng = 20240601;
        printf("%s: tile %d x %d\n", kn->isa, kn->mr, kn->nr);
        test_gemm(kn, &rng);
        test_gemm_nt(kn, &rng);
        for_rows(kn, &rng, row_max_case);
        for_rows(kn, &rng, scale_case);
        test_scale_cols(kn, &rng);
        for_rows(kn, &rng, exp2_sum_case);
        test_exp2_dense(kn);
        test_convert(kn, &rng);
        test_transpose(kn, &rng);
        test_transpose_page_end(kn);
        test_softcap_row(kn, &rng);
        test_alibi_row(kn, &rng);
        test_all_finite(kn, &rng);
        test_dropout_row(kn, &rng);
        test_gemm_i8(kn, &rng);
        test_gemm_u8(kn, &rng);
        test_quant_u8(kn, &rng);
        test_quant_i8(kn, &rng);
        tested++;
    }
    if (!tested) printf("no SIMD kernel table on this CPU or in this build: nothing to compare\n");
    return tt_finish("test_kernels");
}
