/*
 * AVX2 row kernels (the "Vector" unit): max, exp2-and-sum, scale, column
 * scales. Contract (kernels.h): rows of any length n >= 0, any alignment;
 * 8 floats per vector. The last n % 8 elements go through the scalar
 * reference formula (row_max, scale, scale_cols: bit-identical) or a
 * -inf padded vector read under a mask (exp2_sum: the same exp2 on every
 * element).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/exp2_avx2.h"

/* A float is a NaN or an infinity when its exponent bits are all set:
 * the lanes' exponents compared with the mask, 32 floats a step. */
int fa_all_finite_avx2(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    const __m256i e = _mm256_set1_epi32(0x7f800000);
    __m256i bad = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int u = 0; u < 4; u++) {
            const __m256i b = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8 * u)), e);
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(b, e));
        }
    for (; i + 8 <= n; i += 8)
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), e), e));
    int any = !_mm256_testz_si256(bad, bad);
    for (; i < n; i++) any |= !isfinite(x[i]);
    return !any;
}

float fa_row_max_avx2(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* VMAXPS returns its second operand when the first is NaN, so
     * max(x, m) skips NaNs as the reference's (x > m ? x : m) does. Four
     * accumulators hide the latency of the max chain. */
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float m = _mm_cvtss_f32(h);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    /* -0 and +0 compare equal, and the reference keeps the first one it
     * meets; lanes lose that order, so find it again (rare: max is 0). */
    if (m == 0.0f)
        for (i = 0; i < n; i++)
            if (x[i] == 0.0f) return x[i];
    return m;
}

float fa_exp2_sum_avx2(float *x, int64_t n, float m) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* Two sums so consecutive vectors' additions do not wait on each other. */
    const __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 t0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        const __m256 t1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
        __m256 e0, e1;
        if (fa_exp2_all_normal_avx2(t0, t1)) {
            e0 = fa_exp2_normal_avx2(t0);
            e1 = fa_exp2_normal_avx2(t1);
        } else {
            e0 = fa_exp2_avx2(t0);
            e1 = fa_exp2_avx2(t1);
        }
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i < n; i += 8) {
        /* A partial vector is padded with -inf, whose exp2 is 0: the sum
         * is unchanged and only the n - i real elements are written back.
         * It is read under a mask (no lane past n is touched), not
         * assembled in memory: scalar stores read back as one vector miss
         * store forwarding, which with two copies of a run-time length
         * made a short row's call a visible share of a 4 x 4 forward. */
        const int64_t len = n - i < 8 ? n - i : 8;
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)len), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + i, live),
                                          _mm256_castsi256_ps(live));
        const __m256 e = fa_exp2_avx2(_mm256_sub_ps(v, vm));
        float buf[8];
        _mm256_storeu_ps(buf, e);
        for (int64_t j = 0; j < len; j++) x[i + j] = buf[j];
        s0 = _mm256_add_ps(s0, e);
    }
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

void fa_scale_avx2(float *x, int64_t n, float a) {
    FA_KERNEL_CONTRACT(n >= 0);
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    for (; i < n; i++) x[i] *= a;
}

/* x * s, and with skip_zero the product's bits cleared where x == 0 (the
 * compare is false for NaN x, whose product stays NaN). */
static inline __m256 scale_cols8(__m256 x, __m256 s, int skip_zero) {
    const __m256 y = _mm256_mul_ps(x, s);
    return skip_zero ? _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ), y) : y;
}

void fa_scale_cols_avx2(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero) {
    FA_KERNEL_CONTRACT(rows >= 0 && n >= 0 && ld >= n);
    for (int r = 0; r < rows; r++) {
        float *xr = x + r * ld;
        int64_t c = 0;
        for (; c + 8 <= n; c += 8)
            _mm256_storeu_ps(xr + c, scale_cols8(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(s + c), skip_zero));
        for (; c < n; c++) xr[c] = skip_zero && xr[c] == 0.0f ? 0.0f : xr[c] * s[c];
    }
}
