/*
 * Quantised KV-cache rows: the 8-bit dtypes' narrowing and the scale rule
 * of flashattn.h (flashattn_kv_cache), one definition shared by the
 * decode's append, the reference and the tests.
 *
 * A cache element e stands for e * scale. Writing value x with scale s
 * stores narrow(x / s) (one f32 division, then the dtype's round to
 * nearest even, saturating at the largest finite value, infinities included: +-127
 * for int8, +-448 for e4m3, +-57344 for e5m2; NaN stays NaN in fp8 and becomes 0 in
 * int8, which has none). A per-token scale is amax / qmax of the row
 * written (amax its largest |x|), so the row's largest element lands on
 * qmax; an all-zero row gets scale 0 and zeros; a row holding a NaN or an
 * infinity gets scale NaN, and reads back as NaN (NaN rule, flashattn.h).
 */
#ifndef FA_CORE_QUANT_H
#define FA_CORE_QUANT_H

#include <math.h>
#include <stdint.h>

#include "core/dtype.h"

/* The largest finite value of a cache dtype: a per-token scale maps amax to it. */
static inline float fa_quant_max(flashattn_dtype dt) {
    return dt == FLASHATTN_INT8 ? 127.0f : dt == FLASHATTN_FP8_E4M3 ? 448.0f : 57344.0f;
}

/* Round to nearest even, to an integer, for |r| < 2^22 (the adds are exact
 * but for that one rounding). */
static inline float fa_rne_int(float r) {
    const float big = r < 0 ? -12582912.0f : 12582912.0f; /* 1.5 * 2^23 */
    return (r + big) - big;
}

static inline int8_t fa_f32_to_int8(float x) {
    if (x != x) return 0;
    if (x >= 127.0f) return 127;
    if (x <= -127.0f) return -127;
    return (int8_t)(int)fa_rne_int(x);
}

/* f32 to a binary minifloat of `mb` mantissa bits and exponent bias
 * `bias`, round to nearest even, |x| at or past `top` (the bits of the
 * largest finite value's f32, `top_code` its code) saturating to it;
 * subnormals below 2^(1 - bias). NaN and infinity are the callers'. */
static inline uint8_t fa_f32_to_minifloat(uint32_t a, int mb, int bias, uint32_t top,
                                          uint8_t top_code) {
    if (a >= top) return top_code;
    if (a < (uint32_t)(128 - bias) << 23) { /* subnormal or zero: m = rne(|x| * 2^(bias - 1 + mb)) */
        const float r = fa_bits_f32(a) * fa_bits_f32((uint32_t)(127 + bias - 1 + mb) << 23);
        return (uint8_t)(int)fa_rne_int(r); /* 2^mb (the smallest normal) included */
    }
    const uint32_t e = (a >> 23) - (uint32_t)(127 - bias), man = a & 0x7fffffu;
    const int drop = 23 - mb;
    uint32_t h = (e << mb) | (man >> drop);
    const uint32_t rem = man & ((1u << drop) - 1), half = 1u << (drop - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint8_t)(h < top_code ? h : top_code);
}

static inline uint8_t fa_f32_to_e4m3(float x) {
    const uint32_t u = fa_f32_bits(x), a = u & 0x7fffffffu;
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
    return (uint8_t)(sign | fa_f32_to_minifloat(a, 3, 7, 0x43e00000u /* 448 */, 0x7e));
}

static inline uint8_t fa_f32_to_e5m2(float x) {
    const uint32_t u = fa_f32_bits(x), a = u & 0x7fffffffu;
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7eu); /* quiet NaN */
    return (uint8_t)(sign | fa_f32_to_minifloat(a, 2, 15, 0x47600000u /* 57344 */, 0x7b));
}

/* Element i of a quantised row: narrow(x / s). */
static inline void fa_quant_put(void *row, flashattn_dtype dt, int64_t i, float x, float s) {
    const float y = s == 0.0f ? 0.0f : x / s;
    if (dt == FLASHATTN_INT8) ((int8_t *)row)[i] = fa_f32_to_int8(y);
    else if (dt == FLASHATTN_FP8_E4M3) ((uint8_t *)row)[i] = fa_f32_to_e4m3(y);
    else ((uint8_t *)row)[i] = fa_f32_to_e5m2(y);
}

/* The per-token scale of x[0..n): amax / qmax, NaN when x holds a NaN
 * or an infinity. */
static inline float fa_quant_token_scale(const float *x, int64_t n, flashattn_dtype dt) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= 3.4028234663852886e38f)) return NAN;
        if (a > amax) amax = a;
    }
    return amax / fa_quant_max(dt);
}

/* Quantise x[0..n) into row with scales s[i * s_step] (s_step 0: one
 * scale for the row, 1: a scale per element). */
static inline void fa_quant_row(void *row, flashattn_dtype dt, const float *x, int64_t n,
                                const float *s, int64_t s_step) {
    for (int64_t i = 0; i < n; i++) fa_quant_put(row, dt, i, x[i], s[i * s_step]);
}

/* The 8-bit Q K^T of params.precision FLASHATTN_PRECISION_INT8_QK
 * (flashattn.h "Precision"), one definition for the forward's packing and
 * the tests' reference. */

/* The bits of the largest |x[i]| (0 for n = 0): at or above 0x7f800000
 * when x holds a NaN or an infinity. An integer maximum, which compilers
 * vectorise where a float one with NaNs in the way they do not. */
static inline uint32_t fa_amax_bits(const float *x, int64_t n) {
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = fa_f32_bits(x[i]) & 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m;
}

static inline int fa_row_finite(const float *x, int64_t n) { return fa_amax_bits(x, n) < 0x7f800000u; }

/* A chunk's smoothing mean, row by row in key order: fa_i8_mean_add for
 * each key row (sum: n doubles, from 0; rows holding a NaN or an infinity
 * are left out), then fa_i8_mean_get (0 when no row was finite). */
static inline void fa_i8_mean_add(double *sum, int64_t *count, const float *x, int64_t n) {
    if (!fa_row_finite(x, n)) return;
    for (int64_t i = 0; i < n; i++) sum[i] += x[i];
    ++*count;
}

static inline void fa_i8_mean_get(float *mean, const double *sum, int64_t count, int64_t n) {
    for (int64_t i = 0; i < n; i++) mean[i] = count ? (float)(sum[i] / (double)count) : 0.0f;
}

/* x[0..n) as *scale * q[0..n) (params.precision's rule, flashattn.h):
 * scale = amax / 127 and q[i] = round(x[i] * (127 / amax)), amax =
 * max |x[i]|, rounded to nearest even and clamped to [-127, 127]; a zero
 * row gets scale 0, a row holding a NaN or an infinity scale NaN, both
 * with q = 0. (A product by one reciprocal rather than a division per
 * element: this rule is the precision option's own, not the cache's.) */
static inline void fa_i8_row(const float *x, int64_t n, int8_t *q, float *scale) {
    const uint32_t mb = fa_amax_bits(x, n);
    if (mb == 0 || mb >= 0x7f800000u) {
        for (int64_t i = 0; i < n; i++) q[i] = 0;
        *scale = mb ? NAN : 0.0f;
        return;
    }
    const float amax = fa_bits_f32(mb), inv = 127.0f / amax;
    *scale = amax / 127.0f;
    if (!(inv <= 3.4028234663852886e38f)) { /* amax below 127 / FLT_MAX: x / amax first */
        for (int64_t i = 0; i < n; i++) q[i] = fa_f32_to_int8(fa_rne_int(x[i] / amax * 127.0f));
        return;
    }
    /* |x[i]| <= amax, so |x[i] * inv| <= 127 to within a rounding: adding
     * 1.5 * 2^23 rounds it to an integer, nearest even; the clamp is on
     * integers, which vectorise where float comparisons with NaNs in the
     * way do not */
    for (int64_t i = 0; i < n; i++) {
        int32_t r = (int32_t)((x[i] * inv + 12582912.0f) - 12582912.0f);
        r = r > 127 ? 127 : r;
        q[i] = (int8_t)(r < -127 ? -127 : r);
    }
}

/* FLASHATTN_PRECISION_INT8_QK_INT8_PV's V and P (flashattn.h "Precision").
 *
 * V, per channel over a chunk of rows: each channel's largest |v| (its
 * bits, in fa_amax_bits' order: the kernels' amax_acc), then
 * fa_i8_col_scale: the scale sv = amax / 127 (0 for a zero channel, NaN
 * for one holding a NaN or an infinity) and *inv = 127 / amax (0 where
 * fa_i8_put writes zeros, an infinity where amax is below 127 / FLT_MAX),
 * then fa_i8_put each element: fa_i8_row's element rule, so a channel
 * quantises as a row would. */
static inline float fa_i8_col_scale(uint32_t amax_bits, float *inv) {
    if (amax_bits == 0 || amax_bits >= 0x7f800000u) {
        *inv = 0.0f;
        return amax_bits ? NAN : 0.0f;
    }
    const float amax = fa_bits_f32(amax_bits);
    *inv = 127.0f / amax;
    return amax / 127.0f;
}

static inline int8_t fa_i8_put(float x, uint32_t amax_bits, float inv) {
    if (inv == 0.0f) return 0;
    if (inv > 3.4028234663852886e38f) return fa_f32_to_int8(fa_rne_int(x / fa_bits_f32(amax_bits) * 127.0f));
    int32_t r = (int32_t)((x * inv + 12582912.0f) - 12582912.0f);
    r = r > 127 ? 127 : r;
    return (int8_t)(r < -127 ? -127 : r);
}

/* A row of P's weights (>= 0) of one kv-block as u8: *scale = max p / 255
 * and q[i] = round(p[i] * (255 / max p)) in [0, 255] for i < n, zeros on
 * to n4 (the dot product's whole groups of 4); a zero row gets scale 0, a
 * row holding a NaN or an infinity scale NaN, both with q = 0. */
static inline void fa_u8_row(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale) {
    const uint32_t mb = fa_amax_bits(p, n);
    int64_t i = 0;
    if (mb == 0 || mb >= 0x7f800000u) {
        *scale = mb ? NAN : 0.0f;
    } else {
        const float amax = fa_bits_f32(mb), inv = 255.0f / amax;
        *scale = amax / 255.0f;
        if (!(inv <= 3.4028234663852886e38f)) {
            for (; i < n; i++) q[i] = (uint8_t)(int)fa_rne_int(p[i] / amax * 255.0f);
        } else {
            for (; i < n; i++) {
                int32_t r = (int32_t)((p[i] * inv + 12582912.0f) - 12582912.0f);
                r = r > 255 ? 255 : r;
                q[i] = (uint8_t)(r < 0 ? 0 : r);
            }
        }
    }
    for (; i < n4; i++) q[i] = 0;
}

/* sum of a[i] * b[i] in f32 in a fixed order: eight partial sums, of
 * the indices i = r mod 8 in increasing order, each product and sum
 * rounded (the library builds with -ffp-contract=off), then added
 * pairwise: (0+4 + 2+6) + (1+5 + 3+7). Eight chains, not one: q . m runs
 * once a row and chunk, as long as a serial chain would otherwise take. */
static inline float fa_dot_f32(const float *a, const float *b, int64_t n) {
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int r = 0; r < 8; r++) t[r] += a[i + r] * b[i + r];
    for (int r = 0; i < n; i++, r++) t[r] += a[i] * b[i];
    for (int r = 0; r < 4; r++) t[r] += t[r + 4];
    return (t[0] + t[2]) + (t[1] + t[3]);
}

#endif /* FA_CORE_QUANT_H */
