/*
 * Backward pass: dQ, dK, dV against FP64 reference gradients over a sweep of
 * shapes, masks, dtypes, layouts and both dQ reductions, on every ISA path;
 * the reference itself against central finite differences; bit-identical
 * results where the header promises them; error paths.
 *
 * Pass rule, per gradient G of each case, with the FP64 reference gradients
 * of the same (dtype-rounded) inputs as truth (fa_bwd_pass_bounds in
 * src/reference/attn_bwd_std_f32.h, which says why):
 *     rms |G - G_ref|  <=  max(2 * rms |G_plain - G_ref|,  1e-6 * T)
 *     max |G - G_ref|  <=  max(2 * max |G_plain - G_ref|,  F * T)
 * with F = 1e-6 for 16-bit outputs, 1e-5 for f32 ones. G_plain is the plain f32 implementation of the same function of the same
 * inputs (src/reference/attn_bwd_std_f32.h: materialised scores, P = exp(s -
 * LSE) with the forward's LSE, D from the forward's O, f32 sums, rounded
 * once to the output dtype). That is FlashAttention's own rule (at most
 * twice the error of a plain implementation in the same precision).
 * T is the largest sum of the absolute values of the terms of one element
 * (P |dP - D| |K| scale for dQ, and so on): the scale of any f32 rounding.
 * The floors carry the cases where the plain error is itself at the ulp
 * level or exactly 0 (a row with one key has dS = 0 in exact arithmetic;
 * the plain loop can cancel exactly, the GEMMs to a few ulp).
 * bf16 cases also run the bf16 dot-product route (P and dS rounded to bf16
 * for the products), held to the same rule.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/forward.h"
#include "api/validate.h"
#include "plan/tiles_bwd.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_f64.h"
#include "reference/compare.h"
#include "testutil.h"

static const char *dt_name(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

static double max_abs(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static double max_diff(const double *a, const double *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= m)) m = e; /* NaN propagates */
    }
    return m;
}

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    int causal, align, det;
    int64_t wl, wr;
    flashattn_dtype dt;
    int layout; /* 0 bshd, 1 bhsd, 2 bshd with padded rows */
    double sigma;
} bwd_case;

static void describe(const bwd_case *c, char *buf, size_t n) {
    snprintf(buf, n,
             "b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d align=%d win=(%lld,%lld) "
             "%s layout=%d sigma=%g det=%d",
             (long long)c->b, (long long)c->sq, (long long)c->sk, (long long)c->hq,
             (long long)c->hkv, (long long)c->d, c->causal, c->align, (long long)c->wl,
             (long long)c->wr, dt_name(c->dt), c->layout, c->sigma, c->det);
}

/* Run forward then backward on one path; outputs in the given tensors. */
static flashattn_status fwd_bwd(const fa_kernels *kern, const tt_tensor *q, const tt_tensor *k,
                                const tt_tensor *v, tt_tensor *o, float *lse, const tt_tensor *dout,
                                tt_tensor *dq, tt_tensor *dk, tt_tensor *dv,
                                const flashattn_params *p) {
    flashattn_status s = fa_fwd_ex(&q->t, &k->t, &v->t, &o->t, lse, p, NULL, 0, kern);
    if (s) return s;
    size_t ws = 0;
    s = fa_bwd_workspace_size_ex(&q->t, &k->t, &v->t, &o->t, &dout->t, lse, &dq->t, &dk->t,
                                 &dv->t, p, kern, &ws);
    if (s) return s;
    void *w = malloc(ws ? ws : 1);
    /* NaN in every float and bf16 slot: nothing may use workspace it did not write */
    memset(w, 0xff, ws);
    s = fa_bwd_ex(&q->t, &k->t, &v->t, &o->t, &dout->t, lse, &dq->t, &dk->t, &dv->t, p, w, ws, kern);
    free(w);
    return s;
}

static void run_case(const bwd_case *c, uint64_t seed) {
    uint64_t rng = seed;
    const int bshd = c->layout != 1;
    const int64_t pad = c->layout == 2 ? 3 : 0;
    tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, bshd, pad);
    tt_tensor k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, bshd, pad);
    tt_tensor v = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, bshd, pad);
    tt_tensor dout = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, !bshd, pad);
    tt_fill_normal(&q, &rng, c->sigma);
    tt_fill_normal(&k, &rng, c->sigma);
    tt_fill_normal(&v, &rng, 1.0);
    tt_fill_normal(&dout, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal;
    p.align = c->align;
    p.window_left = c->wl;
    p.window_right = c->wr;
    p.deterministic = c->det;
    const size_t nq = (size_t)(c->b * c->sq * c->hq * c->d), nk = (size_t)(c->b * c->sk * c->hkv * c->d);
    const size_t ln = (size_t)(c->b * c->hq * c->sq);
    double *ref[3], *plain[3], mag[3] = {0, 0, 0};
    const size_t cnt[3] = {nq, nk, nk};
    for (int g = 0; g < 3; g++) {
        ref[g] = malloc((cnt[g] ? cnt[g] : 1) * sizeof(double));
        plain[g] = malloc((cnt[g] ? cnt[g] : 1) * sizeof(double));
    }
    char desc[320];
    describe(c, desc, sizeof desc);
    TT_CHECK(fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p, ref[0], ref[1], ref[2]) == 0,
             "reference: %s", desc);
    static const char *gname[3] = {"dq", "dk", "dv"};

    /* bf16 cases also run the bf16 dot-product route (tt_isas_dot), whose
     * forward rounds P to bf16 and so gives an O further from the others */
    void *plain_o = NULL;
    float *plain_lse = malloc((ln ? ln : 1) * sizeof(float));
    const fa_kernels *isas[8];
    const int n = c->dt == FLASHATTN_BF16 ? tt_isas_dot(isas, 8) : tt_isas(isas, 8);
    for (int t = 0; t < n; t++) {
        tt_tensor o = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, bshd, 0);
        tt_tensor dq = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, !bshd, c->layout == 2 ? 5 : 0);
        tt_tensor dk = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, !bshd, c->layout == 2 ? 5 : 0);
        tt_tensor dv = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, bshd, 0);
        float *lse = malloc((ln ? ln : 1) * sizeof(float));
        flashattn_status s = fwd_bwd(isas[t], &q, &k, &v, &o, lse, &dout, &dq, &dk, &dv, &p);
        TT_CHECK(s == FLASHATTN_OK, "[%s] status %d (%s) %s", isas[t]->isa, s, flashattn_last_error(), desc);
        TT_CHECK(!tt_bf16_state_left(isas[t]), "[%s] a thread kept gemm_bf16 state: %s", isas[t]->isa, desc);
        /* the yardstick uses this path's O and LSE, as the backward does
         * (worked out again whenever they differ from the last path's) */
        if (t == 0 || memcmp(plain_o, o.mem, o.bytes) || memcmp(plain_lse, lse, ln * sizeof(float))) {
            free(plain_o);
            plain_o = malloc(o.bytes ? o.bytes : 1);
            memcpy(plain_o, o.mem, o.bytes);
            memcpy(plain_lse, lse, ln * sizeof(float));
            for (int g = 0; g < 3; g++) mag[g] = 0.0;
            TT_CHECK(fa_reference_bwd_std_f32(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &p, c->dt, plain[0],
                                              plain[1], plain[2], mag) == 0, "plain f32: %s", desc);
        }
        const tt_tensor *got[3] = {&dq, &dk, &dv};
        for (int g = 0; g < 3; g++) {
            const double err = tt_max_abs_err(got[g], ref[g]), rms = fa_rms_err(&got[g]->t, ref[g]);
            const double perr = max_diff(plain[g], ref[g], cnt[g]);
            const double prms = fa_rms_diff(plain[g], ref[g], cnt[g]);
            const fa_bwd_bounds bd = fa_bwd_pass_bounds(c->dt, perr, prms, mag[g]);
            TT_CHECK(err <= bd.max_bound && rms <= bd.rms_bound,
                     "[%s] %s max err %.3g (bound %.3g, plain %.3g), rms %.3g (bound %.3g, plain %.3g), "
                     "terms %.3g, |ref| %.3g: %s",
                     isas[t]->isa, gname[g], err, bd.max_bound, perr, rms, bd.rms_bound, prms, mag[g],
                     max_abs(ref[g], cnt[g]), desc);
            if (getenv("FA_TEST_VERBOSE"))
                printf("[%s] %s max %.3g plain %.3g ratio %.2f | rms %.3g plain %.3g ratio %.2f | terms %.3g  %s\n",
                       isas[t]->isa, gname[g], err, perr, err / perr, rms, prms, rms / prms, mag[g], desc);
        }
        free(lse);
        tt_free(&o), tt_free(&dq), tt_free(&dk), tt_free(&dv);
    }
    for (int g = 0; g < 3; g++) free(ref[g]), free(plain[g]);
    free(plain_o), free(plain_lse);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout);
}

static void sweep(void) {
    static const int64_t seqs[][2] = {{1, 1},    {17, 17}, {113, 113}, {300, 300}, {17, 113},
                                      {113, 17}, {1, 260}, {260, 1},   {0, 5},     {5, 0},
                                      {700, 700}, {64, 300}, {300, 64}};
    static const int64_t dims[] = {1, 40, 64, 80, 128, 256, 32, 96};
    static const int64_t heads[][2] = {{1, 1}, {2, 2}, {4, 1}, {6, 2}, {3, 1}, {2, 1}};
    /* causal, align, window_left, window_right */
    static const int64_t masks[][4] = {{0, 0, -1, -1}, {1, 0, -1, -1}, {1, 1, -1, -1}, {0, 0, 16, 0},
                                       {0, 1, 8, 8},   {0, 0, -1, 5},  {0, 0, 5, -1},  {1, 0, 40, -1},
                                       {0, 1, 0, 0}};
    const int nseq = sizeof seqs / sizeof seqs[0], nd = sizeof dims / sizeof dims[0];
    const int nh = sizeof heads / sizeof heads[0], nm = sizeof masks / sizeof masks[0];
    uint64_t rng = 4242;
    for (int i = 0; i < 78; i++) {
        bwd_case c;
        const int64_t *sp = seqs[i % nseq];
        c.b = 1 + (int64_t)(tt_rand_u64(&rng) % 2);
        c.sq = sp[0], c.sk = sp[1];
        c.d = dims[(i / nseq + i) % nd];
        c.hq = heads[i % nh][0], c.hkv = heads[i % nh][1];
        const int64_t *mk = masks[(i + i / nh) % nm];
        c.causal = (int)mk[0], c.align = (int)mk[1], c.wl = mk[2], c.wr = mk[3];
        c.dt = (flashattn_dtype)(i % 3);
        c.layout = (int)(i / 3 % 3);
        c.det = i / 2 % 2;
        c.sigma = i % 7 == 6 ? 10.0 : 1.0; /* |scores| ~ 100 */
        /* keep the references cheap: big problems get one head */
        if ((double)c.b * c.hq * c.sq * c.sk * c.d > 2e7) c.b = 1, c.hq = c.hkv = 1;
        if (c.sq * c.sk * c.d > (int64_t)700 * 700 * 64) c.d = 64;
        if (tt_quick() && (i % 4 || c.sq * c.sk > 300 * 64)) continue;
        run_case(&c, 7000 + (uint64_t)i);
    }
}

/* dK and dV big enough to be written around the caches (plan.stream_dkv,
 * kern->store_stream): few queries against many keys, every dtype, rows
 * that start on a cache line and rows that do not (padded layout, d 80). */
static void streamed_stores(void) {
    static const bwd_case cases[] = {
        {1, 3, 4100, 4, 2, 128, 0, 0, 0, -1, -1, FLASHATTN_F32, 2, 1.0},
        {1, 2, 4100, 2, 2, 80, 1, 0, 1, -1, -1, FLASHATTN_BF16, 0, 1.0},
        {1, 5, 4100, 2, 2, 128, 0, 0, 0, 300, -1, FLASHATTN_F16, 1, 1.0},
        {1, 4, 2100, 4, 4, 64, 1, 1, 0, -1, -1, FLASHATTN_F32, 0, 1.0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bwd_case *c = &cases[ci];
        /* the plan must stream these, or this tests nothing new */
        tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
        tt_tensor k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
        flashattn_params p = flashattn_params_default(), rp;
        fa_problem pb;
        fa_bwd_plan plan;
        const fa_kernels *isas[8];
        tt_isas(isas, 8);
        TT_CHECK(fa_read_params(&p, &rp) == FLASHATTN_OK &&
                     fa_validate_fwd(&q.t, &k.t, &k.t, &q.t, NULL, &rp, &pb) == FLASHATTN_OK &&
                     fa_plan_bwd(&pb, c->dt, &rp, isas[0], &plan) == FLASHATTN_OK && plan.stream_dkv,
                 "streamed case %zu: the plan does not stream dK and dV", ci);
        tt_free(&q), tt_free(&k);
        run_case(c, 9100 + ci);
    }
}

/* The FP64 reference gradients are the derivatives of the FP64 forward:
 * L = sum(O * dO), central differences in every input element. */
static void finite_differences(void) {
    static const struct { int64_t sq, sk, hq, hkv, d; int causal, align; int64_t wl, wr; } cases[] = {
        {4, 5, 2, 1, 3, 0, 0, -1, -1}, {5, 3, 2, 2, 2, 1, 0, -1, -1}, /* rows that see nothing */
        {4, 6, 3, 1, 3, 0, 1, 1, 2},   {6, 4, 1, 1, 4, 1, 1, 2, -1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        uint64_t rng = 31 + ci;
        const int64_t sq = cases[ci].sq, sk = cases[ci].sk, hq = cases[ci].hq, hkv = cases[ci].hkv,
                      d = cases[ci].d;
        tt_tensor q = tt_alloc(FLASHATTN_F32, 1, sq, hq, d, 1, 0);
        tt_tensor k = tt_alloc(FLASHATTN_F32, 1, sk, hkv, d, 1, 0);
        tt_tensor v = tt_alloc(FLASHATTN_F32, 1, sk, hkv, d, 1, 0);
        tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
        flashattn_params p = flashattn_params_default();
        p.causal = cases[ci].causal, p.align = cases[ci].align;
        p.window_left = cases[ci].wl, p.window_right = cases[ci].wr;
        p.scale = 0.7f;
        const size_t nq = (size_t)(sq * hq * d), nk = (size_t)(sk * hkv * d);
        double *in[3], *grad[3], *dod = malloc(nq * sizeof(double)), *o = malloc(nq * sizeof(double));
        double *o64 = malloc(nq * sizeof(double));
        const size_t cnt[3] = {nq, nk, nk};
        const tt_tensor *src[3] = {&q, &k, &v};
        for (int g = 0; g < 3; g++) {
            in[g] = malloc(cnt[g] * sizeof(double));
            grad[g] = malloc(cnt[g] * sizeof(double));
            for (size_t x = 0; x < cnt[g]; x++) in[g][x] = ((const float *)src[g]->mem)[x];
        }
        for (size_t x = 0; x < nq; x++) dod[x] = tt_rand_normal(&rng);
        /* the double-input forward is the tensor one on the same values */
        fa_reference_fwd_f64_dbl(&q.t, &k.t, &v.t, &p, in[0], in[1], in[2], o);
        fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, o64, NULL);
        TT_CHECK(max_diff(o, o64, nq) <= 1e-13, "fd case %zu: double forward differs from fa_reference_fwd_f64", ci);
        TT_CHECK(fa_reference_bwd_f64_dbl(&q.t, &k.t, &v.t, &p, in[0], in[1], in[2], dod, grad[0],
                                          grad[1], grad[2]) == 0, "fd case %zu: reference", ci);
        const double h = 1e-5;
        double worst = 0.0, mag = 0.0;
        for (int g = 0; g < 3; g++)
            for (size_t x = 0; x < cnt[g]; x++) {
                double loss[2];
                const double keep = in[g][x];
                for (int sgn = 0; sgn < 2; sgn++) {
                    in[g][x] = keep + (sgn ? -h : h);
                    fa_reference_fwd_f64_dbl(&q.t, &k.t, &v.t, &p, in[0], in[1], in[2], o);
                    loss[sgn] = 0.0;
                    for (size_t y = 0; y < nq; y++) loss[sgn] += o[y] * dod[y];
                }
                in[g][x] = keep;
                const double fd = (loss[0] - loss[1]) / (2 * h);
                worst = fmax(worst, fabs(fd - grad[g][x]));
                mag = fmax(mag, fabs(grad[g][x]));
            }
        /* truncation h^2 ~ 1e-10, cancellation 1e-16 / h ~ 1e-11 */
        TT_CHECK(worst <= 1e-8 * fmax(1.0, mag) && mag > 0.1,
                 "fd case %zu: |finite difference - reference| = %.3g (|grad| %.3g)", ci, worst, mag);
        for (int g = 0; g < 3; g++) free(in[g]), free(grad[g]);
        free(dod), free(o), free(o64);
        tt_free(&q), tt_free(&k), tt_free(&v);
    }
}

/* backward only, into g[0..3) */
static flashattn_status bwd(const fa_kernels *kern, const tt_tensor *q, const tt_tensor *k,
                            const tt_tensor *v, const tt_tensor *o, const float *lse,
                            const tt_tensor *dout, tt_tensor g[3], const flashattn_params *p) {
    return fa_bwd_ex(&q->t, &k->t, &v->t, &o->t, &dout->t, lse, &g[0].t, &g[1].t, &g[2].t, p, NULL,
                     0, kern);
}

/* Bits that must not depend on threads or runs: dk and dv always, dq with
 * deterministic = 1. Nor on block_m (dk, dv: each element is one FMA chain
 * over the query rows; dq: summed per kv-block). */
static void determinism(void) {
    const fa_kernels *isas[8];
    const int n = tt_isas_dot(isas, 8); /* the bf16 case also on the dot-product route */
    static const struct { int64_t sq, sk, hq, hkv, d; int causal; int64_t wl; flashattn_dtype dt; } cases[] = {
        {173, 291, 4, 2, 64, 1, -1, FLASHATTN_F32},
        {97, 250, 2, 1, 80, 0, 33, FLASHATTN_BF16},
        {150, 64, 3, 3, 40, 1, 100, FLASHATTN_F16},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        uint64_t rng = 77 + ci;
        const flashattn_dtype dt = cases[ci].dt;
        const int64_t sq = cases[ci].sq, sk = cases[ci].sk, hq = cases[ci].hq, hkv = cases[ci].hkv,
                      d = cases[ci].d;
        tt_tensor q = tt_alloc(dt, 2, sq, hq, d, 1, 0), k = tt_alloc(dt, 2, sk, hkv, d, 1, 0);
        tt_tensor v = tt_alloc(dt, 2, sk, hkv, d, 1, 0), dout = tt_alloc(dt, 2, sq, hq, d, 1, 0);
        tt_tensor o = tt_alloc(dt, 2, sq, hq, d, 1, 0), g[2][3];
        tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0);
        tt_fill_normal(&v, &rng, 1.0), tt_fill_normal(&dout, &rng, 1.0);
        float *lse = malloc((size_t)(2 * hq * sq) * sizeof(float));
        for (int r = 0; r < 2; r++) {
            g[r][0] = tt_alloc(dt, 2, sq, hq, d, 1, 0);
            g[r][1] = tt_alloc(dt, 2, sk, hkv, d, 1, 0);
            g[r][2] = tt_alloc(dt, 2, sk, hkv, d, 1, 0);
        }
        for (int t = 0; t < n; t++) {
            flashattn_params p = flashattn_params_default();
            p.causal = cases[ci].causal, p.window_left = cases[ci].wl;
            TT_CHECK(fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]) == 0, "forward");
            p.block_n = 32; /* many kv-blocks: several chunks, several items per thread */
            for (int det = 0; det < 2; det++) {
                p.deterministic = det, p.num_threads = 1, p.block_m = 0;
                TT_CHECK(bwd(isas[t], &q, &k, &v, &o, lse, &dout, g[0], &p) == 0,
                         "[%s] case %zu: %s", isas[t]->isa, ci, flashattn_last_error());
                /* threads (3 twice: a repeated run), then block_m */
                static const int threads[] = {2, 3, 3, 2, 2}, block_m[] = {0, 0, 0, 16, 200};
                for (size_t r = 0; r < sizeof threads / sizeof threads[0]; r++) {
                    p.num_threads = threads[r], p.block_m = block_m[r];
                    bwd(isas[t], &q, &k, &v, &o, lse, &dout, g[1], &p);
                    for (int x = det ? 0 : 1; x < 3; x++)
                        TT_CHECK(memcmp(g[0][x].mem, g[1][x].mem, g[0][x].bytes) == 0,
                                 "[%s] case %zu det=%d: gradient %d differs with %d threads, block_m %d",
                                 isas[t]->isa, ci, det, x, threads[r], block_m[r]);
                }
            }
        }
        for (int r = 0; r < 2; r++) tt_free(&g[r][0]), tt_free(&g[r][1]), tt_free(&g[r][2]);
        tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout), tt_free(&o);
        free(lse);
    }
}

/* Passes of fewer groups than the batch on several threads (their
 * ranges set pass after pass between the barriers): the same bits as one
 * thread, whose passes are one group each. The work floor of a pass
 * (plan/tiles_bwd.c) keeps short problems in one pass, so this one is
 * large enough to be cut; the plan is checked to cut it. The drivers'
 * passes are the same on every table, so the last (widest) runs it. */
static void passes_on_threads(void) {
    const int64_t b = 2, s = 320, hq = 8, hkv = 4, d = 64;
    const flashattn_dtype dt = FLASHATTN_F32;
    uint64_t rng = 4242;
    tt_tensor q = tt_alloc(dt, b, s, hq, d, 1, 0), k = tt_alloc(dt, b, s, hkv, d, 1, 0);
    tt_tensor v = tt_alloc(dt, b, s, hkv, d, 1, 0), dout = tt_alloc(dt, b, s, hq, d, 1, 0);
    tt_tensor o = tt_alloc(dt, b, s, hq, d, 1, 0), g[2][3];
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0);
    tt_fill_normal(&v, &rng, 1.0), tt_fill_normal(&dout, &rng, 1.0);
    float *lse = malloc((size_t)(b * hq * s) * sizeof(float));
    for (int r = 0; r < 2; r++) {
        g[r][0] = tt_alloc(dt, b, s, hq, d, 1, 0);
        g[r][1] = tt_alloc(dt, b, s, hkv, d, 1, 0);
        g[r][2] = tt_alloc(dt, b, s, hkv, d, 1, 0);
    }
    const fa_kernels *isas[8];
    const fa_kernels *kern = isas[tt_isas(isas, 8) - 1];
    static const int threads[] = {2, 3};
    for (size_t r = 0; r < sizeof threads / sizeof threads[0]; r++) {
        flashattn_params p = flashattn_params_default(), rp;
        p.num_threads = threads[r];
        fa_problem pb;
        fa_bwd_plan plan;
        TT_CHECK(fa_read_params(&p, &rp) == FLASHATTN_OK &&
                     fa_validate_fwd(&q.t, &k.t, &v.t, &o.t, NULL, &rp, &pb) == FLASHATTN_OK &&
                     fa_plan_bwd(&pb, dt, &rp, kern, &plan) == FLASHATTN_OK &&
                     plan.groups_per_pass >= threads[r] && plan.groups_per_pass < b * hkv,
                 "%d threads: the plan makes no passes of part of the batch (%lld groups a pass)",
                 threads[r], (long long)plan.groups_per_pass);
    }
    flashattn_params p = flashattn_params_default();
    TT_CHECK(fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, kern) == 0, "forward");
    for (int det = 0; det < 2; det++) {
        p.deterministic = det, p.num_threads = 1;
        TT_CHECK(bwd(kern, &q, &k, &v, &o, lse, &dout, g[0], &p) == 0, "[%s] %s", kern->isa, flashattn_last_error());
        for (size_t r = 0; r < sizeof threads / sizeof threads[0]; r++) {
            p.num_threads = threads[r];
            TT_CHECK(bwd(kern, &q, &k, &v, &o, lse, &dout, g[1], &p) == 0, "[%s] %s", kern->isa,
                     flashattn_last_error());
            /* dq's sums follow the items' order unless deterministic */
            for (int x = det ? 0 : 1; x < 3; x++)
                TT_CHECK(memcmp(g[0][x].mem, g[1][x].mem, g[0][x].bytes) == 0,
                         "[%s] det=%d: gradient %d differs between 1 thread and %d", kern->isa, det, x, threads[r]);
        }
    }
    for (int r = 0; r < 2; r++) tt_free(&g[r][0]), tt_free(&g[r][1]), tt_free(&g[r][2]);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout), tt_free(&o);
    free(lse);
}

/* Error paths: each returns its code, writes a message and leaves dq, dk,
 * dv exactly as they were (sentinel-filled). */
typedef struct {
    tt_tensor q, k, v, o, dout, dq, dk, dv;
    float *lse;
    flashattn_params p;
} fixture;

static fixture make(void) {
    fixture f;
    uint64_t rng = 9;
    f.q = tt_alloc(FLASHATTN_F32, 2, 9, 4, 32, 1, 0);
    f.k = tt_alloc(FLASHATTN_F32, 2, 11, 2, 32, 1, 0);
    f.v = tt_alloc(FLASHATTN_F32, 2, 11, 2, 32, 1, 0);
    f.o = tt_alloc(FLASHATTN_F32, 2, 9, 4, 32, 1, 0);
    f.dout = tt_alloc(FLASHATTN_F32, 2, 9, 4, 32, 1, 0);
    f.dq = tt_alloc(FLASHATTN_F32, 2, 9, 4, 32, 1, 0);
    f.dk = tt_alloc(FLASHATTN_BF16, 2, 11, 2, 32, 1, 0);
    f.dv = tt_alloc(FLASHATTN_F16, 2, 11, 2, 32, 0, 0);
    tt_fill_normal(&f.q, &rng, 1.0), tt_fill_normal(&f.k, &rng, 1.0);
    tt_fill_normal(&f.v, &rng, 1.0), tt_fill_normal(&f.dout, &rng, 1.0);
    f.lse = malloc(2 * 4 * 9 * sizeof(float));
    f.p = flashattn_params_default();
    flashattn_fwd(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, &f.p, NULL, 0);
    return f;
}

static void release(fixture *f) {
    tt_free(&f->q), tt_free(&f->k), tt_free(&f->v), tt_free(&f->o), tt_free(&f->dout);
    tt_free(&f->dq), tt_free(&f->dk), tt_free(&f->dv);
    free(f->lse);
}

static flashattn_status call(fixture *f, void *ws, size_t bytes) {
    return flashattn_bwd(&f->q.t, &f->k.t, &f->v.t, &f->o.t, &f->dout.t, f->lse, &f->dq.t, &f->dk.t,
                         &f->dv.t, &f->p, ws, bytes);
}

static int untouched(const fixture *f) {
    return tt_untouched(f->dq.mem, f->dq.bytes) && tt_untouched(f->dk.mem, f->dk.bytes) &&
           tt_untouched(f->dv.mem, f->dv.bytes);
}

static void expect(fixture *f, flashattn_status want, const char *what) {
    size_t ws = 0;
    flashattn_status sq = flashattn_bwd_workspace_size(&f->q.t, &f->k.t, &f->v.t, &f->o.t, &f->dout.t,
                                                       f->lse, &f->dq.t, &f->dk.t, &f->dv.t, &f->p, &ws);
    flashattn_status s = call(f, NULL, 0);
    TT_CHECK(s == want, "%s: got %d (%s), want %d", what, s, flashattn_last_error(), want);
    TT_CHECK(sq == want, "%s: workspace query got %d, want %d", what, sq, want);
    TT_CHECK(s == FLASHATTN_OK || strlen(flashattn_last_error()) > 0, "%s: no message", what);
    TT_CHECK(untouched(f), "%s: an output was written", what);
}

#define CASE(want, mutation)         \
    do {                             \
        fixture f = make();          \
        mutation;                    \
        expect(&f, want, #mutation); \
        release(&f);                 \
    } while (0)

static void errors(void) {
    {
        fixture f = make();
        TT_CHECK(call(&f, NULL, 0) == FLASHATTN_OK, "valid fixture: %s", flashattn_last_error());
        TT_CHECK(!tt_untouched(f.dq.mem, f.dq.bytes) && !tt_untouched(f.dk.mem, f.dk.bytes) &&
                     !tt_untouched(f.dv.mem, f.dv.bytes), "valid fixture left an output unwritten");
        release(&f);
    }
    CASE(FLASHATTN_ERR_NULL_POINTER, f.dq.t.data = NULL);
    CASE(FLASHATTN_ERR_NULL_POINTER, f.dout.t.data = NULL);
    CASE(FLASHATTN_ERR_NULL_POINTER, f.o.t.data = NULL);
    CASE(FLASHATTN_ERR_NULL_POINTER, f.lse = (free(f.lse), NULL));
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.dq.t.seqlen = 8);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.dk.t.heads = 4);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.dv.t.seqlen = 10);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.dout.t.batch = 1);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.dout.t.seqlen = -1);
    CASE(FLASHATTN_ERR_BAD_HEAD_DIM, f.dk.t.head_dim = 0);
    CASE(FLASHATTN_ERR_BAD_HEADS, f.k.t.heads = f.v.t.heads = f.dk.t.heads = f.dv.t.heads = 3);
    CASE(FLASHATTN_ERR_BAD_DTYPE, f.dq.t.dtype = (flashattn_dtype)7);
    CASE(FLASHATTN_ERR_BAD_DTYPE, f.dout.t.dtype = (flashattn_dtype)-1);
    CASE(FLASHATTN_ERR_BAD_DTYPE, f.v.t.dtype = FLASHATTN_F16);
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.dv.t.stride_dim = 2);
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.dk.t.stride_seq = 0);  /* rows coincide */
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.dq.t.stride_head = 16); /* rows overlap */
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.causal = 3);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.struct_size = 4);
    CASE(FLASHATTN_ERR_BAD_TILE, f.p.block_m = 5000);
    CASE(FLASHATTN_ERR_BAD_TILE, f.p.block_n = -2);
    CASE(FLASHATTN_ERR_OVERFLOW, f.dk.t.stride_seq = INT64_MAX / 4);
    {
        fixture f = make();
        flashattn_status s = flashattn_bwd(&f.q.t, &f.k.t, &f.v.t, &f.o.t, NULL, f.lse, &f.dq.t,
                                           &f.dk.t, &f.dv.t, &f.p, NULL, 0);
        TT_CHECK(s == FLASHATTN_ERR_NULL_POINTER && untouched(&f), "dout == NULL: got %d", s);
        s = flashattn_bwd_workspace_size(&f.q.t, &f.k.t, &f.v.t, &f.o.t, &f.dout.t, f.lse, &f.dq.t,
                                         &f.dk.t, &f.dv.t, &f.p, NULL);
        TT_CHECK(s == FLASHATTN_ERR_NULL_POINTER, "workspace_bytes == NULL: got %d", s);
        release(&f);
    }
    {
        fixture f = make();
        size_t ws = 0;
        TT_CHECK(flashattn_bwd_workspace_size(&f.q.t, &f.k.t, &f.v.t, &f.o.t, &f.dout.t, f.lse,
                                              &f.dq.t, &f.dk.t, &f.dv.t, &f.p, &ws) == 0, "query");
        void *w = malloc(ws);
        TT_CHECK(call(&f, w, ws - 1) == FLASHATTN_ERR_WORKSPACE_TOO_SMALL && untouched(&f),
                 "workspace one byte short");
        TT_CHECK(call(&f, w, ws) == FLASHATTN_OK, "exact workspace: %s", flashattn_last_error());
        free(w);
        release(&f);
    }
}

/* The backward's workspace is O(seq), far below seq^2 floats. */
static void workspace_is_linear(void) {
    const int64_t S = 65536, D = 128;
    flashattn_tensor t = flashattn_tensor_bshd((void *)&t, FLASHATTN_F32, 1, S, 1, D);
    float lse;
    size_t ws = 0;
    flashattn_params p = flashattn_params_default();
    for (p.deterministic = 0; p.deterministic < 2; p.deterministic++) {
        TT_CHECK(flashattn_bwd_workspace_size(&t, &t, &t, &t, &t, &lse, &t, &t, &t, &p, &ws) == 0,
                 "query: %s", flashattn_last_error());
        /* packed Q and dO (both orientations) plus 1 or 8 dQ accumulators */
        const double per_q = (double)S * D * 4;
        TT_CHECK(ws < per_q * (4.2 + (p.deterministic ? 8 : 1)) + (32 << 20) && ws < S * (double)S * 4 / 20,
                 "det=%d: workspace %zu is not O(seq)", p.deterministic, ws);
    }
}

/* The backward calls exp2_sum with S - LSE, which rounding can put a few
 * ulp above 0: every path must stay accurate there. */
static void exp2_slightly_positive(void) {
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    for (int t = 0; t < n; t++) {
        float x[40];
        double want[40];
        for (int i = 0; i < 40; i++) {
            x[i] = (float)(i - 20) * 3e-6f;
            want[i] = exp2((double)x[i]);
        }
        isas[t]->exp2_sum(x, 40, 0.0f);
        double worst = 0.0;
        for (int i = 0; i < 40; i++) worst = fmax(worst, fabs(x[i] - want[i]) / want[i]);
        TT_CHECK(worst <= 4 * 1.2e-7, /* 4 ulp of values in [1, 2) */ "[%s] exp2 near 0: relative error %.3g", isas[t]->isa, worst);
    }
}

int main(void) {
    finite_differences();
    exp2_slightly_positive();
    workspace_is_linear();
    errors();
    if (!tt_quick()) determinism(); /* every case twice on every table */
    if (!tt_quick()) passes_on_threads();
    sweep();
    if (!tt_quick()) streamed_stores(); /* 4100 keys a case */
    return tt_finish("test_backward");
}
