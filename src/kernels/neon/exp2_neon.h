/*
 * exp2 of 4 floats for the softmax, NEON: t = x - max, so t <= 0 (a few
 * ulp above 0 in the backward).
 *
 * The reduction and polynomial of exp2_avx2.h: t = n + r with n = round(t)
 * (FRINTN, ties to even) and r = t - n in [-1/2, 1/2], both exact; 2^r by
 * the same degree-6 polynomial with p(0) = 1 exactly; 2^n built in the
 * exponent field as two factors 2^n1 * 2^n2, each a normal float, so that
 * a subnormal result is rounded once. The error is the AVX2 kernel's
 * (1.02 ulp at most over every float t in [-160, 0]; the contract allows
 * 4). t = -inf and t < -150 give exactly +0; a NaN t gives NaN.
 */
#ifndef FA_EXP2_NEON_H
#define FA_EXP2_NEON_H

#include <arm_neon.h>

static inline float32x4_t fa_exp2_neon(float32x4_t t) {
    /* Clamp first: 2^-160 rounds to 0 like everything below it, and a
     * finite t keeps r = t - n from becoming -inf - -inf = NaN. FMAX
     * returns NaN when either operand is NaN, so a NaN t stays NaN. */
    t = vmaxq_f32(vdupq_n_f32(-160.0f), t);
    const float32x4_t n = vrndnq_f32(t);
    const float32x4_t r = vsubq_f32(t, n);

    /* 2^r ~ 1 + r*(c1 + r*(c2 + ... + r*c6)), Horner with FMAs. */
    float32x4_t p = vdupq_n_f32(0x1.470b4ap-13f);              /* c6 */
    p = vfmaq_f32(vdupq_n_f32(0x1.5f7276p-10f), p, r);         /* c5 */
    p = vfmaq_f32(vdupq_n_f32(0x1.3b270ep-7f), p, r);          /* c4 */
    p = vfmaq_f32(vdupq_n_f32(0x1.c6ae72p-5f), p, r);          /* c3 */
    p = vfmaq_f32(vdupq_n_f32(0x1.ebfbe2p-3f), p, r);          /* c2 */
    p = vfmaq_f32(vdupq_n_f32(0x1.62e432p-1f), p, r);          /* c1 */
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);

    /* n1 = floor(n/2), n2 = n - n1, both in [-80, 1]: p * 2^n1 is exact,
     * the second product rounds once (to a subnormal or 0 where due). */
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

#endif
