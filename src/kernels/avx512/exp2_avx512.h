/*
 * exp2 of 16 floats for the softmax, AVX-512F and DQ: t = x - max, so t <= 0.
 *
 * Range reduction t = n + r with n = round(t), r in [-1/2, 1/2], both exact
 * (VREDUCEPS gives r, so the reduction costs 2 instructions, not 5: with
 * the polynomial's 7 and the scaling, 10 of the softmax's ~13 vector
 * operations per 16 scores, all on the FMA ports);
 * 2^r by a degree-6 polynomial with p(0) = 1 exactly (so exp2(0) == 1);
 * 2^n applied with VSCALEFPS, which rounds p * 2^n once, subnormals included.
 *
 * Error bound: the polynomial's relative error on [-1/2, 1/2] is 2.6e-9
 * (0.04 ulp; Remez fit for relative error, coefficients rounded to float).
 * With Horner's rounding the measured maximum over every float t in
 * [-160, 0] is 1.02 ulp of the result (for subnormal results 1 ulp is
 * 2^-149), against the 4 ulp the kernel contract allows.
 * t = -inf and t < -150 give exactly +0; t in (-150, -126) gives correctly
 * scaled subnormals. Never NaN for t in [-inf, 0] (a NaN t, outside the
 * contract, gives NaN).
 */
#ifndef FA_EXP2_AVX512_H
#define FA_EXP2_AVX512_H

#include <immintrin.h>

static inline __m512 fa_exp2_avx512(__m512 t) {
    /* r = t - round(t) in one instruction (VREDUCEPS, round to nearest
     * even, exact), then n = t - r = round(t) exactly. t = -inf gives
     * r = 0 and n = -inf, so no clamp is needed: 2^-inf scales to +0. */
    const __m512 r = _mm512_reduce_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 n = _mm512_sub_ps(t, r);

    /* 2^r ~ 1 + r*(c1 + r*(c2 + ... + r*c6)), Horner with FMAs. */
    __m512 p = _mm512_set1_ps(0x1.470b4ap-13f);                 /* c6 */
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.5f7276p-10f)); /* c5 */
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.3b270ep-7f));  /* c4 */
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.c6ae72p-5f));  /* c3 */
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.ebfbe2p-3f));   /* c2 */
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.62e432p-1f));   /* c1 */
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));

    /* p * 2^n with one rounding: p in [0.70, 1.42] and n <= 0 (or a few
     * ulp above 0 in the backward), so the result never overflows and
     * underflows gracefully to 0. */
    return _mm512_scalef_ps(p, n);
}

#endif
