/*
 * Scalar conversions between float and the 16-bit storage types, shared by
 * the portable kernels, the reference and the tools. Round to nearest even;
 * NaN stays NaN, overflow goes to infinity.
 */
#ifndef FA_HALF_H
#define FA_HALF_H

#include <stdint.h>
#include <string.h>

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

#endif /* FA_HALF_H */
