/* Error measures against the FP64 reference, shared by the tests and
 * `flashattn check` so both judge results the same way. */
#ifndef FA_REFERENCE_COMPARE_H
#define FA_REFERENCE_COMPARE_H

#include <stddef.h>

#include "flashattn.h"

/* Max |t - ref| over every element of t (any strides) against a contiguous
 * [batch, seq, heads, head_dim] double array. NaN anywhere gives NaN. */
double fa_max_abs_err(const flashattn_tensor *t, const double *ref);

/* Max |lse - ref| over the rows where ref is finite; *inf_ok = 1 when lse
 * is -inf exactly where ref is -inf (rows that see no key). NaN gives NaN. */
double fa_lse_err(const float *lse, const double *ref, size_t n, int *inf_ok);

/* Root mean square of (t - ref) over every element of t, and of (a - ref)
 * over n doubles: where the max is a tail event (errors at the rounding
 * level), the rms is the stable measure. NaN anywhere gives NaN. */
double fa_rms_err(const flashattn_tensor *t, const double *ref);
double fa_rms_diff(const double *a, const double *ref, size_t n);

/* Max |x[i]| (the scale a relative error is measured against). */
double fa_max_abs(const double *x, size_t n);

#endif
