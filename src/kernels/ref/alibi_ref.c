/* Portable ALiBi term of a row: the definition of alibi_row (kernels.h).
 * The distance a - i is exact while below 2^24 (a and i are integers) and
 * within half an ulp of itself past it, as a logit's own rounding is. */
#include <math.h>

#include "kernels/ref/ref.h"

void fa_alibi_row_ref(float *x, int64_t n, float a, float slope) {
    FA_KERNEL_CONTRACT(n >= 0 && n <= (INT64_C(1) << 24) && a == floorf(a));
    for (int32_t i = 0; i < (int32_t)n; i++) {
        const float dist = fabsf(a - (float)i), term = slope * dist;
        x[i] = x[i] - term;
    }
}
