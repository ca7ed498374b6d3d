/* The score modifiers for the references, straight from the header's
 * formulas rather than from driver/score.h: the tests compare the
 * library's score stage with this. In double; the plain f32 yardsticks
 * round the result to float. */
#ifndef FA_REFERENCE_SCORE_REF_H
#define FA_REFERENCE_SCORE_REF_H

#include <math.h>

#include "core/problem.h"

/* The logit of query i, key j of head h of sequence b from its scaled
 * s = scale * q.k: softcap, then ALiBi. *dcap (when not NULL) gets the
 * softcap's derivative at s (1 without one). */
static inline double fa_ref_score(const fa_problem *pb, const flashattn_params *p, int64_t b,
                                  int64_t h, int64_t i, int64_t j, double s, double *dcap) {
    double der = 1.0;
    if (p->softcap > 0.0f) {
        const double t = tanh(s / (double)p->softcap);
        s = (double)p->softcap * t;
        der = 1.0 - t * t;
    }
    if (p->alibi_slopes) {
        const int64_t diag = pb->top_left ? 0 : pb->seq_k - pb->seq_q;
        s -= (double)p->alibi_slopes[b * p->alibi_batch_stride + h] * fabs((double)(i + diag - j));
    }
    if (dcap) *dcap = der;
    return s;
}

/* Head h's sink logit, -inf without sinks. */
static inline double fa_ref_sink(const flashattn_params *p, int64_t h) {
    return p->sinks ? (double)p->sinks[h] : -INFINITY;
}

#endif
