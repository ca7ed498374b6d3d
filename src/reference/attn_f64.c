/* The FP64 reference: the textbook formula, one query row at a time. */
#include "reference/attn_f64.h"

#include <math.h>
#include <stdlib.h>

#include "api/validate.h"
#include "core/dtype.h"
#include "reference/dropout_ref.h"
#include "reference/keys_ref.h"
#include "reference/rule_ref.h"
#include "reference/score_ref.h"

double fa_tensor_get(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c) {
    int64_t off = b * t->stride_batch + s * t->stride_seq + h * t->stride_head + c;
    switch (t->dtype) {
    case FLASHATTN_F32: return ((const float *)t->data)[off];
    case FLASHATTN_F16: return fa_f16_to_f32(((const uint16_t *)t->data)[off]);
    case FLASHATTN_BF16: return fa_bf16_to_f32(((const uint16_t *)t->data)[off]);
    default: return fa_dtype_valid(t->dtype) ? fa_widen(t->data, t->dtype, off) : NAN;
    }
}

double *fa_tensor_widen(const flashattn_tensor *t) {
    const size_t n = (size_t)(t->batch * t->seqlen * t->heads * t->head_dim);
    double *x = malloc((n ? n : 1) * sizeof(double));
    if (!x) return NULL;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++)
                    x[fa_widened_at(t, b, s, h, c)] = fa_tensor_get(t, b, s, h, c);
    return x;
}

flashattn_status fa_reference_fwd_f64(const flashattn_tensor *q, const flashattn_tensor *k,
                                      const flashattn_tensor *v, const flashattn_params *user,
                                      double *o, double *lse) {
    flashattn_params p;
    fa_problem pb;
    flashattn_status s = fa_read_params(user, &p);
    if (s) return s;
    /* q doubles as o for validation: only o's shape matters there. */
    flashattn_tensor oshape = flashattn_tensor_bshd((void *)q->data, q->dtype, q->batch, q->seqlen, q->heads,
                                                    v->head_dim);
    if ((s = fa_validate_fwd(q, k, v, &oshape, NULL, &p, &pb))) return s;
    const double scale = p.scale != 0.0f ? (double)p.scale : 1.0 / sqrt((double)pb.head_dim);
    const int64_t d = pb.head_dim, dv = pb.head_dim_v;
    double *sc = malloc((size_t)(pb.seq_k > 0 ? pb.seq_k : 1) * sizeof(double));
    double *qd = fa_tensor_widen(q), *kd = fa_tensor_widen(k), *vd = fa_tensor_widen(v);
    if (!sc || !qd || !kd || !vd) {
        free(sc), free(qd), free(kd), free(vd);
        return FLASHATTN_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < pb.batch; b++)
        for (int64_t h = 0; h < pb.heads_q; h++) {
            const int64_t hk = h / pb.group;
            for (int64_t i = 0; i < pb.seq_q; i++) {
                int64_t lo, end;
                fa_ref_keys(&pb, i, &lo, &end);
                double *orow = o + ((b * pb.seq_q + i) * pb.heads_q + h) * dv;
                const double *qr = qd + fa_widened_at(q, b, i, h, 0);
                double mx = -INFINITY, sum = 0.0;
                int nan = 0;
                for (int64_t j = lo; j < end; j++) {
                    const double *kr = kd + fa_widened_at(k, b, j, hk, 0);
                    sc[j] = fa_ref_score(&pb, &p, b, h, i, j, fa_ref_dot(qr, kr, d) * scale, NULL);
                    nan |= isnan(sc[j]);
                    if (sc[j] > mx) mx = sc[j];
                }
                const double sink = fa_ref_sink(&p, h);
                if (sink > mx) mx = sink;
                if (sink != -INFINITY) sum += exp(sink - mx);
                for (int64_t c = 0; c < dv; c++) orow[c] = 0.0;
                for (int64_t j = lo; j < end && mx != -INFINITY; j++) { /* -inf: every key hidden */
                    const double pj = exp(sc[j] - mx), *vr = vd + fa_widened_at(v, b, j, hk, 0);
                    sum += pj; /* (the statistics are of the undropped P) */
                    const double pz = fa_ref_mul(pj, fa_ref_dropout_z(&pb, &p, b, h, i, j));
                    for (int64_t c = 0; c < dv; c++) orow[c] += fa_ref_mul(pz, vr[c]);
                }
                if (nan || isnan(sum)) sum = NAN;
                if (sum > 0.0 || isnan(sum))
                    for (int64_t c = 0; c < dv; c++) orow[c] = isnan(sum) ? NAN : orow[c] / sum;
                if (lse) lse[(b * pb.heads_q + h) * pb.seq_q + i] = sum > 0.0 || isnan(sum) ? mx + log(sum) : -INFINITY;
            }
        }
    free(sc), free(qd), free(kd), free(vd);
    return FLASHATTN_OK;
}
