/* Portable softcap of a row: the definition of softcap_row (kernels.h).
 * tanh(y) = (1 - e) / (1 + e), e = 2^(-2 |y| log2 e) in (0, 1], except
 * below |y| = 1/8, where 1 - e cancels (a logit far under a large cap lost
 * digits in proportion to cap / |x|) and tanh is its odd series to y^7 (the
 * next term is 1.3e-9 of it). 1 - tanh^2 is 4e / (1 + e)^2, which does
 * not cancel where the cap saturates. */
#include <math.h>

#include "kernels/ref/ref.h"

void fa_softcap_row_ref(float *x, int64_t n, float cap, float *dcap) {
    FA_KERNEL_CONTRACT(n >= 0 && cap > 0.0f);
    const float k = -2.0f * 1.4426950408889634f / cap, inv = 1.0f / cap;
    for (int64_t j = 0; j < n; j++) {
        const float a = fabsf(x[j]), e = exp2f(a * k);
        const float y = a * inv, y2 = y * y, r = 1.0f / (1.0f + e);
        const float series = y * (1.0f + y2 * (-1.0f / 3.0f + y2 * (2.0f / 15.0f + y2 * (-17.0f / 315.0f))));
        const float t = y < 0.125f ? series : (1.0f - e) * r;
        if (dcap) dcap[j] = 4.0f * e * r * r;
        x[j] = copysignf(cap * t, x[j]);
    }
}
