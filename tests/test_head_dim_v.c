/*
 * A value head size different from the query/key head size (head_dim_v !=
 * head_dim, as SDPA, ggml and FA3 allow; MLA's 576 / 512), on every ISA
 * path and dtype (bf16 also on the dot-product route where a table has
 * one), against the FP64 reference under the suite's rules (f32 outputs
 * within 1e-5, 16-bit ones within twice plain f32 attention's error):
 *   the forward on both drivers (the forward's; decode's for few rows,
 *     without the LSE), causal, windowed, GQA, softcap and a bias;
 *   the backward (dQ, dK, dV; test_backward's rule, fa_bwd_pass_bounds),
 *     with dropout, sinks and the deterministic flag too;
 *   decode on a full contiguous cache (1 and 3 splits), on a paged cache
 *     with k_new / v_new appended (the cache's rows checked too);
 *   shapes that disagree (o, v_new, the cache's v): a status, nothing
 *     written.
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
    int64_t b, sq, sk, hq, hkv, d, dv;
    int causal;
    int64_t wl;
    float softcap;
    int bias;
    flashattn_dtype dt;
    float dropout; /* (no decode then: it takes none) */
    int sinks, deterministic;
} vcase;

static char *elem(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t x) {
    return (char *)t->data + (b * t->stride_batch + s * t->stride_seq + h * t->stride_head + x * t->stride_dim) *
                                 (int64_t)flashattn_dtype_size(t->dtype);
}

/* The paged cache: page size 16, sequence b's pages in reverse order, its
 * first sk - 3 rows given, the last 3 appended from k_new / v_new (q's
 * rows are the last 3 queries: bottom-right, the dense call's last rows). */
static void paged_append(const vcase *c, const tt_tensor *k, const tt_tensor *v, const tt_tensor *q,
                         const flashattn_params *p, const double *ref, const fa_kernels *kern, double bound) {
    const int64_t ps = 16, pages = (c->sk + ps - 1) / ps, add = 3, sq = c->sq, given = c->sk - add;
    const size_t es = flashattn_dtype_size(c->dt);
    if (sq < add || c->sk < add || c->b > 2) return;
    tt_tensor kc = tt_alloc(c->dt, c->b * pages, ps, c->hkv, c->d, 1, 0);
    tt_tensor vc = tt_alloc(c->dt, c->b * pages, ps, c->hkv, c->dv, 1, 0);
    int32_t table[2 * 64], lens[2];
    for (int64_t b = 0; b < c->b; b++) {
        lens[b] = (int32_t)given;
        for (int64_t g = 0; g < pages; g++) table[b * pages + g] = (int32_t)(b * pages + pages - 1 - g);
        for (int64_t j = 0; j < given; j++)
            for (int64_t h = 0; h < c->hkv; h++) {
                const int64_t pg = table[b * pages + j / ps];
                for (int64_t x = 0; x < c->d; x++) memcpy(elem(&kc.t, pg, j % ps, h, x), elem(&k->t, b, j, h, x), es);
                for (int64_t x = 0; x < c->dv; x++) memcpy(elem(&vc.t, pg, j % ps, h, x), elem(&v->t, b, j, h, x), es);
            }
    }
    /* k_new, v_new: the last rows of k and v; q: its last add rows */
    flashattn_tensor kn = k->t, vn = v->t, qn = q->t;
    kn.seqlen = vn.seqlen = add, qn.seqlen = add;
    kn.data = elem(&k->t, 0, given, 0, 0), vn.data = elem(&v->t, 0, given, 0, 0);
    qn.data = elem(&q->t, 0, sq - add, 0, 0);
    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = kc.t, cache.v = vc.t, cache.block_table = table, cache.max_pages_per_seq = pages;
    cache.seqlens_i32 = lens;
    tt_tensor o = tt_alloc(FLASHATTN_F32, c->b, add, c->hq, c->dv, 1, 0);
    flashattn_params pd = *p;
    pd.bias = NULL; /* (the bias array is [.., sq, sk]: the dense call's) */
    const flashattn_status s = fa_decode_ex(&qn, &cache, &kn, &vn, &o.t, NULL, &pd, NULL, 0, kern);
    double err = 0.0;
    for (int64_t b = 0; s == FLASHATTN_OK && b < c->b; b++)
        for (int64_t i = 0; i < add; i++)
            for (int64_t h = 0; h < c->hq; h++)
                for (int64_t x = 0; x < c->dv; x++)
                    err = fmax(err, fabs(fa_tensor_get(&o.t, b, i, h, x) -
                                         ref[((b * sq + sq - add + i) * c->hq + h) * c->dv + x]));
    int rows_ok = 1;
    for (int64_t b = 0; s == FLASHATTN_OK && b < c->b; b++)
        for (int64_t j = given; j < c->sk; j++)
            for (int64_t h = 0; h < c->hkv; h++) {
                const int64_t pg = table[b * pages + j / ps];
                for (int64_t x = 0; x < c->dv; x++)
                    rows_ok &= !memcmp(elem(&vc.t, pg, j % ps, h, x), elem(&v->t, b, j, h, x), es);
                for (int64_t x = 0; x < c->d; x++)
                    rows_ok &= !memcmp(elem(&kc.t, pg, j % ps, h, x), elem(&k->t, b, j, h, x), es);
            }
    TT_CHECK(s == FLASHATTN_OK && err <= bound && rows_ok,
             "[%s] d=%lld dv=%lld: paged decode with append status %d (%s), err %.3g > %.3g, cache rows %s",
             kern->isa, (long long)c->d, (long long)c->dv, s, s ? flashattn_last_error() : "", err, bound,
             rows_ok ? "ok" : "wrong");
    tt_free(&kc), tt_free(&vc), tt_free(&o);
}

static void run_case(const vcase *c, uint64_t seed) {
    uint64_t rng = seed;
    tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0), k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
    tt_tensor v = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->dv, 0, 0); /* [b, h, s, d] strides */
    tt_tensor dout = tt_alloc(c->dt, c->b, c->sq, c->hq, c->dv, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    tt_fill_normal(&dout, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal, p.window_left = c->wl, p.softcap = c->softcap;
    p.dropout_p = c->dropout, p.dropout_seed = 77, p.deterministic = c->deterministic;
    float sinks[16];
    for (int x = 0; x < 16; x++) sinks[x] = (float)tt_rand_normal(&rng);
    if (c->sinks) p.sinks = sinks;
    float *bias = NULL;
    flashattn_scores bs;
    if (c->bias) { /* [1, heads_q, sq, sk] f32 */
        bias = malloc((size_t)(c->hq * c->sq * c->sk + 1) * sizeof(float));
        for (int64_t x = 0; x < c->hq * c->sq * c->sk; x++) bias[x] = (float)tt_rand_normal(&rng);
        bs = (flashattn_scores){bias, FLASHATTN_F32, 1, c->hq, c->sq, c->sk, 0, c->sq * c->sk, c->sk, 1};
        p.bias = &bs;
    }
    const size_t no = (size_t)(c->b * c->sq * c->hq * c->dv), ln = (size_t)(c->b * c->hq * c->sq);
    double *ref = malloc((no + 1) * sizeof(double)), *rlse = malloc((ln + 1) * sizeof(double));
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, ref, rlse) == 0, "d=%lld dv=%lld: reference", (long long)c->d,
             (long long)c->dv);
    const double bound = tt_fwd_bound(c->dt, &q.t, &k.t, &v.t, &p, ref, no);
    const size_t cnt[3] = {(size_t)(c->b * c->sq * c->hq * c->d), (size_t)(c->b * c->sk * c->hkv * c->d),
                           (size_t)(c->b * c->sk * c->hkv * c->dv)};
    double *g[3], *plain[3];
    for (int x = 0; x < 3; x++) g[x] = malloc((cnt[x] + 1) * sizeof(double)), plain[x] = malloc((cnt[x] + 1) * sizeof(double));
    TT_CHECK(fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p, g[0], g[1], g[2]) == 0, "d=%lld dv=%lld: reference bwd",
             (long long)c->d, (long long)c->dv);
    float *lse = malloc((ln + 1) * sizeof(float));
    const fa_kernels *isas[8];
    const int ni = c->dt == FLASHATTN_BF16 ? tt_isas_dot(isas, 8) : tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        const char *isa = isas[t]->isa;
        tt_tensor o = tt_alloc(c->dt, c->b, c->sq, c->hq, c->dv, 1, 0);
        flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]);
        int inf_ok = 0;
        const double err = fa_max_abs_err(&o.t, ref), lerr = fa_lse_err(lse, rlse, ln, &inf_ok);
        TT_CHECK(s == FLASHATTN_OK && err <= bound && lerr <= 1e-4 && inf_ok,
                 "[%s] d=%lld dv=%lld sq=%lld sk=%lld %s: fwd status %d (%s), o err %.3g > %.3g or lse err %.3g",
                 isa, (long long)c->d, (long long)c->dv, (long long)c->sq, (long long)c->sk,
                 c->dt == FLASHATTN_F32 ? "f32" : c->dt == FLASHATTN_F16 ? "f16" : "bf16", s,
                 s ? flashattn_last_error() : "", err, bound, lerr);
        /* without the LSE a few rows take decode's driver */
        tt_tensor o2 = tt_alloc(c->dt, c->b, c->sq, c->hq, c->dv, 1, 0);
        s = fa_fwd_ex(&q.t, &k.t, &v.t, &o2.t, NULL, &p, NULL, 0, isas[t]);
        const double err2 = fa_max_abs_err(&o2.t, ref);
        TT_CHECK(s == FLASHATTN_OK && err2 <= bound, "[%s] d=%lld dv=%lld: fwd without lse err %.3g", isa,
                 (long long)c->d, (long long)c->dv, err2);
        tt_free(&o2);
        /* decode over the keys as a full contiguous cache, 1 and 3 splits */
        for (int splits = 1; c->sq <= c->sk && !c->dropout && splits <= 3; splits += 2) {
            int32_t lens[4] = {(int32_t)c->sk, (int32_t)c->sk, (int32_t)c->sk, (int32_t)c->sk};
            flashattn_kv_cache cache;
            flashattn_kv_cache_init(&cache);
            cache.k = k.t, cache.v = v.t, cache.seqlens_i32 = lens;
            flashattn_params pd = p;
            pd.num_splits = splits;
            tt_tensor od = tt_alloc(FLASHATTN_F32, c->b, c->sq, c->hq, c->dv, 1, 0);
            s = fa_decode_ex(&q.t, &cache, NULL, NULL, &od.t, NULL, &pd, NULL, 0, isas[t]);
            const double ed = fa_max_abs_err(&od.t, ref);
            TT_CHECK(s == FLASHATTN_OK && ed <= (c->dt == FLASHATTN_F32 ? 1e-5 : bound),
                     "[%s] d=%lld dv=%lld: decode %d splits status %d (%s), err %.3g", isa, (long long)c->d,
                     (long long)c->dv, splits, s, s ? flashattn_last_error() : "", ed);
            tt_free(&od);
        }
        if (!c->bias && !c->dropout) paged_append(c, &k, &v, &q, &p, ref, isas[t], c->dt == FLASHATTN_F32 ? 1e-5 : bound);
        /* the backward, on this forward's O and LSE: dV and dO of V's size */
        tt_tensor dq = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0), dk = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
        tt_tensor dv = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->dv, 1, 0);
        s = fa_bwd_ex(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &dq.t, &dk.t, &dv.t, &p, NULL, 0, isas[t]);
        double mag[3];
        TT_CHECK(s == FLASHATTN_OK && fa_reference_bwd_std_f32(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &p, c->dt, plain[0],
                                                               plain[1], plain[2], mag) == 0,
                 "[%s] d=%lld dv=%lld: bwd status %d (%s)", isa, (long long)c->d, (long long)c->dv, s,
                 s ? flashattn_last_error() : "");
        const tt_tensor *got[3] = {&dq, &dk, &dv};
        for (int x = 0; s == FLASHATTN_OK && x < 3; x++) {
            tt_grad_errs r;
            TT_CHECK(tt_grad_pass(&got[x]->t, g[x], plain[x], cnt[x], mag[x], &r),
                     "[%s] d=%lld dv=%lld: %s max err %.3g (%.3g), rms %.3g (%.3g)", isa, (long long)c->d,
                     (long long)c->dv, x == 0 ? "dq" : x == 1 ? "dk" : "dv", r.max, r.max_bound, r.rms, r.rms_bound);
        }
        tt_free(&dq), tt_free(&dk), tt_free(&dv), tt_free(&o);
    }
    free(lse), free(ref), free(rlse), free(bias);
    for (int x = 0; x < 3; x++) free(g[x]), free(plain[x]);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout);
}

/* Shapes that disagree: a status, nothing written. */
static void shapes(void) {
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 4, 2, 64, 1, 0), k = tt_alloc(FLASHATTN_F32, 1, 8, 1, 64, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, 1, 8, 1, 32, 1, 0), o = tt_alloc(FLASHATTN_F32, 1, 4, 2, 64, 1, 0);
    tt_tensor k48 = tt_alloc(FLASHATTN_F32, 1, 8, 1, 48, 1, 0), vn = tt_alloc(FLASHATTN_F32, 1, 4, 1, 64, 1, 0);
    tt_fill_sentinel(o.mem, o.bytes);
    /* o with q's head size, v's being 32 */
    flashattn_status s = flashattn_fwd(&q.t, &k.t, &v.t, &o.t, NULL, NULL, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_SHAPE && tt_untouched(o.mem, o.bytes), "o of q's head_dim, v's 32: status %d", s);
    /* k's head size must still be q's */
    tt_tensor o32 = tt_alloc(FLASHATTN_F32, 1, 4, 2, 32, 1, 0);
    tt_fill_sentinel(o32.mem, o32.bytes);
    s = flashattn_fwd(&q.t, &k48.t, &v.t, &o32.t, NULL, NULL, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_SHAPE && tt_untouched(o32.mem, o32.bytes), "k of 48 under q of 64: status %d", s);
    /* decode: o of q's size, and a v_new of k's size, on a cache whose v is 32 wide */
    int32_t len = 4;
    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = k.t, cache.v = v.t, cache.seqlens_i32 = &len;
    s = flashattn_decode(&q.t, &cache, NULL, NULL, &o.t, NULL, NULL, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_SHAPE && tt_untouched(o.mem, o.bytes), "decode o of q's head_dim: status %d", s);
    tt_tensor kn = tt_alloc(FLASHATTN_F32, 1, 4, 1, 64, 1, 0);
    s = flashattn_decode(&q.t, &cache, &kn.t, &vn.t, &o32.t, NULL, NULL, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_SHAPE && tt_untouched(o32.mem, o32.bytes), "decode v_new of 64, cache v 32: status %d",
             s);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&o), tt_free(&k48), tt_free(&vn), tt_free(&o32), tt_free(&kn);
}

int main(void) {
    static const vcase cases[] = {
        {1, 70, 90, 2, 1, 64, 32, 0, -1, 0.0f, 0, FLASHATTN_F32, 0.0f, 0, 0},
        {2, 33, 40, 4, 2, 40, 130, 1, -1, 0.0f, 0, FLASHATTN_F32, 0.0f, 0, 0},
        {1, 20, 77, 4, 1, 128, 17, 1, 30, 20.0f, 1, FLASHATTN_F32, 0.0f, 0, 0},
        {1, 40, 100, 2, 2, 96, 64, 1, -1, 0.0f, 0, FLASHATTN_F16, 0.0f, 0, 0},
        {1, 64, 64, 2, 1, 33, 80, 0, 20, 0.0f, 1, FLASHATTN_BF16, 0.0f, 0, 0},
        {1, 5, 150, 2, 1, 7, 3, 1, -1, 0.0f, 0, FLASHATTN_BF16, 0.0f, 0, 0},
        /* MLA's decode: 576 / 512, one kv-head for 16 query heads */
        {1, 4, 200, 16, 1, 576, 512, 1, -1, 0.0f, 0, FLASHATTN_F32, 0.0f, 0, 0},
        {1, 3, 130, 8, 1, 576, 512, 1, -1, 0.0f, 0, FLASHATTN_BF16, 0.0f, 0, 0},
        /* dropout, sinks, the deterministic backward */
        {2, 50, 60, 4, 2, 48, 72, 1, -1, 0.0f, 0, FLASHATTN_F32, 0.2f, 1, 1},
        {1, 37, 37, 2, 1, 80, 16, 0, 9, 0.0f, 1, FLASHATTN_BF16, 0.1f, 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) run_case(&cases[c], 80 + c);
    shapes();
    return tt_finish("test_head_dim_v");
}
