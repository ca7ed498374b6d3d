/*
 * gemm_nt (C = A . B^T, B as rows) on every kernel table, against sums in
 * double: m, n from 0 to 19 and k from 0 to 300 (around multiples of 8, 16
 * and 32), padded strides, unaligned pointers. Error bound: the standard
 * one for a float dot product in any summation order, (k + 2) * 2^-24 *
 * sum |a_p b_p|. Then the contract's position rule, bit for bit: an element
 * computed inside a large call equals the same element computed alone.
 *
 * Rows of B in f16 and bf16: bit for bit the same kernel's result on the
 * rows widened to f32 (widening is exact), for gemm_nt and gemm_rows.
 * gemm_rows (C (=, +=) A . B, B as rows of a storage dtype): bit for bit
 * the portable gemm on the widened rows, for m up to 13, n up to 140 and
 * k up to 70 with tails, accumulating or not; C outside the tile is never
 * written and, without accumulation, never read; a sum split over two
 * calls equals one call.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/quant.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

/* A prefetch distance whose target is far outside every buffer (likely
 * unmapped): a hint must neither fault nor change a result, so calls with
 * it are compared bit for bit with calls without (pf = 0). */
#define FAR_HINT ((int64_t)1 << 32)

static void fill(float *x, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) x[i] = (float)tt_rand_normal(rng);
}

static void check_shape(const fa_kernels *kern, int m, int n, int64_t k, uint64_t *rng) {
    const int64_t lda = k + 3, ldb = k + 5, ldc = n + 2;
    /* +1: a deliberately misaligned start */
    float *abuf = malloc((size_t)(m * lda + 2) * sizeof(float));
    float *bbuf = malloc((size_t)(n * ldb + 2) * sizeof(float));
    float *c = malloc((size_t)(m * ldc + 1) * sizeof(float));
    float *a = abuf + 1, *b = bbuf + 1;
    fill(abuf, (size_t)(m * lda + 2), rng);
    fill(bbuf, (size_t)(n * ldb + 2), rng);
    for (int64_t i = 0; i < m * ldc + 1; i++) c[i] = NAN; /* overwritten, never read */
    kern->gemm_nt(m, n, k, a, lda, b, FLASHATTN_F32, ldb, c, ldc, 0);
    double worst = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double exact = 0.0, mag = 0.0;
            for (int64_t p = 0; p < k; p++) {
                exact += (double)a[i * lda + p] * b[j * ldb + p];
                mag += fabs((double)a[i * lda + p] * b[j * ldb + p]);
            }
            const double err = fabs(c[i * ldc + j] - exact), bound = (double)(k + 2) * 0x1p-24 * mag;
            if (!(err <= bound)) worst = fmax(worst, isnan(err) ? INFINITY : err / bound);
        }
    TT_CHECK(worst == 0.0, "[%s] m=%d n=%d k=%lld: error %.3g times the bound", kern->isa, m, n,
             (long long)k, worst);
    /* position rule: element (i, j) alone, bit for bit */
    for (int i = 0; i < m; i += 3)
        for (int j = 0; j < n; j += 5) {
            float one = NAN;
            kern->gemm_nt(1, 1, k, a + i * lda, lda, b + j * ldb, FLASHATTN_F32, ldb, &one, 1, -FAR_HINT);
            TT_CHECK(memcmp(&one, &c[i * ldc + j], sizeof one) == 0,
                     "[%s] m=%d n=%d k=%lld: element (%d, %d) alone differs", kern->isa, m, n,
                     (long long)k, i, j);
        }
    free(abuf), free(bbuf), free(c);
}

/* n random values of dtype dt in `raw`, and their exact f32 values in `wide`. */
static void fill_typed(flashattn_dtype dt, void *raw, float *wide, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) {
        const float x = (float)tt_rand_normal(rng);
        if (dt == FLASHATTN_F16) {
            ((uint16_t *)raw)[i] = fa_f32_to_f16(x);
            wide[i] = fa_f16_to_f32(((uint16_t *)raw)[i]);
        } else if (fa_dtype_quant(dt)) { /* a quantised cache's range, no NaN codes */
            const float y = x * (dt == FLASHATTN_INT8 ? 40.0f : dt == FLASHATTN_FP8_E4M3 ? 60.0f : 3000.0f);
            uint8_t e = dt == FLASHATTN_INT8 ? (uint8_t)fa_f32_to_int8(y)
                        : dt == FLASHATTN_FP8_E4M3 ? fa_f32_to_e4m3(y) : fa_f32_to_e5m2(y);
            ((uint8_t *)raw)[i] = e;
            wide[i] = fa_widen(raw, dt, (int64_t)i);
        } else if (dt == FLASHATTN_BF16) {
            ((uint16_t *)raw)[i] = fa_f32_to_bf16(x);
            wide[i] = fa_bf16_to_f32(((uint16_t *)raw)[i]);
        } else {
            ((float *)raw)[i] = wide[i] = x;
        }
    }
}

enum { NDT = 6 };
static const flashattn_dtype dtypes[NDT] = {FLASHATTN_F32, FLASHATTN_F16, FLASHATTN_BF16,
                                            FLASHATTN_INT8, FLASHATTN_FP8_E4M3, FLASHATTN_FP8_E5M2};
static const char *const dtype_names[NDT] = {"f32", "f16", "bf16", "int8", "fp8_e4m3", "fp8_e5m2"};

/* gemm_nt with 16-bit rows of B equals the f32 call on the widened rows. */
static void check_nt_typed(const fa_kernels *kern, int t, int m, int n, int64_t k, uint64_t *rng) {
    const flashattn_dtype dt = dtypes[t];
    const int64_t lda = k + 1, ldb = k + 3, ldc = n + 1;
    float *a = malloc((size_t)(m * lda + 1) * sizeof(float));
    /* exact sizes: ASan catches a read past the last row of B */
    const size_t nb = n > 0 ? (size_t)((n - 1) * ldb + k) : 0;
    void *raw = malloc(nb * flashattn_dtype_size(dt) + 1);
    float *wide = malloc(nb * sizeof(float) + 1);
    float *c1 = malloc((size_t)(m * ldc + 1) * sizeof(float)), *c2 = malloc((size_t)(m * ldc + 1) * sizeof(float));
    fill(a, (size_t)(m * lda + 1), rng);
    fill_typed(dt, raw, wide, nb, rng);
    for (int64_t i = 0; i < m * ldc + 1; i++) c1[i] = c2[i] = NAN;
    kern->gemm_nt(m, n, k, a, lda, raw, dt, ldb, c1, ldc, FAR_HINT);
    kern->gemm_nt(m, n, k, a, lda, wide, FLASHATTN_F32, ldb, c2, ldc, 0);
    TT_CHECK(memcmp(c1, c2, (size_t)(m * ldc + 1) * sizeof(float)) == 0,
             "[%s] gemm_nt %s m=%d n=%d k=%lld: differs from the f32 call on widened rows",
             kern->isa, dtype_names[t], m, n, (long long)k);
    free(a), free(raw), free(wide), free(c1), free(c2);
}

/* The portable gemm, tile by tile, on f32 rows: what gemm_rows must equal. */
static void gemm_by_tiles(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                          int64_t ldb, float *c, int64_t ldc, int accumulate) {
    float panel[FA_REF_NR];
    for (int i = 0; i < m; i += FA_REF_MR)
        for (int j = 0; j < n; j += FA_REF_NR) {
            const int mm = m - i < FA_REF_MR ? m - i : FA_REF_MR, nn = n - j < FA_REF_NR ? n - j : FA_REF_NR;
            /* one FMA chain per element: the tile is the chain, whatever its size */
            for (int ii = 0; ii < mm; ii++) {
                for (int jj = 0; jj < nn; jj++) panel[jj] = accumulate ? c[(i + ii) * ldc + j + jj] : 0.0f;
                for (int64_t p = 0; p < k; p++)
                    for (int jj = 0; jj < nn; jj++)
                        panel[jj] = fmaf(a[(i + ii) * lda + p], b[p * ldb + j + jj], panel[jj]);
                for (int jj = 0; jj < nn; jj++) c[(i + ii) * ldc + j + jj] = panel[jj];
            }
        }
}

static void check_rows(const fa_kernels *kern, int t, int m, int n, int64_t k, int accumulate,
                       int odd, uint64_t *rng) {
    const flashattn_dtype dt = dtypes[t];
    const size_t es = flashattn_dtype_size(dt);
    const int64_t lda = k + (odd ? 3 : 0), ldb = n + (odd ? 5 : 0), ldc = n + (odd ? 7 : 0) + 1;
    const size_t na = m > 0 ? (size_t)((m - 1) * lda + k) : 0;
    const size_t nb = k > 0 ? (size_t)((k - 1) * ldb + n) : 0;
    const size_t nc = (size_t)(m * ldc + 16);
    float *abuf = malloc((na + 1) * sizeof(float)), *a = abuf + odd;
    char *rawbuf = malloc(nb * es + es);
    void *raw = rawbuf + (odd ? es : 0);
    float *wide = malloc((nb + 1) * sizeof(float));
    float *c = malloc(nc * sizeof(float)), *r = malloc(nc * sizeof(float)), *s = malloc(nc * sizeof(float));
    fill(a, na, rng);
    fill_typed(dt, raw, wide, nb, rng);
    for (size_t i = 0; i < nc; i++) {
        /* finite values where C is accumulated into, NaN garbage elsewhere
         * and when C must not be read */
        const int in = (int64_t)i / ldc < m && (int64_t)i % ldc < n;
        c[i] = in && accumulate ? (float)tt_rand_normal(rng) : fa_bits_f32(0x7fc00000u | (uint32_t)(i & 0xffff));
    }
    memcpy(r, c, nc * sizeof(float));
    memcpy(s, c, nc * sizeof(float));
    kern->gemm_rows(m, n, k, a, lda, raw, dt, ldb, c, ldc, accumulate, FAR_HINT);
    gemm_by_tiles(m, n, k, a, lda, wide, ldb, r, ldc, accumulate);
    int64_t bad = -1;
    for (size_t i = 0; i < nc && bad < 0; i++)
        if (fa_f32_bits(c[i]) != fa_f32_bits(r[i])) bad = (int64_t)i;
    TT_CHECK(bad < 0, "[%s] gemm_rows %s m=%d n=%d k=%lld acc=%d odd=%d: C[%lld][%lld] = %a, portable %a",
             kern->isa, dtype_names[t], m, n, (long long)k, accumulate, odd,
             (long long)(bad / ldc), (long long)(bad % ldc), bad >= 0 ? c[bad] : 0.0, bad >= 0 ? r[bad] : 0.0);
    /* split over k: the first part, then the rest accumulating */
    const int64_t k1 = k / 3;
    kern->gemm_rows(m, n, k1, a, lda, raw, dt, ldb, s, ldc, accumulate, 0);
    kern->gemm_rows(m, n, k - k1, a + k1, lda, (const char *)raw + (size_t)(k1 * ldb) * es, dt, ldb, s,
                    ldc, 1, -FAR_HINT);
    TT_CHECK(memcmp(s, c, nc * sizeof(float)) == 0,
             "[%s] gemm_rows %s m=%d n=%d k=%lld acc=%d: split at k=%lld differs", kern->isa,
             dtype_names[t], m, n, (long long)k, accumulate, (long long)k1);
    free(abuf), free(rawbuf), free(wide), free(c), free(r), free(s);
}

int main(void) {
    static const int64_t ks[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 64, 80, 128, 255, 256, 300};
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    uint64_t rng = 77;
    for (int t = 0; t < n; t++)
        for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++)
            for (int m = 0; m < 20; m += 1 + m / 4)
                for (int nn = 0; nn < 20; nn += 1 + nn / 3) check_shape(isas[t], m, nn, ks[kk], &rng);
    static const int64_t kt[] = {0, 1, 7, 15, 16, 17, 33, 128, 130};
    static const int nts[] = {0, 1, 3, 8, 9};
    for (int t = 0; t < n; t++)
        for (int d = 1; d < NDT; d++)
            for (size_t kk = 0; kk < sizeof kt / sizeof kt[0]; kk++)
                for (int m = 0; m < 6; m++)
                    for (size_t j = 0; j < sizeof nts / sizeof nts[0]; j++)
                        check_nt_typed(isas[t], d, m, nts[j], kt[kk], &rng);
    static const int ms[] = {0, 1, 2, 3, 4, 5, 7, 8, 12, 13};
    static const int ns[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 48, 63, 64, 65, 100, 128, 140};
    static const int64_t kr[] = {0, 1, 2, 5, 16, 64, 70};
    for (int t = 0; t < n; t++)
        for (int d = 0; d < NDT; d++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                    for (size_t ki = 0; ki < sizeof kr / sizeof kr[0]; ki++)
                        check_rows(isas[t], d, ms[mi], ns[ni], kr[ki], (int)((mi + ni + ki) % 2),
                                   (int)((mi + ki) % 2), &rng);
    return tt_finish("test_gemm_nt");
}
