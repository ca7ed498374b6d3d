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

/* The row's base-2 logits for keys [j0, j0 + n), turned into P in place:
 *   when masked: -inf outside the row's visible keys [lo, end);
 *   m' = max(m, rowmax S);  P = exp2(S - m');  l = l * 2^(m - m') + rowsum P;
 *   acc[0..acc_n) *= 2^(m - m'), unless acc holds nothing yet (first) or
 *   m did not change.
 * A row that has seen no visible key yet gets P = 0 and keeps m = -inf
 * (exp2(-inf - -inf) would be NaN). */
static inline void fa_softmax_row(const fa_kernels *kern, float *row, int64_t j0, int64_t n,
                                  int masked, int64_t lo, int64_t end, float *m, float *l,
                                  float *acc, int64_t acc_n, int first) {
    if (masked) {
        for (int64_t j = 0; j < n && j0 + j < lo; j++) row[j] = -INFINITY;
        for (int64_t j = end - j0 > 0 ? end - j0 : 0; j < n; j++) row[j] = -INFINITY;
    }
    const float bmax = kern->row_max(row, n);
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
