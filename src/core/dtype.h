/*
 * The storage dtypes: one table of their traits (name, bytes), and the
 * scalar conversions between float and the narrow types, shared by the
 * portable kernels, the reference and the tools. Widening is exact;
 * narrowing to f16/bf16 rounds to nearest even, NaN stays NaN (quiet),
 * overflow goes to infinity. The SIMD kernels convert the same way, bit
 * for bit. The 8-bit cache dtypes (int8, fp8) narrow as core/quant.h
 * says: round to nearest even, saturating.
 */
#ifndef FA_CORE_DTYPE_H
#define FA_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "flashattn.h"

typedef struct fa_dtype_traits {
    const char *name; /* "f32", "f16", "bf16" */
    int bytes;        /* of one element */
} fa_dtype_traits;

/* Indexed by flashattn_dtype; a static table so that every use of a
 * known dtype folds to a constant. */
static const fa_dtype_traits fa_dtype_table[FLASHATTN_DTYPE_COUNT] = {
    [FLASHATTN_F32] = {"f32", 4},
    [FLASHATTN_F16] = {"f16", 2},
    [FLASHATTN_BF16] = {"bf16", 2},
    [FLASHATTN_INT8] = {"int8", 1},
    [FLASHATTN_FP8_E4M3] = {"fp8_e4m3", 1},
    [FLASHATTN_FP8_E5M2] = {"fp8_e5m2", 1},
};

/* Whether dt is one of the table's (user input is checked with this
 * before anything else reads the table). */
static inline int fa_dtype_valid(flashattn_dtype dt) { return (unsigned)dt < FLASHATTN_DTYPE_COUNT; }

/* The dtypes of values computed with (q, o, k_new, gradients, a bias):
 * f32, f16, bf16. The others are a KV cache's storage only. */
static inline int fa_dtype_float(flashattn_dtype dt) { return (unsigned)dt <= FLASHATTN_BF16; }

/* The 8-bit cache dtypes, whose elements stand for element * scale. */
static inline int fa_dtype_quant(flashattn_dtype dt) {
    return dt == FLASHATTN_INT8 || dt == FLASHATTN_FP8_E4M3 || dt == FLASHATTN_FP8_E5M2;
}

/* Bytes of one element of a valid dtype. */
static inline int fa_dtype_bytes(flashattn_dtype dt) { return fa_dtype_table[dt].bytes; }

static inline const char *fa_dtype_name(flashattn_dtype dt) {
    return fa_dtype_valid(dt) ? fa_dtype_table[dt].name : "unknown";
}

static inline uint32_t fa_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fa_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float fa_bf16_to_f32(uint16_t h) { return fa_bits_f32((uint32_t)h << 16); }

static inline uint16_t fa_f32_to_bf16(float f) {
    uint32_t u = fa_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float fa_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return fa_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* subnormal: man * 2^-24, exact in float */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    return fa_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t fa_f32_to_f16(float f) {
    uint32_t u = fa_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);          /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);         /* rounds to inf */
    if (a < 0x38800000u) {
        /* result is subnormal or zero: let the FPU round a * 2^24 to an integer */
        float r = fa_bits_f32(a) * 16777216.0f;              /* exact scaling */
        uint32_t m = (uint32_t)(int32_t)(r + 12582912.0f - 12582912.0f); /* RNE */
        return (uint16_t)(sign | m);
    }
    uint32_t e = (a >> 23) - 112u;
    uint32_t man = a & 0x7fffffu;
    uint32_t h = (e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

/* OCP float8 E4M3 ("e4m3fn": bias 7, no infinities, S.1111.111 NaN, 448
 * the largest finite value) to f32, exactly. */
static inline float fa_e4m3_to_f32(uint8_t x) {
    const uint32_t sign = (uint32_t)(x & 0x80u) << 24, e = (x >> 3) & 0xfu, m = x & 7u;
    if (e == 0xf && m == 7) return fa_bits_f32(sign | 0x7fc00000u);
    if (e == 0) { /* subnormal: m * 2^-9 */
        const float f = (float)m * 0.001953125f;
        return sign ? -f : f;
    }
    return fa_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

/* OCP float8 E5M2 (bias 15, IEEE-like: the top byte of an f16) to f32. */
static inline float fa_e5m2_to_f32(uint8_t x) { return fa_f16_to_f32((uint16_t)(x << 8)); }

/* Element i of a row of dtype dt, widened to f32: exact, except that a
 * signalling f16 (or e5m2) NaN comes out quiet (its payload kept), as
 * VCVTPH2PS and the load kernels' multiplication make it. */
static inline float fa_widen(const void *src, flashattn_dtype dt, int64_t i) {
    if (dt == FLASHATTN_F32) return ((const float *)src)[i];
    if (dt == FLASHATTN_INT8) return (float)((const int8_t *)src)[i];
    if (dt == FLASHATTN_FP8_E4M3) return fa_e4m3_to_f32(((const uint8_t *)src)[i]);
    const uint16_t h = dt == FLASHATTN_FP8_E5M2 ? (uint16_t)(((const uint8_t *)src)[i] << 8)
                                                : ((const uint16_t *)src)[i];
    if (dt == FLASHATTN_BF16) return fa_bf16_to_f32(h);
    const float f = fa_f16_to_f32(h);
    return f != f ? fa_bits_f32(fa_f32_bits(f) | 0x00400000u) : f;
}

#endif /* FA_CORE_DTYPE_H */
