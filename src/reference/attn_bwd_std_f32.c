/* The plain f32 backward, one query row at a time; with dropout, the
 * gradient of O = (P Z) V for the library's keep mask Z (dropout_ref.h). */
#include "reference/attn_bwd_std_f32.h"

#include <math.h>
#include <stdlib.h>

#include "api/validate.h"
#include "core/dtype.h"
#include "reference/attn_f64.h"
#include "reference/dropout_ref.h"
#include "reference/keys_ref.h"
#include "reference/score_ref.h"

static double round_to(float x, flashattn_dtype dt) {
    if (dt == FLASHATTN_F16) return fa_f16_to_f32(fa_f32_to_f16(x));
    if (dt == FLASHATTN_BF16) return fa_bf16_to_f32(fa_f32_to_bf16(x));
    return x;
}

flashattn_status fa_reference_bwd_std_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const flashattn_tensor *dout, const float *lse,
                                          const flashattn_params *user, flashattn_dtype out_dt,
                                          double *dq, double *dk, double *dv, double terms[3]) {
    fa_problem pb;
    flashattn_params p;
    flashattn_status s = fa_read_params(user, &p);
    if (s || (s = fa_validate_fwd(q, k, v, o, NULL, &p, &pb))) return s;
    if (!dout || !lse) return FLASHATTN_ERR_NULL_POINTER;
    const int64_t d = pb.head_dim, dvd = pb.head_dim_v;
    const float scale = p.scale != 0.0f ? p.scale : 1.0f / sqrtf((float)d);
    const size_t nk = (size_t)(pb.batch * pb.seq_k * pb.heads_kv * d), nv = (size_t)(pb.batch * pb.seq_k * pb.heads_kv * dvd);
    float *gk = calloc(nk ? nk : 1, sizeof(float)), *gv = calloc(nv ? nv : 1, sizeof(float));
    float *gq = malloc((size_t)d * sizeof(float));
    double *tk = calloc(nk ? nk : 1, sizeof(double)), *tv = calloc(nv ? nv : 1, sizeof(double));
    double *tq = malloc((size_t)d * sizeof(double));
    /* widened once (attn_f64.h): the same values as element reads */
    double *qd = fa_tensor_widen(q), *kd = fa_tensor_widen(k), *vd = fa_tensor_widen(v);
    double *od = fa_tensor_widen(o), *dod = fa_tensor_widen(dout);
    if (!gk || !gv || !gq || !tk || !tv || !tq || !qd || !kd || !vd || !od || !dod) {
        free(gk), free(gv), free(gq), free(tk), free(tv), free(tq);
        free(qd), free(kd), free(vd), free(od), free(dod);
        return FLASHATTN_ERR_OUT_OF_MEMORY;
    }
    terms[0] = terms[1] = terms[2] = 0.0;
    for (int64_t b = 0; b < pb.batch; b++)
        for (int64_t h = 0; h < pb.heads_q; h++)
            for (int64_t i = 0; i < pb.seq_q; i++) {
                const int64_t hk = h / pb.group;
                int64_t lo, end;
                fa_ref_keys(&pb, i, &lo, &end);
                const float L = lse[(b * pb.heads_q + h) * pb.seq_q + i];
                const double *qw = qd + fa_widened_at(q, b, i, h, 0);
                const double *dow = dod + fa_widened_at(dout, b, i, h, 0);
                const double *ow = od + fa_widened_at(o, b, i, h, 0);
                float D = 0.0f;
                for (int64_t c = 0; c < dvd; c++) D += (float)dow[c] * (float)ow[c];
                for (int64_t c = 0; c < d; c++) gq[c] = 0.0f, tq[c] = 0.0;
                /* LSE = -inf: the row saw no key and contributes nothing */
                for (int64_t j = lo; j < end && L != -INFINITY; j++) {
                    const double *kw = kd + fa_widened_at(k, b, j, hk, 0);
                    const double *vw = vd + fa_widened_at(v, b, j, hk, 0);
                    float sc = 0.0f, dp = 0.0f;
                    for (int64_t c = 0; c < d; c++) sc += (float)qw[c] * (float)kw[c];
                    for (int64_t c = 0; c < dvd; c++) dp += (float)dow[c] * (float)vw[c];
                    const float z = (float)fa_ref_dropout_z(&pb, &p, b, h, i, j);
                    dp *= z; /* dO V^T is the gradient of P Z */
                    double dcap;
                    const float s = (float)fa_ref_score(&pb, &p, b, h, i, j, sc * scale, &dcap);
                    const float pj = expf(s - L), ds = pj * (dp - D) * (float)dcap;
                    const double t = (double)pj * (fabs(dp) + fabs(D)) * dcap;
                    const size_t kr = (size_t)(((b * pb.seq_k + j) * pb.heads_kv + hk) * d);
                    const size_t vr = (size_t)(((b * pb.seq_k + j) * pb.heads_kv + hk) * dvd);
                    for (int64_t c = 0; c < d; c++) {
                        const double qc = qw[c], kc = kw[c];
                        gq[c] += ds * (float)kc;
                        gk[kr + c] += ds * (float)qc;
                        tq[c] += t * fabs(kc);
                        tk[kr + c] += t * fabs(qc);
                    }
                    for (int64_t c = 0; c < dvd; c++) {
                        const double oc = dow[c];
                        gv[vr + c] += pj * z * (float)oc;
                        tv[vr + c] += pj * z * fabs(oc);
                    }
                }
                double *qr = dq + ((b * pb.seq_q + i) * pb.heads_q + h) * d;
                for (int64_t c = 0; c < d; c++) {
                    qr[c] = round_to(gq[c] * scale, out_dt);
                    terms[0] = fmax(terms[0], tq[c] * fabs(scale));
                }
            }
    for (size_t x = 0; x < nk; x++) {
        dk[x] = round_to(gk[x] * scale, out_dt);
        terms[1] = fmax(terms[1], tk[x] * fabs(scale));
    }
    for (size_t x = 0; x < nv; x++) {
        dv[x] = round_to(gv[x], out_dt);
        terms[2] = fmax(terms[2], tv[x]);
    }
    free(gk), free(gv), free(gq), free(tk), free(tv), free(tq);
    free(qd), free(kd), free(vd), free(od), free(dod);
    return FLASHATTN_OK;
}

fa_bwd_bounds fa_bwd_pass_bounds(flashattn_dtype out_dt, double plain_max, double plain_rms,
                                 double terms) {
    fa_bwd_bounds b;
    b.rms_bound = fmax(2.0 * plain_rms, 1e-6 * terms);
    b.max_bound = fmax(2.0 * plain_max, (out_dt == FLASHATTN_F32 ? 1e-5 : 1e-6) * terms);
    return b;
}
