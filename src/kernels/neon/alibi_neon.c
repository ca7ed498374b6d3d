/*
 * alibi_row (kernels.h) on NEON: the portable kernel's operations, four
 * lanes at a time (a - i from i converted exactly, the product and the
 * difference each rounded, no FMA), so the bits are the portable
 * kernel's; the tail through a copy.
 */
#include <arm_neon.h>
#include <math.h>

#include "kernels/neon/neon.h"

static inline void alibi4(float *x, int32x4_t i, float32x4_t a, float32x4_t slope) {
    const float32x4_t dist = vabsq_f32(vsubq_f32(a, vcvtq_f32_s32(i)));
    vst1q_f32(x, vsubq_f32(vld1q_f32(x), vmulq_f32(slope, dist)));
}

void fa_alibi_row_neon(float *x, int64_t n, float a, float slope) {
    FA_KERNEL_CONTRACT(n >= 0 && n <= (INT64_C(1) << 24) && a == floorf(a));
    const float32x4_t av = vdupq_n_f32(a), sv = vdupq_n_f32(slope);
    const int32_t first[4] = {0, 1, 2, 3};
    int32x4_t i = vld1q_s32(first);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4, i = vaddq_s32(i, vdupq_n_s32(4))) alibi4(x + j, i, av, sv);
    if (j < n) {
        float t[4] = {0};
        for (int64_t c = 0; c < n - j; c++) t[c] = x[j + c];
        alibi4(t, i, av, sv);
        for (int64_t c = 0; c < n - j; c++) x[j + c] = t[c];
    }
}
