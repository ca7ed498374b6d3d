/* Portable row kernels ("Vector" unit): max, exp2-and-sum, scale, column scales. */
#include <math.h>

#include "kernels/ref/ref.h"

float fa_row_max_ref(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

int fa_all_finite_ref(const float *x, int64_t n) {
    FA_KERNEL_CONTRACT(n >= 0);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= !isfinite(x[i]);
    return !bad;
}

float fa_exp2_sum_ref(float *x, int64_t n, float m) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* x <= m, so every term is in (0, 1]: no overflow, the sum is at most n. */
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = exp2f(x[i] - m);
        s += x[i];
    }
    return s;
}

void fa_scale_ref(float *x, int64_t n, float a) {
    FA_KERNEL_CONTRACT(n >= 0);
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}

void fa_scale_cols_ref(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero) {
    FA_KERNEL_CONTRACT(rows >= 0 && n >= 0 && ld >= n);
    for (int r = 0; r < rows; r++) {
        float *xr = x + r * ld;
        for (int64_t c = 0; c < n; c++) xr[c] = skip_zero && xr[c] == 0.0f ? 0.0f : xr[c] * s[c];
    }
}
