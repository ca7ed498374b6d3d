/*
 * The online-softmax step of one row of S, shared by the forward's q-blocks
 * and decode's work items (the backward recomputes P from the LSE instead).
 */
#ifndef FA_SOFTMAX_ROW_H
#define FA_SOFTMAX_ROW_H

#include <math.h>
#include <string.h>

#include "driver/problem.h"
#include "kernels/kernels.h"

/* The online-softmax step in two halves, so that callers can take the
 * maxima of a strip of rows before any of its exponentials: the rows'
 * max and exp2 chains then overlap (row_max and exp2_sum of 12 rows of
 * 128 keys in L1: 0.73 -> 0.60 TSC cycles a score; 256 keys: 0.58 ->
 * 0.53; 512: level).
 *
 * First half: the row's base-2 logits for keys [j0, j0 + n), when masked
 * set to -inf outside the row's visible keys [lo, end); returns their
 * max. */
static inline float fa_softmax_row_max(const fa_kernels *kern, float *row, int64_t j0, int64_t n,
                                       int masked, int64_t lo, int64_t end) {
    if (masked) {
        for (int64_t j = 0; j < n && j0 + j < lo; j++) row[j] = -INFINITY;
        for (int64_t j = end - j0 > 0 ? end - j0 : 0; j < n; j++) row[j] = -INFINITY;
    }
    return kern->row_max(row, n);
}

/* Second half, with bmax the first half's result: S turned into P in place,
 *   m' = max(m, bmax);  P = exp2(S - m');  l = l * 2^(m - m') + rowsum P;
 *   acc[0..acc_n) *= 2^(m - m'), unless acc holds nothing yet (first) or
 *   m did not change.
 * A row that has seen no visible key yet gets P = 0 and keeps m = -inf
 * (exp2(-inf - -inf) would be NaN). */
static inline void fa_softmax_row_exp(const fa_kernels *kern, float *row, int64_t n, float bmax,
                                      float *m, float *l, float *acc, int64_t acc_n, int first) {
    const float mnew = bmax > *m ? bmax : *m;
    if (mnew == -INFINITY) {
        memset(row, 0, (size_t)n * sizeof(float));
        return;
    }
    /* 0 when m was -inf, 1 when m did not change: exactly what exp2f
     * gives there, without the call (short rows feel it) */
    const float alpha = *m == -INFINITY ? 0.0f : *m == mnew ? 1.0f : exp2f(*m - mnew);
    *l = *l * alpha + kern->exp2_sum(row, n, mnew);
    if (!first && alpha != 1.0f) kern->scale(acc, acc_n, alpha);
    *m = mnew;
}

#endif
