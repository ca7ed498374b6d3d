/* Plain f32 attention, the error yardstick for exact kernels (dropout
 * included: the same keep mask as the library, reference/dropout_ref.h). */
#include "reference/attn_std_f32.h"

#include <math.h>
#include <stdlib.h>

#include "api/validate.h"
#include "core/dtype.h"
#include "reference/attn_f64.h"
#include "reference/dropout_ref.h"
#include "reference/keys_ref.h"
#include "reference/score_ref.h"

static double round_to(float r, flashattn_dtype dt) {
    if (dt == FLASHATTN_F16) return fa_f16_to_f32(fa_f32_to_f16(r));
    if (dt == FLASHATTN_BF16) return fa_bf16_to_f32(fa_f32_to_bf16(r));
    return r;
}

flashattn_status fa_reference_std_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                                      const flashattn_tensor *v, const flashattn_params *user,
                                      flashattn_dtype out_dtype, double *out) {
    flashattn_params p;
    fa_problem pb;
    flashattn_status st = fa_read_params(user, &p);
    if (st) return st;
    /* The masking rules come from the library's own validation, so the
     * yardstick cannot disagree with it about which keys a row sees. */
    flashattn_tensor oshape = flashattn_tensor_bshd((void *)q->data, q->dtype, q->batch, q->seqlen, q->heads,
                                                    v->head_dim);
    if ((st = fa_validate_fwd(q, k, v, &oshape, NULL, &p, &pb))) return st;
    const int64_t D = pb.head_dim, DV = pb.head_dim_v;
    const float scale = p.scale != 0.0f ? p.scale : 1.0f / sqrtf((float)D);
    float *s = malloc((size_t)(pb.seq_k > 0 ? pb.seq_k : 1) * sizeof(float));
    float *o = malloc((size_t)DV * sizeof(float));
    /* widened once: (float) of the double is the element's value, as before */
    double *qd = fa_tensor_widen(q), *kd = fa_tensor_widen(k), *vd = fa_tensor_widen(v);
    if (!s || !o || !qd || !kd || !vd) {
        free(s), free(o), free(qd), free(kd), free(vd);
        return FLASHATTN_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < pb.batch; b++)
        for (int64_t h = 0; h < pb.heads_q; h++)
            for (int64_t i = 0; i < pb.seq_q; i++) {
                const int64_t hk = h / pb.group;
                int64_t lo, end;
                fa_ref_keys(&pb, i, &lo, &end);
                const double *qr = qd + fa_widened_at(q, b, i, h, 0);
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = lo; j < end; j++) {
                    const double *kr = kd + fa_widened_at(k, b, j, hk, 0);
                    float acc = 0.0f;
                    for (int64_t c = 0; c < D; c++) acc += (float)qr[c] * (float)kr[c];
                    s[j] = (float)fa_ref_score(&pb, &p, b, h, i, j, acc * scale, NULL);
                    if (s[j] > mx) mx = s[j];
                }
                const float sink = (float)fa_ref_sink(&p, h);
                if (sink > mx) mx = sink;
                if (sink != -INFINITY) sum += expf(sink - mx);
                for (int64_t c = 0; c < DV; c++) o[c] = 0.0f;
                if (mx == -INFINITY) end = lo; /* every key hidden */
                for (int64_t j = lo; j < end; j++) {
                    s[j] = expf(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t j = lo; j < end; j++) {
                    const double *vr = vd + fa_widened_at(v, b, j, hk, 0);
                    const float z = (float)fa_ref_dropout_z(&pb, &p, b, h, i, j);
                    for (int64_t c = 0; c < DV; c++) o[c] += s[j] / sum * z * (float)vr[c];
                }
                double *orow = out + ((b * pb.seq_q + i) * pb.heads_q + h) * DV;
                for (int64_t c = 0; c < DV; c++) orow[c] = round_to(o[c], out_dtype);
            }
    free(s), free(o), free(qd), free(kd), free(vd);
    return FLASHATTN_OK;
}
