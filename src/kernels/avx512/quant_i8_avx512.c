/*
 * AVX-512 quantisation of the 8-bit options (kernels.h, quant_u8 ..
 * quant_i8_with): integer maxima of the bits (fa_amax_bits' order), one
 * product by a reciprocal, VCVTPS2DQ's round to nearest even (the rules'
 * magic-number add, for values this small), then the clamps. Rows the
 * rules treat apart (zero, NaN or infinity, or a maximum so small that its
 * reciprocal overflows) take the portable code.
 */
#include <immintrin.h>

#include "core/quant.h"
#include "kernels/avx512/avx512.h"
#include "kernels/ref/ref.h"

static inline __mmask16 tail(int64_t left) { return (__mmask16)(left >= 16 ? 0xffff : (1u << left) - 1); }

static inline uint32_t amax_bits(const float *x, int64_t n) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff);
    __m512i m = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 16)
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail(n - i), x + i), abs));
    return (uint32_t)_mm512_reduce_max_epu32(m);
}

/* P: unsigned saturation to 255 is the clamp. */
void fa_quant_u8_avx512(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale) {
    const uint32_t mb = amax_bits(p, n);
    const float amax = fa_bits_f32(mb), inv = 255.0f / amax;
    if (mb == 0 || mb >= 0x7f800000u || !(inv <= 3.4028234663852886e38f)) {
        fa_u8_row(p, n, q, n4, scale);
        return;
    }
    *scale = amax / 255.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(p + i), vinv));
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtusepi32_epi8(r));
    }
    for (; i < n; i++) {
        int32_t r = (int32_t)((p[i] * inv + 12582912.0f) - 12582912.0f);
        q[i] = (uint8_t)(r > 255 ? 255 : r < 0 ? 0 : r);
    }
    for (; i < n4; i++) q[i] = 0;
}

void fa_quant_i8_row_avx512(float *x, const float *sub, int64_t n, int8_t *q, float *scale) {
    if (sub)
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 k = tail(n - i);
            _mm512_mask_storeu_ps(x + i, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, sub + i)));
        }
    const uint32_t mb = amax_bits(x, n);
    const float amax = fa_bits_f32(mb), inv = 127.0f / amax;
    if (mb == 0 || mb >= 0x7f800000u || !(inv <= 3.4028234663852886e38f)) {
        fa_i8_row(x, n, q, scale);
        return;
    }
    *scale = amax / 127.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vinv));
        _mm_mask_storeu_epi8(q + i, k, _mm512_cvtsepi32_epi8(_mm512_max_epi32(r, lo)));
    }
}

void fa_amax_acc_avx512(const float *x, int64_t n, uint32_t *amax) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(k, x + i), abs);
        _mm512_mask_storeu_epi32(amax + i, k, _mm512_max_epu32(u, _mm512_maskz_loadu_epi32(k, amax + i)));
    }
}

void fa_quant_i8_with_avx512(const float *x, const float *inv, int64_t n, int8_t *q) {
    const __m512i lo = _mm512_set1_epi32(-127);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512 f = _mm512_maskz_loadu_ps(k, inv + i);
        /* lanes with factor 0 give 0, whatever x holds (NaN included) */
        const __mmask16 live = _mm512_mask_cmp_ps_mask(k, f, _mm512_setzero_ps(), _CMP_NEQ_OQ);
        const __m512i r = _mm512_maskz_cvtps_epi32(live, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), f));
        _mm_mask_storeu_epi8(q + i, k, _mm512_cvtsepi32_epi8(_mm512_max_epi32(r, lo)));
    }
}
