/*
 * AVX2 quantisation of the 8-bit options (kernels.h, quant_u8 ..
 * quant_i8_with): the AVX-512 file's method on 8 lanes. Integer maxima of
 * the bits (fa_amax_bits' order), one product by a reciprocal, VCVTPS2DQ's
 * round to nearest even (the rules' magic-number add, for values this
 * small), then the clamps, which the saturating packs to 8 bits do. Rows
 * the rules treat apart (zero, NaN or infinity, or a maximum so small that
 * its reciprocal overflows) and the last n mod 32 elements take the
 * portable code, so every table writes the same bits.
 */
#include <immintrin.h>

#include "core/quant.h"
#include "kernels/avx2/avx2.h"
#include "kernels/ref/ref.h"

static inline uint32_t amax_bits(const float *x, int64_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), abs));
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
    const uint32_t v = (uint32_t)_mm_cvtsi128_si32(h);
    const uint32_t t = fa_amax_bits(x + i, n - i);
    return t > v ? t : v;
}

/* 32 floats times inv, rounded to integers: four vectors of int32 in order. */
static inline void round32(const float *x, __m256 inv, __m256i r[4]) {
    for (int j = 0; j < 4; j++) r[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), inv));
}

/* The packs work within 128-bit lanes: bytes come out as groups of 4
 * from r0 r1 r2 r3 r0 r1 r2 r3 (lo halves, then hi); this puts them back. */
static inline __m256i unlane(__m256i b) {
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* P: the unsigned saturating packs are the clamp to [0, 255]. */
void fa_quant_u8_avx2(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale) {
    const uint32_t mb = amax_bits(p, n);
    const float amax = fa_bits_f32(mb), inv = 255.0f / amax;
    if (mb == 0 || mb >= 0x7f800000u || !(inv <= 3.4028234663852886e38f)) {
        fa_u8_row(p, n, q, n4, scale);
        return;
    }
    *scale = amax / 255.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i r[4];
        round32(p + i, vinv, r);
        const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(r[0], r[1]), _mm256_packus_epi32(r[2], r[3]));
        _mm256_storeu_si256((__m256i *)(q + i), unlane(w));
    }
    for (; i < n; i++) {
        int32_t r = (int32_t)((p[i] * inv + 12582912.0f) - 12582912.0f);
        q[i] = (uint8_t)(r > 255 ? 255 : r < 0 ? 0 : r);
    }
    for (; i < n4; i++) q[i] = 0;
}

/* Signed saturating packs clamp to [-128, 127]; the max makes it -127. */
static inline void put_i8(const float *x, __m256 inv, int8_t *q) {
    __m256i r[4];
    round32(x, inv, r);
    const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_max_epi8(unlane(w), _mm256_set1_epi8(-127)));
}

static inline int8_t put_i8_one(float x, float inv) {
    int32_t r = (int32_t)((x * inv + 12582912.0f) - 12582912.0f);
    r = r > 127 ? 127 : r;
    return (int8_t)(r < -127 ? -127 : r);
}

void fa_quant_i8_row_avx2(float *x, const float *sub, int64_t n, int8_t *q, float *scale) {
    if (sub) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(x + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(sub + i)));
        for (; i < n; i++) x[i] -= sub[i];
    }
    const uint32_t mb = amax_bits(x, n);
    const float amax = fa_bits_f32(mb), inv = 127.0f / amax;
    if (mb == 0 || mb >= 0x7f800000u || !(inv <= 3.4028234663852886e38f)) {
        fa_i8_row(x, n, q, scale);
        return;
    }
    *scale = amax / 127.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) put_i8(x + i, vinv, q + i);
    for (; i < n; i++) q[i] = put_i8_one(x[i], inv);
}

void fa_amax_acc_avx2(const float *x, int64_t n, uint32_t *amax) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), abs);
        const __m256i a = _mm256_loadu_si256((const __m256i *)(amax + i));
        _mm256_storeu_si256((__m256i *)(amax + i), _mm256_max_epu32(u, a));
    }
    fa_amax_acc_ref(x + i, n - i, amax + i);
}

void fa_quant_i8_with_avx2(const float *x, const float *inv, int64_t n, int8_t *q) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i r[4];
        for (int j = 0; j < 4; j++) {
            const __m256 f = _mm256_loadu_ps(inv + i + 8 * j);
            /* lanes with factor 0 give 0, whatever x holds (NaN included) */
            const __m256 live = _mm256_cmp_ps(f, _mm256_setzero_ps(), _CMP_NEQ_OQ);
            const __m256 y = _mm256_and_ps(live, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), f));
            r[j] = _mm256_cvtps_epi32(y);
        }
        const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_max_epi8(unlane(w), _mm256_set1_epi8(-127)));
    }
    fa_quant_i8_with_ref(x + i, inv + i, n - i, q + i);
}
