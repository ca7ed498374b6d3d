/* The score modifiers for the references, straight from the header's
 * formulas rather than from driver/score.h: the tests compare the
 * library's score stage with this. In double; the plain f32 yardsticks
 * round the result to float. */
#ifndef FA_REFERENCE_SCORE_REF_H
#define FA_REFERENCE_SCORE_REF_H

#include <math.h>

#include "core/dtype.h"
#include "core/problem.h"

/* Element (b, h, i, j) of a bias or mask array, broadcast dimensions at 0. */
static inline const char *fa_ref_scores_at(const flashattn_scores *t, size_t elem, int64_t b,
                                           int64_t h, int64_t i, int64_t j) {
    const int64_t at = (t->batch > 1 ? b : 0) * t->stride_batch + (t->heads > 1 ? h : 0) * t->stride_head +
                       (t->seq_q > 1 ? i : 0) * t->stride_q + (t->seq_k > 1 ? j : 0) * t->stride_k;
    return (const char *)t->data + (size_t)at * elem;
}

/* The logit of query i, key j of head h of sequence b from its scaled
 * s = scale * q.k: softcap, then ALiBi, then the bias; -inf where the
 * boolean mask hides the key. *dcap (when not NULL) gets the softcap's
 * derivative at s (1 without one). */
static inline double fa_ref_score(const fa_problem *pb, const flashattn_params *p, int64_t b,
                                  int64_t h, int64_t i, int64_t j, double s, double *dcap) {
    double der = 1.0;
    if (p->softcap > 0.0f) {
        const double y = s / (double)p->softcap, c = cosh(y);
        s = (double)p->softcap * tanh(y);
        /* 1 - tanh^2 as 1 / cosh^2: the difference cancels to 0 from |y| of
         * about 19 in double, where the kernels' 4e / (1 + e)^2 (e = exp(-2|y|))
         * still has the true, tiny value */
        der = 1.0 / (c * c);
    }
    if (p->alibi_slopes) {
        const int64_t diag = pb->top_left ? 0 : pb->seq_k - pb->seq_q;
        s -= (double)p->alibi_slopes[b * p->alibi_batch_stride + h] * fabs((double)(i + diag - j));
    }
    if (p->bias) {
        const flashattn_dtype dt = p->bias->dtype;
        const double bv = fa_widen(fa_ref_scores_at(p->bias, (size_t)fa_dtype_bytes(dt), b, h, i, j), dt, 0);
        s = bv == -INFINITY ? -INFINITY : s + bv; /* -inf hides the key, even a NaN logit */
    }
    if (dcap) *dcap = der;
    if (p->mask && !*fa_ref_scores_at(p->mask, 1, b, h, i, j)) return -INFINITY;
    return s;
}

/* Head h's sink logit, -inf without sinks. */
static inline double fa_ref_sink(const flashattn_params *p, int64_t h) {
    return p->sinks ? (double)p->sinks[h] : -INFINITY;
}

#endif
