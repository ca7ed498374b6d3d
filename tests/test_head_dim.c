/*
 * Head sizes past 256, up to FLASHATTN_MAX_HEAD_DIM (576: Ascend's limit is
 * 512, MLA's query/key head 576): forward on both drivers (the forward's,
 * and decode's for few rows), backward and KV-cache decode, every ISA path and dtype
 * (bf16 also on the dot-product route where a table has one), causal and
 * windowed, against the FP64 reference under the suite's rules: f32
 * outputs within 1e-5, 16-bit ones within twice plain f32 attention's
 * error, gradients within fa_bwd_pass_bounds. And one past the limit:
 * BAD_HEAD_DIM.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/decode.h"
#include "api/forward.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_f64.h"
#include "reference/compare.h"
#include "testutil.h"

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    int causal;
    int64_t wl;
    flashattn_dtype dt;
} hcase;

static void run_case(const hcase *c, uint64_t seed) {
    uint64_t rng = seed;
    tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0), k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
    tt_tensor v = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0), dout = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    tt_fill_normal(&dout, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal, p.window_left = c->wl;
    const size_t nq = (size_t)(c->b * c->sq * c->hq * c->d), nk = (size_t)(c->b * c->sk * c->hkv * c->d);
    const size_t ln = (size_t)(c->b * c->hq * c->sq);
    double *ref = malloc(nq * sizeof(double)), *rlse = malloc(ln * sizeof(double));
    double *g[3] = {malloc(nq * sizeof(double)), malloc(nk * sizeof(double)), malloc(nk * sizeof(double))};
    double *plain[3] = {malloc(nq * sizeof(double)), malloc(nk * sizeof(double)), malloc(nk * sizeof(double))};
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, ref, rlse) == 0 &&
                 fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p, g[0], g[1], g[2]) == 0,
             "d=%lld: reference", (long long)c->d);
    const double bound = tt_fwd_bound(c->dt, &q.t, &k.t, &v.t, &p, ref, nq);
    tt_tensor o = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0), dq = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_tensor dk = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0), dv = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
    float *lse = malloc(ln * sizeof(float));
    const fa_kernels *isas[8];
    const int ni = c->dt == FLASHATTN_BF16 ? tt_isas_dot(isas, 8) : tt_isas(isas, 8);
    const size_t cnt[3] = {nq, nk, nk};
    const tt_tensor *got[3] = {&dq, &dk, &dv};
    for (int t = 0; t < ni; t++) {
        const char *isa = isas[t]->isa;
        flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]);
        int inf_ok = 0;
        const double err = fa_max_abs_err(&o.t, ref), lerr = fa_lse_err(lse, rlse, ln, &inf_ok);
        TT_CHECK(s == FLASHATTN_OK && err <= bound && lerr <= 1e-4 && inf_ok,
                 "[%s] d=%lld sq=%lld sk=%lld: fwd status %d (%s), o err %.3g > %.3g or lse err %.3g", isa,
                 (long long)c->d, (long long)c->sq, (long long)c->sk, s, s ? flashattn_last_error() : "", err,
                 bound, lerr);
        /* without the LSE a few rows take decode's driver */
        tt_tensor o2 = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
        s = fa_fwd_ex(&q.t, &k.t, &v.t, &o2.t, NULL, &p, NULL, 0, isas[t]);
        const double err2 = fa_max_abs_err(&o2.t, ref);
        TT_CHECK(s == FLASHATTN_OK && err2 <= bound, "[%s] d=%lld: fwd without lse err %.3g", isa, (long long)c->d, err2);
        tt_free(&o2);
        s = fa_bwd_ex(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &dq.t, &dk.t, &dv.t, &p, NULL, 0, isas[t]);
        double mag[3];
        TT_CHECK(s == FLASHATTN_OK && fa_reference_bwd_std_f32(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &p, c->dt, plain[0],
                                                               plain[1], plain[2], mag) == 0,
                 "[%s] d=%lld: bwd status %d (%s)", isa, (long long)c->d, s, s ? flashattn_last_error() : "");
        for (int x = 0; s == FLASHATTN_OK && x < 3; x++) {
            tt_grad_errs r;
            TT_CHECK(tt_grad_pass(&got[x]->t, g[x], plain[x], cnt[x], mag[x], &r),
                     "[%s] d=%lld: gradient %d max err %.3g (%.3g), rms %.3g (%.3g)", isa, (long long)c->d, x, r.max,
                     r.max_bound, r.rms, r.rms_bound);
        }
        /* decode over the keys as a full cache, 1 and 3 splits */
        for (int splits = 1; c->sq <= c->sk && splits <= 3; splits += 2) {
            int32_t lens[2] = {(int32_t)c->sk, (int32_t)c->sk};
            flashattn_kv_cache cache;
            flashattn_kv_cache_init(&cache);
            cache.k = k.t, cache.v = v.t, cache.seqlens_i32 = lens;
            flashattn_params pd = p;
            pd.num_splits = splits;
            tt_tensor od = tt_alloc(FLASHATTN_F32, c->b, c->sq, c->hq, c->d, 1, 0);
            s = fa_decode_ex(&q.t, &cache, NULL, NULL, &od.t, NULL, &pd, NULL, 0, isas[t]);
            const double ed = fa_max_abs_err(&od.t, ref);
            TT_CHECK(s == FLASHATTN_OK && ed <= 1e-5, "[%s] d=%lld: decode %d splits status %d, err %.3g", isa,
                     (long long)c->d, splits, s, ed);
            tt_free(&od);
        }
    }
    free(lse), free(ref), free(rlse);
    for (int x = 0; x < 3; x++) free(g[x]), free(plain[x]);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout), tt_free(&o), tt_free(&dq), tt_free(&dk), tt_free(&dv);
}

int main(void) {
    static const hcase cases[] = {
        {1, 70, 90, 2, 1, 512, 0, -1, FLASHATTN_F32},
        {2, 33, 33, 2, 2, 384, 1, -1, FLASHATTN_F32},
        {1, 3, 130, 4, 2, 512, 1, -1, FLASHATTN_F16},
        {1, 64, 64, 2, 1, 257, 0, 20, FLASHATTN_BF16},
        {1, 40, 100, 2, 2, 512, 1, -1, FLASHATTN_BF16},
        {1, 24, 40, 2, 1, 576, 1, -1, FLASHATTN_F32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) run_case(&cases[c], 60 + c);
    /* one past the limit */
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 2, 1, FLASHATTN_MAX_HEAD_DIM + 1, 1, 0);
    tt_tensor o = tt_alloc(FLASHATTN_F32, 1, 2, 1, FLASHATTN_MAX_HEAD_DIM + 1, 1, 0);
    tt_fill_sentinel(o.mem, o.bytes);
    const flashattn_status s = flashattn_fwd(&q.t, &q.t, &q.t, &o.t, NULL, NULL, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_HEAD_DIM && tt_untouched(o.mem, o.bytes), "head_dim past the limit: status %d", s);
    tt_free(&q), tt_free(&o);
    return tt_finish("test_head_dim");
}
