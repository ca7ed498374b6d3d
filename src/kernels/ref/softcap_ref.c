/* Portable softcap of a row: the definition of softcap_row (kernels.h).
 *
 * tanh(y) = y P(y^2) / Q(y^2) for |y| < 9, P and Q of degree 4 with
 * positive coefficients, fitted for the least relative error on [0, 9]
 * (2.1e-8 in exact arithmetic, 0.35 ulp): every Horner step adds positive
 * terms, so nothing cancels, and Q >= 1 has no pole. Evaluated with FMAs
 * (fmaf here, so the AVX2 kernel, doing the same operations, is bit for
 * bit this one), the error is below 6 ulp of float over every float
 * y in [0, 9] (5.94 ulp at most, measured over every one; tests/test_kernels.c
 * checks every 64th on each table). From |y| = 9,
 * where tanh is 1 - 3e-8, tanh is 1. No exp and no branch on y: the
 * forward's softcap costs about a division a score, not an exp.
 *
 * The derivative 1 - tanh^2 is 4e / (1 + e)^2, e = 2^(-2 |y| log2 e),
 * which does not cancel where the cap saturates (1 - t^2 from the rounded
 * t would lose everything there). */
#include <math.h>

#include "kernels/ref/ref.h"
#include "kernels/softcap_coeffs.h"

void fa_softcap_row_ref(float *x, int64_t n, float cap, float *dcap) {
    FA_KERNEL_CONTRACT(n >= 0 && cap > 0.0f);
    const float k = -2.0f * 1.4426950408889634f / cap, inv = 1.0f / cap;
    for (int64_t j = 0; j < n; j++) {
        const float a = fabsf(x[j]), y = a * inv, u = y * y;
        float p = FA_TANH_P4, q = FA_TANH_Q4;
        p = fmaf(p, u, FA_TANH_P3), q = fmaf(q, u, FA_TANH_Q3);
        p = fmaf(p, u, FA_TANH_P2), q = fmaf(q, u, FA_TANH_Q2);
        p = fmaf(p, u, FA_TANH_P1), q = fmaf(q, u, FA_TANH_Q1);
        p = fmaf(p, u, 1.0f), q = fmaf(q, u, 1.0f);
        const float v = y * p / q; /* NaN stays NaN: not fminf, which drops it */
        const float t = y >= FA_TANH_ONE || v > 1.0f ? 1.0f : v;
        if (dcap) {
            const float e = exp2f(a * k), r = 1.0f / (1.0f + e);
            dcap[j] = 4.0f * e * r * r;
        }
        x[j] = copysignf(cap * t, x[j]);
    }
}
