/* The header's rule for non-finite inputs, as the references apply it: in
 * every product 0 times anything (Inf, NaN) is 0, and a row whose scores
 * hold a NaN, or whose largest score is +Inf, gives NaN. */
#ifndef FA_REFERENCE_RULE_REF_H
#define FA_REFERENCE_RULE_REF_H

#include <stdint.h>

static inline double fa_ref_mul(double a, double b) { return a == 0.0 || b == 0.0 ? 0.0 : a * b; }

static inline double fa_ref_dot(const double *x, const double *y, int64_t n) {
    double acc = 0.0;
    for (int64_t c = 0; c < n; c++) acc += fa_ref_mul(x[c], y[c]);
    return acc;
}

#endif
