/* FP64 reference gradients (and the double-input forward they differentiate). */
#include "reference/attn_bwd_f64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "reference/attn_f64.h"
#include "reference/dropout_ref.h"
#include "reference/keys_ref.h"
#include "reference/rule_ref.h"
#include "reference/score_ref.h"

static flashattn_status problem(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_params *user,
                                fa_problem *pb, double *scale, flashattn_params *pp) {
    flashattn_params p;
    flashattn_status s = fa_read_params(user, &p);
    *pp = p;
    if (s) return s;
    /* q doubles as o for validation: only o's shape matters there. */
    flashattn_tensor oshape = flashattn_tensor_bshd((void *)q->data, q->dtype, q->batch, q->seqlen, q->heads,
                                                    v->head_dim);
    if ((s = fa_validate_fwd(q, k, v, &oshape, NULL, &p, pb))) return s;
    *scale = p.scale != 0.0f ? (double)p.scale : 1.0 / sqrt((double)pb->head_dim);
    return FLASHATTN_OK;
}

/* Row i of head h's probabilities over its visible keys [lo, end) into
 * pr[lo..end) (the sink, if any, in the denominator), the softcap's
 * derivative into dcap[lo..end); returns 0 when the row sees no key. */
static int softmax_row(const fa_problem *pb, const flashattn_params *p, double scale,
                       const double *qi, const double *kd, int64_t b, int64_t h, int64_t i,
                       int64_t lo, int64_t end, double *pr, double *dcap) {
    const int64_t d = pb->head_dim, hk = h / pb->group;
    double mx = fa_ref_sink(p, h), sum = 0.0;
    int nan = 0;
    for (int64_t j = lo; j < end; j++) {
        const double *kj = kd + ((b * pb->seq_k + j) * pb->heads_kv + hk) * d;
        pr[j] = fa_ref_score(pb, p, b, h, i, j, fa_ref_dot(qi, kj, d) * scale, &dcap[j]);
        nan |= isnan(pr[j]);
        if (pr[j] > mx) mx = pr[j];
    }
    if (nan) { /* the row is NaN; keys it does not see keep P = 0 */
        for (int64_t j = lo; j < end; j++) pr[j] = pr[j] == -INFINITY ? 0.0 : NAN;
        return 1;
    }
    if (end <= lo || mx == -INFINITY) return 0; /* -inf: every key hidden, no sink */
    if (p->sinks) sum += exp(fa_ref_sink(p, h) - mx);
    for (int64_t j = lo; j < end; j++) sum += (pr[j] = exp(pr[j] - mx));
    for (int64_t j = lo; j < end; j++) pr[j] = pr[j] == 0.0 ? 0.0 : pr[j] / sum;
    return 1;
}

flashattn_status fa_reference_fwd_f64_dbl(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_params *p,
                                          const double *qd, const double *kd, const double *vd,
                                          double *o) {
    fa_problem pb;
    flashattn_params pp;
    double scale;
    flashattn_status s = problem(q, k, v, p, &pb, &scale, &pp);
    if (s) return s;
    const int64_t d = pb.head_dim, dv = pb.head_dim_v;
    double *pr = malloc((size_t)(pb.seq_k > 0 ? pb.seq_k : 1) * sizeof(double));
    double *dcap = malloc((size_t)(pb.seq_k > 0 ? pb.seq_k : 1) * sizeof(double));
    if (!pr || !dcap) {
        free(pr), free(dcap);
        return FLASHATTN_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < pb.batch; b++)
        for (int64_t h = 0; h < pb.heads_q; h++)
            for (int64_t i = 0; i < pb.seq_q; i++) {
                const int64_t hk = h / pb.group;
                int64_t lo, end;
                fa_ref_keys(&pb, i, &lo, &end);
                const size_t row = (size_t)((b * pb.seq_q + i) * pb.heads_q + h);
                double *oi = o + row * dv;
                for (int64_t c = 0; c < dv; c++) oi[c] = 0.0;
                if (!softmax_row(&pb, &pp, scale, qd + row * d, kd, b, h, i, lo, end, pr, dcap)) continue;
                for (int64_t j = lo; j < end; j++) {
                    const double *vj = vd + ((b * pb.seq_k + j) * pb.heads_kv + hk) * dv;
                    const double pz = fa_ref_mul(pr[j], fa_ref_dropout_z(&pb, &pp, b, h, i, j));
                    for (int64_t c = 0; c < dv; c++) oi[c] += fa_ref_mul(pz, vj[c]);
                }
            }
    free(pr), free(dcap);
    return FLASHATTN_OK;
}

static flashattn_status bwd_dbl(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_params *p, const double *qd,
                                const double *kd, const double *vd, const double *dod, double *dq,
                                double *dk, double *dv, double *dbias) {
    fa_problem pb;
    flashattn_params pp;
    double scale;
    flashattn_status s = problem(q, k, v, p, &pb, &scale, &pp);
    if (s) return s;
    const int64_t d = pb.head_dim, dvd = pb.head_dim_v;
    const size_t nk = (size_t)(pb.batch * pb.seq_k * pb.heads_kv * d), nv = (size_t)(pb.batch * pb.seq_k * pb.heads_kv * dvd);
    size_t sk = (size_t)(pb.seq_k > 0 ? pb.seq_k : 1);
    double *pr = malloc(sk * sizeof(double)), *dp = malloc(sk * sizeof(double));
    double *dcap = malloc(sk * sizeof(double));
    if (!pr || !dp || !dcap) {
        free(pr), free(dp), free(dcap);
        return FLASHATTN_ERR_OUT_OF_MEMORY;
    }
    memset(dk, 0, nk * sizeof(double));
    memset(dv, 0, nv * sizeof(double));
    if (dbias) memset(dbias, 0, (size_t)(pb.batch * pb.heads_q * pb.seq_q * pb.seq_k) * sizeof(double));
    for (int64_t b = 0; b < pb.batch; b++)
        for (int64_t h = 0; h < pb.heads_q; h++)
            for (int64_t i = 0; i < pb.seq_q; i++) {
                const int64_t hk = h / pb.group;
                int64_t lo, end;
                fa_ref_keys(&pb, i, &lo, &end);
                const size_t row = (size_t)((b * pb.seq_q + i) * pb.heads_q + h);
                const double *qi = qd + row * d, *doi = dod + row * dvd;
                double *dqi = dq + row * d;
                for (int64_t c = 0; c < d; c++) dqi[c] = 0.0;
                if (!softmax_row(&pb, &pp, scale, qi, kd, b, h, i, lo, end, pr, dcap)) continue;
                /* with dropout Z: dP' = dO V^T is the gradient of P Z, so
                 * dL/dP = Z dP', D = sum P Z dP', dS = P (Z dP' - D) */
                double D = 0.0;
                for (int64_t j = lo; j < end; j++) {
                    const double *vj = vd + ((b * pb.seq_k + j) * pb.heads_kv + hk) * dvd;
                    dp[j] = fa_ref_mul(fa_ref_dot(doi, vj, dvd), fa_ref_dropout_z(&pb, &pp, b, h, i, j));
                    D += fa_ref_mul(pr[j], dp[j]);
                }
                for (int64_t j = lo; j < end; j++) {
                    const size_t krow = (size_t)(((b * pb.seq_k + j) * pb.heads_kv + hk) * d);
                    const size_t vrow = (size_t)(((b * pb.seq_k + j) * pb.heads_kv + hk) * dvd);
                    const double dlogit = fa_ref_mul(pr[j], dp[j] - D);
                    const double pz = fa_ref_mul(pr[j], fa_ref_dropout_z(&pb, &pp, b, h, i, j));
                    if (dbias) dbias[((b * pb.heads_q + h) * pb.seq_q + i) * pb.seq_k + j] = dlogit;
                    const double ds = fa_ref_mul(dlogit, dcap[j]);
                    for (int64_t c = 0; c < d; c++) {
                        dqi[c] += scale * fa_ref_mul(ds, kd[krow + c]);
                        dk[krow + c] += scale * fa_ref_mul(ds, qi[c]);
                    }
                    for (int64_t c = 0; c < dvd; c++) dv[vrow + c] += fa_ref_mul(pz, doi[c]);
                }
            }
    free(pr), free(dp), free(dcap);
    return FLASHATTN_OK;
}

flashattn_status fa_reference_bwd_f64_dbl(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_params *p,
                                          const double *qd, const double *kd, const double *vd,
                                          const double *dod, double *dq, double *dk, double *dv) {
    return bwd_dbl(q, k, v, p, qd, kd, vd, dod, dq, dk, dv, NULL);
}

flashattn_status fa_reference_dbias_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                        const flashattn_tensor *v, const flashattn_tensor *dout,
                                        const flashattn_params *p, double *dbias) {
    const size_t nq = (size_t)(q->batch * q->seqlen * q->heads * q->head_dim);
    const size_t nk = (size_t)(k->batch * k->seqlen * k->heads * k->head_dim);
    const size_t nv = (size_t)(v->batch * v->seqlen * v->heads * v->head_dim);
    double *qd = fa_tensor_widen(q), *kd = fa_tensor_widen(k), *vd = fa_tensor_widen(v);
    double *dod = fa_tensor_widen(dout), *dq = malloc((nq ? nq : 1) * sizeof(double));
    double *dk = malloc((nk ? nk : 1) * sizeof(double)), *dv = malloc((nv ? nv : 1) * sizeof(double));
    flashattn_status s = qd && kd && vd && dod && dq && dk && dv
                             ? bwd_dbl(q, k, v, p, qd, kd, vd, dod, dq, dk, dv, dbias)
                             : FLASHATTN_ERR_OUT_OF_MEMORY;
    free(qd), free(kd), free(vd), free(dod), free(dq), free(dk), free(dv);
    return s;
}

flashattn_status fa_reference_bwd_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                      const flashattn_tensor *v, const flashattn_tensor *dout,
                                      const flashattn_params *p, double *dq, double *dk,
                                      double *dv) {
    fa_problem pb;
    flashattn_params pp;
    double scale;
    flashattn_status s = problem(q, k, v, p, &pb, &scale, &pp);
    if (s) return s;
    if (!dout) return FLASHATTN_ERR_NULL_POINTER;
    if (dout->batch != q->batch || dout->seqlen != q->seqlen || dout->heads != q->heads ||
        dout->head_dim != v->head_dim)
        return FLASHATTN_ERR_BAD_SHAPE;
    double *qd = fa_tensor_widen(q), *kd = fa_tensor_widen(k), *vd = fa_tensor_widen(v);
    double *dod = fa_tensor_widen(dout);
    s = qd && kd && vd && dod
            ? fa_reference_bwd_f64_dbl(q, k, v, p, qd, kd, vd, dod, dq, dk, dv)
            : FLASHATTN_ERR_OUT_OF_MEMORY;
    free(qd), free(kd), free(vd), free(dod);
    return s;
}

flashattn_status fa_reference_dsinks_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                         const flashattn_tensor *v, const flashattn_tensor *dout,
                                         const flashattn_params *p, double *dsinks) {
    fa_problem pb;
    flashattn_params pp;
    double scale;
    flashattn_status s = problem(q, k, v, p, &pb, &scale, &pp);
    if (s) return s;
    if (!pp.sinks || !dout) return FLASHATTN_ERR_NULL_POINTER;
    const int64_t d = pb.head_dim_v; /* O's and dO's */
    const size_t n = (size_t)(pb.batch * pb.seq_q * pb.heads_q * d);
    double *o = malloc((n ? n : 1) * sizeof(double));
    double *lse = malloc((size_t)(pb.batch * pb.heads_q * pb.seq_q + 1) * sizeof(double));
    double *dod = fa_tensor_widen(dout);
    if (!o || !lse || !dod || (s = fa_reference_fwd_f64(q, k, v, p, o, lse))) {
        free(o), free(lse), free(dod);
        return s ? s : FLASHATTN_ERR_OUT_OF_MEMORY;
    }
    for (int64_t h = 0; h < pb.heads_q; h++) {
        double sum = 0.0;
        for (int64_t b = 0; b < pb.batch; b++)
            for (int64_t i = 0; i < pb.seq_q; i++) {
                const size_t row = (size_t)(((b * pb.seq_q + i) * pb.heads_q + h) * d);
                const double D = fa_ref_dot(dod + row, o + row, d);
                sum += exp((double)pp.sinks[h] - lse[(b * pb.heads_q + h) * pb.seq_q + i]) * D;
            }
        dsinks[h] = -sum;
    }
    free(o), free(lse), free(dod);
    return FLASHATTN_OK;
}
