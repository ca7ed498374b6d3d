/*
 * Non-finite inputs (the rule in flashattn.h: 0 times anything is 0 in
 * every product, so a key a row does not see, whose weight is 0, gives the
 * row nothing whatever its K and V hold).
 *
 * The fast kernels compute IEEE products, where 0 * Inf and 0 * NaN are
 * NaN. Instead of testing every term, the drivers run fast and verify: a
 * term that the rule leaves out but IEEE turned into NaN stays NaN through
 * every later sum and scale, so an accumulator that comes out finite
 * already holds what the rule gives. Only work whose accumulators are not
 * all finite (there was a NaN or Inf in its inputs) is redone, on the
 * careful table: the same table with its products replaced by portable
 * ones that leave out terms with a zero factor (kernels/ref/gemm_skip_ref.c).
 */
#ifndef FA_DRIVER_CAREFUL_H
#define FA_DRIVER_CAREFUL_H

#include <math.h>

#include "kernels/ref/ref.h"

static inline fa_kernels fa_careful_kernels(const fa_kernels *fast) {
    fa_kernels k = *fast; /* the same mr and nr: the packed layouts stay valid */
    k.gemm = fa_gemm_skip_ref;
    k.gemm_nt = fa_gemm_nt_skip_ref;
    k.gemm_rows = fa_gemm_rows_skip_ref;
    k.gemm_bf16 = fa_gemm_bf16_skip_ref;
    k.careful = 1;
    return k;
}

/* The online softmax's state of rows [0, rows) (acc rows ld apart, d
 * columns; running max m, sum l): whether it is what the rule gives. A row
 * that saw no key (l = 0) is ignored: its acc is never read. */
static inline int fa_softmax_rows_finite(const fa_kernels *kern, const float *acc, int64_t ld, int64_t d,
                                         const float *m, const float *l, int rows) {
    for (int r = 0; r < rows; r++)
        if (l[r] != 0.0f && (!isfinite(l[r]) || !isfinite(m[r]) || !kern->all_finite(acc + r * ld, d)))
            return 0;
    return 1;
}

/* a * b under the rule */
static inline float fa_careful_mul(float a, float b) { return a == 0.0f || b == 0.0f ? 0.0f : a * b; }

#endif
