/*
 * softcap_row (kernels.h) on AVX2: the portable kernel's operations (see
 * softcap_ref.c: the rational tanh with FMAs, 1 from |y| = 9, and
 * 4e / (1 + e)^2 with the softmax's vector exp2 only when the derivative
 * is asked for), eight lanes at a time, so tanh is bit for bit the
 * portable one's; the tail through a copy.
 */
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/exp2_avx2.h"
#include "kernels/softcap_coeffs.h"

static inline void cap8(float *x, float *dcap, __m256 k, __m256 inv, __m256 cap) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 v = _mm256_loadu_ps(x), a = _mm256_andnot_ps(sign, v);
    const __m256 y = _mm256_mul_ps(a, inv), u = _mm256_mul_ps(y, y);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(FA_TANH_P4), u, _mm256_set1_ps(FA_TANH_P3));
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(FA_TANH_Q4), u, _mm256_set1_ps(FA_TANH_Q3));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(FA_TANH_P2)), q = _mm256_fmadd_ps(q, u, _mm256_set1_ps(FA_TANH_Q2));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(FA_TANH_P1)), q = _mm256_fmadd_ps(q, u, _mm256_set1_ps(FA_TANH_Q1));
    p = _mm256_fmadd_ps(p, u, one), q = _mm256_fmadd_ps(q, u, one);
    /* VMINPS returns its second operand when either is NaN: NaN stays NaN. */
    __m256 t = _mm256_min_ps(one, _mm256_div_ps(_mm256_mul_ps(y, p), q));
    t = _mm256_blendv_ps(t, one, _mm256_cmp_ps(y, _mm256_set1_ps(FA_TANH_ONE), _CMP_GE_OQ));
    if (dcap) {
        const __m256 e = fa_exp2_avx2(_mm256_mul_ps(a, k)), r = _mm256_div_ps(one, _mm256_add_ps(one, e));
        _mm256_storeu_ps(dcap, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(4.0f), e), r), r));
    }
    _mm256_storeu_ps(x, _mm256_or_ps(_mm256_mul_ps(cap, t), _mm256_and_ps(sign, v)));
}

void fa_softcap_row_avx2(float *x, int64_t n, float cap, float *dcap) {
    FA_KERNEL_CONTRACT(n >= 0 && cap > 0.0f);
    const __m256 k = _mm256_set1_ps(-2.0f * 1.4426950408889634f / cap), inv = _mm256_set1_ps(1.0f / cap);
    const __m256 c = _mm256_set1_ps(cap);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) cap8(x + j, dcap ? dcap + j : NULL, k, inv, c);
    if (j < n) {
        float tx[8] = {0}, td[8];
        for (int64_t t = 0; t < n - j; t++) tx[t] = x[j + t];
        cap8(tx, dcap ? td : NULL, k, inv, c);
        for (int64_t t = 0; t < n - j; t++) {
            x[j + t] = tx[t];
            if (dcap) dcap[j + t] = td[t];
        }
    }
}
