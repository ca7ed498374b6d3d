/*
 * NEON row kernels (the "Vector" unit): max, exp2-and-sum, scale.
 * Contract (kernels.h): rows of any length n >= 0, any alignment; 4 floats
 * per vector. The last n % 4 elements go through the scalar reference
 * formula (row_max, scale: bit-identical) or a -inf padded vector
 * (exp2_sum: the same exp2 on every element).
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/neon/exp2_neon.h"
#include "kernels/neon/neon.h"

float fa_row_max_neon(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* FMAXNM returns the number when the other operand is a quiet NaN, so
     * NaNs are skipped as the reference's (x > m ? x : m) skips them. Four
     * accumulators hide the latency of the max chain. */
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    float32x4_t m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = vmaxnmq_f32(vld1q_f32(x + i), m0);
        m1 = vmaxnmq_f32(vld1q_f32(x + i + 4), m1);
        m2 = vmaxnmq_f32(vld1q_f32(x + i + 8), m2);
        m3 = vmaxnmq_f32(vld1q_f32(x + i + 12), m3);
    }
    for (; i + 4 <= n; i += 4) m0 = vmaxnmq_f32(vld1q_f32(x + i), m0);
    float m = vmaxnmvq_f32(vmaxnmq_f32(vmaxnmq_f32(m0, m1), vmaxnmq_f32(m2, m3)));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    /* -0 and +0 compare equal, and the reference keeps the first one it
     * meets; lanes lose that order, so find it again (rare: max is 0). */
    if (m == 0.0f)
        for (i = 0; i < n; i++)
            if (x[i] == 0.0f) return x[i];
    return m;
}

float fa_exp2_sum_neon(float *x, int64_t n, float m) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* Four sums so consecutive vectors' additions do not wait on each
     * other. Elements past a grain of trailing -inf add exact zeros to
     * them, which is what keeps the contract's grain rule. */
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t e0 = fa_exp2_neon(vsubq_f32(vld1q_f32(x + i), vm));
        const float32x4_t e1 = fa_exp2_neon(vsubq_f32(vld1q_f32(x + i + 4), vm));
        const float32x4_t e2 = fa_exp2_neon(vsubq_f32(vld1q_f32(x + i + 8), vm));
        const float32x4_t e3 = fa_exp2_neon(vsubq_f32(vld1q_f32(x + i + 12), vm));
        vst1q_f32(x + i, e0), vst1q_f32(x + i + 4, e1);
        vst1q_f32(x + i + 8, e2), vst1q_f32(x + i + 12, e3);
        s0 = vaddq_f32(s0, e0), s1 = vaddq_f32(s1, e1);
        s2 = vaddq_f32(s2, e2), s3 = vaddq_f32(s3, e3);
    }
    for (; i < n; i += 4) {
        /* A partial vector is padded with -inf, whose exp2 is 0: the sum
         * is unchanged and only the real elements are copied back. */
        float buf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        const int64_t len = n - i < 4 ? n - i : 4;
        memcpy(buf, x + i, (size_t)len * sizeof(float));
        const float32x4_t e = fa_exp2_neon(vsubq_f32(vld1q_f32(buf), vm));
        vst1q_f32(buf, e);
        memcpy(x + i, buf, (size_t)len * sizeof(float));
        s0 = vaddq_f32(s0, e);
    }
    return vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
}

void fa_scale_neon(float *x, int64_t n, float a) {
    FA_KERNEL_CONTRACT(n >= 0);
    const float32x4_t va = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), va));
    for (; i < n; i++) x[i] *= a;
}
