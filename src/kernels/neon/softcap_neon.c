/*
 * softcap_row (kernels.h) on NEON: the portable kernel's operations (see
 * softcap_ref.c: the rational tanh with FMAs, 1 from |y| = 9, and
 * 4e / (1 + e)^2 with the softmax's vector exp2 only when the derivative
 * is asked for), four lanes at a time, so tanh is bit for bit the
 * portable one's; the tail through a copy.
 */
#include <arm_neon.h>

#include "kernels/neon/exp2_neon.h"
#include "kernels/neon/neon.h"
#include "kernels/softcap_coeffs.h"

static inline void cap4(float *x, float *dcap, float32x4_t k, float32x4_t inv, float32x4_t cap) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t v = vld1q_f32(x), a = vabsq_f32(v);
    const float32x4_t y = vmulq_f32(a, inv), u = vmulq_f32(y, y);
    float32x4_t p = vfmaq_f32(vdupq_n_f32(FA_TANH_P3), vdupq_n_f32(FA_TANH_P4), u);
    float32x4_t q = vfmaq_f32(vdupq_n_f32(FA_TANH_Q3), vdupq_n_f32(FA_TANH_Q4), u);
    p = vfmaq_f32(vdupq_n_f32(FA_TANH_P2), p, u), q = vfmaq_f32(vdupq_n_f32(FA_TANH_Q2), q, u);
    p = vfmaq_f32(vdupq_n_f32(FA_TANH_P1), p, u), q = vfmaq_f32(vdupq_n_f32(FA_TANH_Q1), q, u);
    p = vfmaq_f32(one, p, u), q = vfmaq_f32(one, q, u);
    const float32x4_t t0 = vdivq_f32(vmulq_f32(y, p), q);
    /* 1 where y >= 9 or the quotient passed 1; a NaN fails both tests and
     * stays NaN, as in the reference. */
    const uint32x4_t sat = vorrq_u32(vcgeq_f32(y, vdupq_n_f32(FA_TANH_ONE)), vcgtq_f32(t0, one));
    const float32x4_t t = vbslq_f32(sat, one, t0);
    if (dcap) {
        const float32x4_t e = fa_exp2_neon(vmulq_f32(a, k)), r = vdivq_f32(one, vaddq_f32(one, e));
        vst1q_f32(dcap, vmulq_f32(vmulq_f32(vmulq_f32(vdupq_n_f32(4.0f), e), r), r));
    }
    const uint32x4_t sign = vdupq_n_u32(0x80000000u);
    vst1q_f32(x, vbslq_f32(sign, v, vmulq_f32(cap, t)));
}

void fa_softcap_row_neon(float *x, int64_t n, float cap, float *dcap) {
    FA_KERNEL_CONTRACT(n >= 0 && cap > 0.0f);
    const float32x4_t k = vdupq_n_f32(-2.0f * 1.4426950408889634f / cap), inv = vdupq_n_f32(1.0f / cap);
    const float32x4_t c = vdupq_n_f32(cap);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) cap4(x + j, dcap ? dcap + j : NULL, k, inv, c);
    if (j < n) {
        float tx[4] = {0}, td[4];
        for (int64_t t = 0; t < n - j; t++) tx[t] = x[j + t];
        cap4(tx, dcap ? td : NULL, k, inv, c);
        for (int64_t t = 0; t < n - j; t++) {
            x[j + t] = tx[t];
            if (dcap) dcap[j + t] = td[t];
        }
    }
}
