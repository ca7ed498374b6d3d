/*
 * The online softmax, shared by the forward's q-blocks and decode's work
 * items (the backward recomputes P from the LSE instead):
 *
 *   per kv-step:  m' = max(m, rowmax S);  P = exp2(S - m');
 *                 l = l * 2^(m - m') + rowsum P;  acc *= 2^(m - m')
 *   at the end:   O = acc / l;  LSE = ln 2 * (m + log2 l)
 *
 * The step is split so that callers can take the maxima of a strip of rows
 * (kern->row_max after the score stage) before any of its exponentials:
 * the rows' max and exp2 chains then overlap.
 */
#ifndef FA_DRIVER_SOFTMAX_H
#define FA_DRIVER_SOFTMAX_H

#include <math.h>
#include <string.h>

#include "core/size.h"
#include "kernels/kernels.h"

#define FA_LN2 0.69314718055994530942

/* Whether x[0..n) holds a NaN. */
static inline int fa_has_nan(const float *x, int64_t n) {
    int nan = 0;
    for (int64_t i = 0; i < n; i++) nan |= x[i] != x[i];
    return nan;
}

/* The step, with bmax the row's max over this step's scores: S turned
 * into P in place,
 *   m' = max(m, bmax);  P = exp2(S - m');  l = l * 2^(m - m') + rowsum P;
 *   acc[0..acc_n) *= 2^(m - m'), unless acc holds nothing yet (first) or
 *   m did not change.
 * A row that has seen no visible key yet gets P = 0 and keeps m = -inf
 * (exp2(-inf - -inf) would be NaN). row_max need not see NaNs (kernels.h):
 * a NaN score next to finite ones reaches l through exp2_sum, and one
 * among only hidden (-inf) scores is caught here, where the row would
 * otherwise pass for one that sees no key. Such a row, and any row whose
 * m is NaN, becomes NaN: m = l = P = NaN. */
static inline void fa_softmax_row_exp(const fa_kernels *kern, float *row, int64_t n, float bmax,
                                      float *m, float *l, float *acc, int64_t acc_n, int first) {
    const float mnew = bmax > *m ? bmax : *m;
    if (mnew == -INFINITY && !fa_has_nan(row, n)) {
        memset(row, 0, (size_t)n * sizeof(float));
        return;
    }
    if (mnew != mnew || mnew == -INFINITY) {
        for (int64_t i = 0; i < n; i++) row[i] = NAN;
        *m = *l = NAN;
        return;
    }
    /* 0 when m was -inf, 1 when m did not change: exactly what exp2f
     * gives there, without the call (short rows feel it) */
    const float alpha = *m == -INFINITY ? 0.0f : *m == mnew ? 1.0f : exp2f(*m - mnew);
    *l = *l * alpha + kern->exp2_sum(row, n, mnew);
    if (!first && alpha != 1.0f) kern->scale(acc, acc_n, alpha);
    *m = mnew;
}

/* The end of a row: O = acc / l into orow (dtype odt, d elements) and, when
 * lse is not NULL, *lse = ln 2 * (m + log2 l). A row that saw no key (l = 0)
 * gets O = 0 and LSE = -inf; acc is then cleared (it may hold garbage). The
 * log2 runs in double and only when asked: it costs as much as a short
 * row's softmax.
 * An attention sink (sink2, base 2, in double so that a row with no key
 * gets LSE = sink exactly; -inf: none) joins the denominator:
 * l += 2^(sink2 - m), in double from the larger of the two exponents, so
 * a sink far above every score gives O = 0 and LSE = sink, never inf. */
static inline void fa_softmax_finalize_row(const fa_kernels *kern, void *orow, flashattn_dtype odt,
                                           float *acc, int64_t d, float m, float l, float *lse,
                                           double sink2) {
    if (l == 0.0f) {
        memset(acc, 0, (size_t)d * sizeof(float));
        kern->store(orow, odt, acc, d, 1.0f);
        if (lse) *lse = sink2 == -INFINITY ? -INFINITY : (float)(FA_LN2 * (double)sink2);
        return;
    }
    if (sink2 != -INFINITY) {
        const double top = m > sink2 ? m : sink2;
        const double sum = (double)l * exp2((double)m - top) + exp2((double)sink2 - top);
        kern->store(orow, odt, acc, d, (float)(exp2((double)m - top) / sum));
        if (lse) *lse = (float)(FA_LN2 * (top + log2(sum)));
        return;
    }
    kern->store(orow, odt, acc, d, 1.0f / l);
    if (lse) *lse = (float)(FA_LN2 * ((double)m + log2((double)l)));
}

/* Long rows: acc and l are f32 chains, one term a key (acc) or a block
 * (l), and a chain stops taking terms below 2^-24 of its sum: 2^25 keys of
 * equal weight gave O = V / 2. So every FA_SUM_CHUNK keys a row's f32 state
 * is folded into double totals (at the current max m) and its chains
 * restart from 0; the totals come back at the end. A chain is then at most
 * FA_SUM_CHUNK keys long, whatever seq_k, and rows of at most FA_SUM_CHUNK
 * keys never fold: their bits are those of one chain. (FA_SUM_CHUNK is in
 * core/size.h: the planners size the totals by it.) */

/* The double totals of a strip of rows: acc [rows][ld], l, and the max m
 * (-inf: nothing folded yet) they are scaled to. */
typedef struct {
    double *acc, *l;
    float *m;
    int64_t ld;
} fa_softmax_totals;

static inline void fa_softmax_totals_clear(const fa_softmax_totals *t, int rows) {
    for (int r = 0; r < rows; r++) t->m[r] = -INFINITY, t->l[r] = 0.0;
}

/* Row r's acc[0..d) and l into its totals; acc and l restart at 0 (so a
 * later step may accumulate onto acc, or overwrite it). A row that has
 * seen no key yet (m = -inf) has nothing to fold. */
static inline void fa_softmax_fold(const fa_softmax_totals *t, int r, float *acc, int64_t d, float m,
                                   float *l) {
    if (m == -INFINITY) return;
    double *hi = t->acc + r * t->ld;
    const double f = t->m[r] == -INFINITY ? 0.0 : exp2((double)t->m[r] - (double)m);
    for (int64_t c = 0; c < d; c++) hi[c] = (f == 0.0 ? 0.0 : hi[c] * f) + acc[c];
    t->l[r] = (f == 0.0 ? 0.0 : t->l[r] * f) + *l;
    t->m[r] = m;
    memset(acc, 0, (size_t)d * sizeof(float));
    *l = 0.0f;
}

/* The totals back into row r's acc and l (where anything was folded),
 * for fa_softmax_finalize_row. m >= the totals' m: the max only grows. */
static inline void fa_softmax_unfold(const fa_softmax_totals *t, int r, float *acc, int64_t d, float m,
                                     float *l) {
    if (t->m[r] == -INFINITY) return;
    const double *hi = t->acc + r * t->ld, f = exp2((double)t->m[r] - (double)m);
    for (int64_t c = 0; c < d; c++) acc[c] = (float)(hi[c] * f + acc[c]);
    *l = (float)(t->l[r] * f + *l);
}

/* The base-2 sink of query head h, -inf without sinks. */
static inline double fa_sink2(const float *sinks, int64_t h) {
    return sinks ? (double)sinks[h] * 1.4426950408889634 : -INFINITY;
}

#endif
