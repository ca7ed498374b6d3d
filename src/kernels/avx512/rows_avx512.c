/*
 * AVX-512 row kernels (the "Vector" unit): max, exp2-and-sum, scale,
 * column scales.
 * Contract (kernels.h): rows of any length n >= 0, any alignment; 16 floats
 * per vector, the last partial vector through a lane mask, so nothing
 * outside x[0..n) is read or written.
 * row_max, scale and scale_cols give bit-identical results to the portable kernels;
 * exp2_sum is within the exp2 bound of exp2_avx512.h per element, its sum
 * in a different order.
 */
#include <immintrin.h>
#include <math.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/exp2_avx512.h"

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* VFPCLASSPS finds the NaNs (quiet 0x01, signalling 0x80) and the
 * infinities (0x08, 0x10), 64 floats a step. */
int fa_all_finite_avx512(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    __mmask16 bad = 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i), 0x99) |
               _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i + 16), 0x99) |
               _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i + 32), 0x99) |
               _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i + 48), 0x99);
    for (; i + 16 <= n; i += 16) bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i), 0x99);
    if (i < n) bad |= _mm512_mask_fpclass_ps_mask(tail_mask(n - i), _mm512_maskz_loadu_ps(tail_mask(n - i), x + i), 0x99);
    return !bad;
}

float fa_row_max_avx512(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* VMAXPS returns its second operand when the first is NaN, so
     * max(x, m) skips NaNs as the reference's (x > m ? x : m) does. Four
     * accumulators hide the 4-cycle latency of the max chain. */
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    if (i < n) m0 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i), m0);
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    /* -0 and +0 compare equal, and the reference keeps the first one it
     * meets; lanes lose that order, so find it again (rare: max is 0). */
    if (m == 0.0f)
        for (i = 0; i < n; i++)
            if (x[i] == 0.0f) return x[i];
    return m;
}

float fa_exp2_sum_avx512(float *x, int64_t n, float m) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* Two sums so consecutive vectors' additions do not wait on each other. */
    const __m512 vm = _mm512_set1_ps(m);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 e0 = fa_exp2_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        const __m512 e1 = fa_exp2_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
        _mm512_storeu_ps(x + i, e0);
        _mm512_storeu_ps(x + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < n; i += 16) {
        /* Masked-off lanes load -inf, whose exp2 is 0: the sum is unchanged. */
        const __mmask16 k = tail_mask(n - i);
        const __m512 xi = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i);
        const __m512 e = fa_exp2_avx512(_mm512_sub_ps(xi, vm));
        _mm512_mask_storeu_ps(x + i, k, e);
        s0 = _mm512_add_ps(s0, e);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void fa_scale_avx512(float *x, int64_t n, float a) {
    FA_KERNEL_CONTRACT(n >= 0);
    const __m512 va = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), va));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), va));
    }
}

void fa_scale_cols_avx512(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero) {
    FA_KERNEL_CONTRACT(rows >= 0 && n >= 0 && ld >= n);
    for (int64_t c = 0; c < n; c += 16) {
        const __mmask16 k = tail_mask(n - c);
        const __m512 sc = _mm512_maskz_loadu_ps(k, s + c);
        for (int r = 0; r < rows; r++) {
            float *xr = x + r * ld + c;
            const __m512 xv = _mm512_maskz_loadu_ps(k, xr);
            /* with skip_zero, lanes where x == 0 (not NaN) store +0 */
            const __mmask16 keep = skip_zero ? _mm512_mask_cmp_ps_mask(k, xv, _mm512_setzero_ps(), _CMP_NEQ_UQ) : k;
            _mm512_mask_storeu_ps(xr, k, _mm512_maskz_mul_ps(keep, xv, sc));
        }
    }
}
