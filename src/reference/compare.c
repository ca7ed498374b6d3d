/* Max-norm error measures; a NaN result must never look like a pass, so
 * every comparison is written to let NaN through as the maximum. */
#include "reference/compare.h"

#include <math.h>

#include "reference/attn_f64.h"

double fa_max_abs_err(const flashattn_tensor *t, const double *ref) {
    double err = 0.0;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++) {
                    double got = fa_tensor_get(t, b, s, h, c);
                    double want = ref[((b * t->seqlen + s) * t->heads + h) * t->head_dim + c];
                    double e = fabs(got - want);
                    if (!(e <= err)) err = e;
                }
    return err;
}

double fa_lse_err(const float *lse, const double *ref, size_t n, int *inf_ok) {
    double err = 0.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) && ref[i] < 0) {
            ok &= isinf(lse[i]) && lse[i] < 0;
        } else {
            double e = fabs(lse[i] - ref[i]);
            if (!(e <= err)) err = e;
        }
    }
    *inf_ok = ok;
    return err;
}

double fa_max_abs(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(x[i]) <= m)) m = fabs(x[i]);
    return m;
}

double fa_rms_err(const flashattn_tensor *t, const double *ref) {
    double sum = 0.0, n = 0.0;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++) {
                    double e = fa_tensor_get(t, b, s, h, c) -
                               ref[((b * t->seqlen + s) * t->heads + h) * t->head_dim + c];
                    sum += e * e, n += 1.0;
                }
    return n > 0 ? sqrt(sum / n) : 0.0;
}

double fa_rms_diff(const double *a, const double *ref, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (a[i] - ref[i]) * (a[i] - ref[i]);
    return n ? sqrt(sum / (double)n) : 0.0;
}
