/*
 * exp2 of a vector of floats for the softmax, SVE, any vector length:
 * t = x - max, so t <= 0 (a few ulp above 0 in the backward).
 *
 * The reduction and polynomial of exp2_neon.h (n = round(t) by FRINTN,
 * r = t - n exact, the degree-6 polynomial with p(0) = 1), but 2^n is
 * applied with FSCALE, which rounds p * 2^n once, subnormals included, as
 * AVX-512's VSCALEFPS does. t is clamped at -160 first so that -inf gives
 * r = 0, not NaN (FMAX keeps a NaN t NaN); -inf and t < -150 give +0.
 * Inactive lanes of pg are computed on but never read.
 */
#ifndef FA_EXP2_SVE_H
#define FA_EXP2_SVE_H

#include <arm_sve.h>

static inline svfloat32_t fa_exp2_sve(svbool_t pg, svfloat32_t t) {
    t = svmax_n_f32_x(pg, t, -160.0f);
    const svfloat32_t n = svrintn_f32_x(pg, t);
    const svfloat32_t r = svsub_f32_x(pg, t, n);
    svfloat32_t p = svdup_n_f32(0x1.470b4ap-13f);                  /* c6 */
    p = svmad_n_f32_x(pg, p, r, 0x1.5f7276p-10f);                  /* c5 */
    p = svmad_n_f32_x(pg, p, r, 0x1.3b270ep-7f);                   /* c4 */
    p = svmad_n_f32_x(pg, p, r, 0x1.c6ae72p-5f);                   /* c3 */
    p = svmad_n_f32_x(pg, p, r, 0x1.ebfbe2p-3f);                   /* c2 */
    p = svmad_n_f32_x(pg, p, r, 0x1.62e432p-1f);                   /* c1 */
    p = svmad_n_f32_x(pg, p, r, 1.0f);
    return svscale_f32_x(pg, p, svcvt_s32_f32_x(pg, n));
}

#endif
