/*
 * Score modifiers (softcap, ALiBi, attention sinks), alone and combined,
 * with causal / window masks in both alignments, GQA, seq_q != seq_k, every
 * dtype, on every ISA path:
 *   forward O and LSE against the FP64 reference (test_forward's rule: f32
 *     inputs within 1e-5, 16-bit within twice plain f32 attention's error);
 *   backward dQ, dK, dV against the FP64 reference gradients (test_backward's
 *     rule, fa_bwd_pass_bounds), and dsinks against the reference's;
 *   decode (a full contiguous cache, so the cache is the dense K and V)
 *     with 1 and 3 splits, with bias and mask arrays of every layout: the
 *     sink must join the merged softmax once;
 *   bad modifiers: a status, nothing written.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/decode.h"
#include "api/forward.h"
#include "core/dtype.h"
#include "kernels/kernels.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_f64.h"
#include "reference/compare.h"
#include "testutil.h"

static const char *dtn(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    int causal, align;
    int64_t wl, wr;
    flashattn_dtype dt;
    float softcap;
    int alibi;  /* 0 off, 1 per head, 2 per (batch, head) */
    int sinks;
    int tiles;  /* 1: block_m 32, block_n 64 (else automatic) */
    int bias;   /* 0 off, 1 [b, h, sq, sk] of the case's dtype, 2 [1, 1, sq, sk] f32, 3 [b, 1, 1, sk] bf16 */
    int mask;   /* 0 off, 1 random with hidden rows and tiles, 2 key padding [b, 1, 1, sk], 3 documents [1, 1, sq, sk] */
    float scale; /* 0: the default */
} mcase;

typedef struct {
    float slopes[64], sinks[16];
    flashattn_scores bias, mask;
    void *bias_mem;
    uint8_t *mask_mem;
} mods;

/* The bias and mask arrays of a case. */
static void score_arrays(const mcase *c, mods *m, uint64_t *rng) {
    m->bias_mem = NULL, m->mask_mem = NULL;
    const int64_t sq = c->sq, sk = c->sk, n = c->b * c->hq * sq * sk + 1;
    if (c->bias) {
        const flashattn_dtype dt = c->bias == 1 ? c->dt : c->bias == 2 ? FLASHATTN_F32 : FLASHATTN_BF16;
        const size_t es = flashattn_dtype_size(dt);
        m->bias_mem = malloc((size_t)n * es);
        for (int64_t x = 0; x < n; x++) {
            const float v = (float)tt_rand_normal(rng);
            if (dt == FLASHATTN_F32) ((float *)m->bias_mem)[x] = v;
            else if (dt == FLASHATTN_F16) ((uint16_t *)m->bias_mem)[x] = fa_f32_to_f16(v);
            else ((uint16_t *)m->bias_mem)[x] = fa_f32_to_bf16(v);
        }
        flashattn_scores t = {m->bias_mem, dt, c->b, c->hq, sq, sk, c->hq * sq * sk, sq * sk, sk, 1};
        if (c->bias == 2) t.batch = t.heads = 1, t.stride_batch = t.stride_head = 0;
        if (c->bias == 3) t.heads = t.seq_q = 1, t.stride_batch = sk, t.stride_head = 7, t.stride_q = 0;
        m->bias = t;
    }
    if (c->mask) {
        m->mask_mem = malloc((size_t)n);
        /* [b, h, sq, sk], padded: the key stride is 1, the query stride sk + 3 */
        const int64_t lq = sk + 3;
        flashattn_scores t = {m->mask_mem, FLASHATTN_F32, c->b, c->hq, sq, sk, c->hq * sq * lq, sq * lq, lq, 1};
        free(m->mask_mem);
        m->mask_mem = malloc((size_t)(c->b * c->hq * sq * lq + 1));
        t.data = m->mask_mem;
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t h = 0; h < c->hq; h++)
                for (int64_t i = 0; i < sq; i++)
                    for (int64_t j = 0; j < sk; j++) {
                        uint8_t v = 1;
                        if (c->mask == 1) /* hidden: row 3, keys 64..127, and a random 30% */
                            v = i != 3 && (j < 64 || j >= 128) && tt_rand_u64(rng) % 10 >= 3;
                        if (c->mask == 2) v = j < sk - 7 * b - 3;
                        if (c->mask == 3) v = i * 4 / (sq ? sq : 1) == j * 4 / (sk ? sk : 1);
                        /* "attends" as any nonzero byte, one value to a 16 x 16 square
                         * (so a tile's summary sees whole runs of 0x80 or 0x7f) */
                        static const uint8_t yes[8] = {1, 0x80, 0xff, 0x7f, 2, 0x40, 0x81, 0x10};
                        m->mask_mem[((b * c->hq + h) * sq + i) * lq + j] = v ? yes[(i / 16 + j / 16) % 8] : 0;
                    }
        if (c->mask == 2) t.heads = t.seq_q = 1, t.stride_head = t.stride_q = 0;
        if (c->mask == 3) t.batch = t.heads = 1;
        m->mask = t;
    }
}

static void describe(const mcase *c, char *buf, size_t n) {
    snprintf(buf, n,
             "b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d align=%d win=(%lld,%lld) %s "
             "softcap=%g alibi=%d sinks=%d tiles=%d bias=%d mask=%d scale=%g",
             (long long)c->b, (long long)c->sq, (long long)c->sk, (long long)c->hq, (long long)c->hkv,
             (long long)c->d, c->causal, c->align, (long long)c->wl, (long long)c->wr, dtn(c->dt),
             (double)c->softcap, c->alibi, c->sinks, c->tiles, c->bias, c->mask, (double)c->scale);
}

static flashattn_params params_of(const mcase *c, mods *m, uint64_t *rng) {
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal, p.align = c->align;
    p.window_left = c->wl, p.window_right = c->wr;
    p.softcap = c->softcap;
    p.scale = c->scale;
    if (c->tiles) p.block_m = 32, p.block_n = 64;
    for (int x = 0; x < 64; x++) m->slopes[x] = (float)(0.05 + 0.5 * (double)(tt_rand_u64(rng) % 1000) / 1000.0);
    for (int x = 0; x < 16; x++) m->sinks[x] = (float)(tt_rand_normal(rng) * 2.0);
    if (c->alibi) p.alibi_slopes = m->slopes, p.alibi_batch_stride = c->alibi == 2 ? c->hq : 0;
    if (c->sinks) p.sinks = m->sinks;
    score_arrays(c, m, rng);
    if (c->bias) p.bias = &m->bias;
    if (c->mask) p.mask = &m->mask;
    return p;
}

/* dL/dbias in the bias' own layout where the backward sums it alone
 * (flashattn.h), else whole; against the reference's whole gradient summed
 * over the broadcast dimensions. Its error comes from f32 arithmetic and
 * from D = rowsum(dO * O) on the O given (rounded to its dtype), so the
 * bound is that rounding times the largest sum |dO * O|, plus f32's, per
 * element summed. */
static void check_dbias(const mcase *c, const mods *m, const tt_tensor *q, const tt_tensor *k,
                        const tt_tensor *v, const tt_tensor *o, const tt_tensor *dout, float *lse,
                        const flashattn_params *p, const fa_kernels *kern, const char *desc) {
    const int64_t B = c->b, H = c->hq, SQ = c->sq, SK = c->sk, full = B * H * SQ * SK;
    flashattn_scores t = m->bias;
    const int own = !((t.batch == 1 && B > 1) || (t.heads == 1 && H > 1 && c->hkv > 1) || (t.seq_k == 1 && SK > 1));
    if (!own) t.batch = B, t.heads = H, t.seq_q = SQ, t.seq_k = SK;
    t.dtype = FLASHATTN_F32, t.stride_k = 1, t.stride_q = t.seq_k + 2; /* padded rows */
    t.stride_head = t.seq_q * t.stride_q, t.stride_batch = t.heads * t.stride_head;
    const size_t n = (size_t)(t.batch * t.stride_batch + 1);
    float *db = malloc(n * sizeof(float));
    double *ref = malloc((size_t)(full + 1) * sizeof(double)), *want = calloc(n, sizeof(double));
    for (size_t x = 0; x < n; x++) db[x] = 12345.0f; /* every element must be written */
    t.data = db;
    flashattn_params pd = *p;
    pd.dbias = &t;
    tt_tensor dq = tt_alloc(c->dt, B, SQ, H, c->d, 1, 0), dk = tt_alloc(c->dt, B, SK, c->hkv, c->d, 1, 0);
    tt_tensor dv = tt_alloc(c->dt, B, SK, c->hkv, c->d, 1, 0);
    const flashattn_status s = fa_bwd_ex(&q->t, &k->t, &v->t, &o->t, &dout->t, lse, &dq.t, &dk.t, &dv.t, &pd,
                                         NULL, 0, kern);
    TT_CHECK(s == FLASHATTN_OK && fa_reference_dbias_f64(&q->t, &k->t, &v->t, &dout->t, p, ref) == 0,
             "[%s] dbias status %d (%s): %s", kern->isa, s, flashattn_last_error(), desc);
    double dmax = 0.0, rmax = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < SQ; i++) {
                double dsum = 0.0;
                for (int64_t x = 0; x < c->d; x++)
                    dsum += fabs(fa_tensor_get(&dout->t, b, i, h, x) * fa_tensor_get(&o->t, b, i, h, x));
                dmax = fmax(dmax, dsum);
                for (int64_t j = 0; j < SK; j++) {
                    const double r = ref[((b * H + h) * SQ + i) * SK + j];
                    rmax = fmax(rmax, fabs(r));
                    want[(t.batch > 1 ? b : 0) * t.stride_batch + (t.heads > 1 ? h : 0) * t.stride_head +
                         (t.seq_q > 1 ? i : 0) * t.stride_q + j] += r;
                }
            }
    const double summed = (double)full / (double)(t.batch * t.heads * t.seq_q * t.seq_k);
    const double eps = c->dt == FLASHATTN_F32 ? 1e-6 : c->dt == FLASHATTN_F16 ? 2e-3 : 1.6e-2;
    const double bound = (eps * dmax + 1e-5 * (1.0 + rmax)) * summed;
    double err = 0.0;
    for (int64_t b = 0; s == FLASHATTN_OK && b < t.batch; b++)
        for (int64_t h = 0; h < t.heads; h++)
            for (int64_t i = 0; i < t.seq_q; i++)
                for (int64_t j = 0; j < t.seq_k; j++) {
                    const size_t at = (size_t)(b * t.stride_batch + h * t.stride_head + i * t.stride_q + j);
                    err = fmax(err, fabs(db[at] - want[at]));
                }
    TT_CHECK(s != FLASHATTN_OK || err <= bound, "[%s] dbias (%s layout) max err %.3g > %.3g: %s", kern->isa,
             own ? "the bias'" : "whole", err, bound, desc);
    TT_CHECK(s != FLASHATTN_OK || db[t.seq_k] == 12345.0f, "[%s] dbias wrote into its row padding: %s", kern->isa, desc);
    free(db), free(ref), free(want);
    tt_free(&dq), tt_free(&dk), tt_free(&dv);
}

static void run_case(const mcase *c, uint64_t seed) {
    uint64_t rng = seed;
    mods m;
    const flashattn_params p0 = params_of(c, &m, &rng);
    tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_tensor k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
    tt_tensor v = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 0, 0);
    tt_tensor dout = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_fill_normal(&q, &rng, 1.5), tt_fill_normal(&k, &rng, 1.5);
    tt_fill_normal(&v, &rng, 1.0), tt_fill_normal(&dout, &rng, 1.0);
    char desc[320];
    describe(c, desc, sizeof desc);
    const size_t nq = (size_t)(c->b * c->sq * c->hq * c->d), nk = (size_t)(c->b * c->sk * c->hkv * c->d);
    const size_t ln = (size_t)(c->b * c->hq * c->sq);
    double *ref = malloc((nq + 1) * sizeof(double)), *rlse = malloc((ln + 1) * sizeof(double));
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p0, ref, rlse) == 0, "reference: %s", desc);
    const double bound = tt_fwd_bound(c->dt, &q.t, &k.t, &v.t, &p0, ref, nq);
    double *g[3], *plain[3], mag[3];
    const size_t cnt[3] = {nq, nk, nk};
    for (int x = 0; x < 3; x++) g[x] = malloc((cnt[x] + 1) * sizeof(double)), plain[x] = malloc((cnt[x] + 1) * sizeof(double));
    TT_CHECK(fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p0, g[0], g[1], g[2]) == 0, "reference bwd: %s", desc);
    double rsink[16] = {0};
    if (c->sinks) TT_CHECK(fa_reference_dsinks_f64(&q.t, &k.t, &v.t, &dout.t, &p0, rsink) == 0, "dsinks ref: %s", desc);

    const fa_kernels *isas[8];
    const int n = tt_isas(isas, 8);
    for (int t = 0; t < n; t++) {
        const char *isa = isas[t]->isa;
        flashattn_params p = p0;
        float dsinks[16];
        p.dsinks = c->sinks ? dsinks : NULL;
        tt_tensor o = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
        tt_tensor dq = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
        tt_tensor dk = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
        tt_tensor dv = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
        float *lse = malloc((ln + 1) * sizeof(float));
        flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]);
        TT_CHECK(s == FLASHATTN_OK, "[%s] fwd status %d (%s): %s", isa, s, flashattn_last_error(), desc);
        if (s == FLASHATTN_OK) {
            const double err = fa_max_abs_err(&o.t, ref);
            TT_CHECK(err <= bound, "[%s] o max err %.3g > %.3g: %s", isa, err, bound, desc);
            int inf_ok = 0;
            const double lerr = fa_lse_err(lse, rlse, ln, &inf_ok);
            /* test_forward's rule: inputs of sigma 1.5 give logits 2.25 times as large */
            TT_CHECK(lerr <= (c->dt == FLASHATTN_F32 ? 1e-5 : 1e-4) * 2.25 && inf_ok,
                     "[%s] lse err %.3g, -inf rows %s: %s", isa, lerr, inf_ok ? "ok" : "wrong", desc);
            /* a forward without the LSE may take another route (decode's): same rule */
            tt_tensor o2 = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
            s = fa_fwd_ex(&q.t, &k.t, &v.t, &o2.t, NULL, &p, NULL, 0, isas[t]);
            const double err2 = fa_max_abs_err(&o2.t, ref);
            TT_CHECK(s == FLASHATTN_OK && err2 <= bound, "[%s] o (no lse) err %.3g > %.3g: %s", isa, err2, bound, desc);
            tt_free(&o2);

            s = fa_bwd_ex(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &dq.t, &dk.t, &dv.t, &p, NULL, 0, isas[t]);
            TT_CHECK(s == FLASHATTN_OK, "[%s] bwd status %d (%s): %s", isa, s, flashattn_last_error(), desc);
            TT_CHECK(fa_reference_bwd_std_f32(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &p, c->dt, plain[0],
                                              plain[1], plain[2], mag) == 0, "plain: %s", desc);
            const tt_tensor *got[3] = {&dq, &dk, &dv};
            static const char *gname[3] = {"dq", "dk", "dv"};
            for (int x = 0; s == FLASHATTN_OK && x < 3; x++) {
                tt_grad_errs r;
                TT_CHECK(tt_grad_pass(&got[x]->t, g[x], plain[x], cnt[x], mag[x], &r),
                         "[%s] %s max err %.3g (bound %.3g), rms %.3g (bound %.3g): %s", isa, gname[x], r.max,
                         r.max_bound, r.rms, r.rms_bound, desc);
            }
            if (c->bias && s == FLASHATTN_OK) check_dbias(c, &m, &q, &k, &v, &o, &dout, lse, &p, isas[t], desc);
            /* dsinks from the O and LSE given, as D is: their rounding
             * (to o's dtype) bounds it, times the sum of the terms */
            for (int64_t h = 0; c->sinks && s == FLASHATTN_OK && h < c->hq; h++) {
                double terms = 0.0;
                for (int64_t b = 0; b < c->b; b++)
                    for (int64_t i = 0; i < c->sq; i++) {
                        double D = 0.0;
                        for (int64_t x = 0; x < c->d; x++) {
                            const size_t at = (size_t)(((b * c->sq + i) * c->hq + h) * c->d + x);
                            D += fabs(fa_tensor_get(&dout.t, b, i, h, x) * ref[at]);
                        }
                        terms += exp((double)m.sinks[h] - rlse[(b * c->hq + h) * c->sq + i]) * D;
                    }
                const double eps = c->dt == FLASHATTN_F32 ? 1e-5 : c->dt == FLASHATTN_F16 ? 2e-3 : 1.6e-2;
                TT_CHECK(fabs(dsinks[h] - rsink[h]) <= eps * terms + 1e-7,
                         "[%s] dsinks[%lld] %.7g vs %.7g (terms %.3g): %s", isa, (long long)h,
                         (double)dsinks[h], rsink[h], terms, desc);
            }
        }
        free(lse);
        tt_free(&o), tt_free(&dq), tt_free(&dk), tt_free(&dv);
    }
    for (int x = 0; x < 3; x++) free(g[x]), free(plain[x]);
    free(ref), free(rlse);
    free(m.bias_mem), free(m.mask_mem);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout);
}

static void sweep(void) {
    static const int64_t seqs[][2] = {{1, 1}, {37, 37}, {100, 160}, {160, 100}, {3, 200}, {0, 5}, {5, 0}, {130, 130}};
    static const int64_t heads[][2] = {{2, 2}, {4, 1}, {6, 2}};
    static const int64_t dims[] = {16, 64, 40, 128};
    static const int64_t masks[][4] = {{0, 0, -1, -1}, {1, 0, -1, -1}, {1, 1, -1, -1}, {0, 0, 12, 4}, {0, 1, 8, 0}};
    static const float caps[] = {0.0f, 2.0f, 30.0f};
    uint64_t rng = 99;
    for (int i = 0; i < 40; i++) {
        mcase c;
        memset(&c, 0, sizeof c);
        c.b = 1 + (int64_t)(tt_rand_u64(&rng) % 2);
        c.sq = seqs[i % 8][0], c.sk = seqs[i % 8][1];
        c.hq = heads[i % 3][0], c.hkv = heads[i % 3][1];
        c.d = dims[(i / 3) % 4];
        const int64_t *mk = masks[i % 5];
        c.causal = (int)mk[0], c.align = (int)mk[1], c.wl = mk[2], c.wr = mk[3];
        c.dt = (flashattn_dtype)(i / 5 % 3);
        /* each modifier alone, then together */
        const int combo = i % 4;
        c.softcap = combo == 0 || combo == 3 ? caps[1 + i / 4 % 2] : 0.0f;
        c.alibi = combo == 1 || combo == 3 ? 1 + i / 4 % 2 : 0;
        c.sinks = combo == 2 || combo == 3;
        c.tiles = i % 3 == 0;
        run_case(&c, 500 + (uint64_t)i);
    }
    /* bias and masks: alone, with the others, every dtype */
    for (int i = 0; i < 32; i++) {
        mcase c;
        memset(&c, 0, sizeof c);
        c.b = 2;
        c.sq = seqs[(i + 1) % 8][0] + 40, c.sk = seqs[(i + 1) % 8][1] + 60;
        c.hq = heads[i % 3][0], c.hkv = heads[i % 3][1];
        c.d = dims[(i / 2) % 4];
        const int64_t *mk = masks[i % 5];
        c.causal = (int)mk[0], c.align = (int)mk[1], c.wl = mk[2], c.wr = mk[3];
        c.dt = (flashattn_dtype)(i / 3 % 3);
        c.bias = i % 4 == 0 ? 0 : 1 + i % 3;
        c.mask = i % 4 == 1 ? 0 : 1 + i / 4 % 3;
        c.softcap = i % 8 == 3 ? 10.0f : 0.0f;
        c.alibi = i % 8 == 5;
        c.sinks = i % 8 == 7;
        c.tiles = i % 2;
        run_case(&c, 900 + (uint64_t)i);
    }
    /* broadcast biases whose gradient the backward sums itself: over the
     * heads of one kv-head (MQA) and over the queries */
    for (int i = 0; i < 4; i++) {
        mcase c;
        memset(&c, 0, sizeof c);
        c.b = 1, c.sq = 70 + 30 * i, c.sk = 90, c.hq = 4, c.hkv = 1, c.d = 64;
        c.causal = i % 2, c.wl = c.wr = -1;
        c.dt = (flashattn_dtype)(i % 3);
        c.bias = 2 + i % 2;
        c.softcap = i == 3 ? 10.0f : 0.0f;
        c.mask = i == 2 ? 1 : 0;
        c.tiles = i % 2;
        run_case(&c, 950 + (uint64_t)i);
    }
}

/* A boolean mask equal to causal gives the built-in causal's bits (same
 * tiles): the hidden tiles are skipped, and in the others the hidden keys
 * are -inf, which add exact zeros to every sum. */
static void mask_as_causal(void) {
    const int64_t b = 1, sq = 200, sk = 260, hq = 2, d = 64;
    uint64_t rng = 17;
    tt_tensor q = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0), k = tt_alloc(FLASHATTN_F32, b, sk, hq, d, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, b, sk, hq, d, 1, 0), dout = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    tt_fill_normal(&dout, &rng, 1.0);
    uint8_t *mm = malloc((size_t)(sq * sk));
    for (int64_t i = 0; i < sq; i++)
        for (int64_t j = 0; j < sk; j++) mm[i * sk + j] = j <= i + sk - sq;
    const flashattn_scores mask = {mm, FLASHATTN_F32, 1, 1, sq, sk, 0, 0, sk, 1};
    const fa_kernels *isas[8];
    const int n = tt_isas(isas, 8);
    for (int t = 0; t < n; t++) {
        tt_tensor o[2], dq[2], dk[2], dv[2];
        float lse[2][2 * 200];
        for (int w = 0; w < 2; w++) {
            flashattn_params p = flashattn_params_default();
            p.block_m = 32, p.block_n = 64, p.deterministic = 1;
            if (w) p.mask = &mask; else p.causal = 1;
            o[w] = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0), dq[w] = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0);
            dk[w] = tt_alloc(FLASHATTN_F32, b, sk, hq, d, 1, 0), dv[w] = tt_alloc(FLASHATTN_F32, b, sk, hq, d, 1, 0);
            TT_CHECK(fa_fwd_ex(&q.t, &k.t, &v.t, &o[w].t, lse[w], &p, NULL, 0, isas[t]) == FLASHATTN_OK &&
                         fa_bwd_ex(&q.t, &k.t, &v.t, &o[w].t, &dout.t, lse[w], &dq[w].t, &dk[w].t, &dv[w].t,
                                   &p, NULL, 0, isas[t]) == FLASHATTN_OK,
                     "[%s] mask as causal: status", isas[t]->isa);
        }
        TT_CHECK(!memcmp(o[0].mem, o[1].mem, o[0].bytes) && !memcmp(lse[0], lse[1], sizeof lse[0]),
                 "[%s] a causal boolean mask's O/LSE differ from causal's", isas[t]->isa);
        TT_CHECK(!memcmp(dq[0].mem, dq[1].mem, dq[0].bytes) && !memcmp(dk[0].mem, dk[1].mem, dk[0].bytes) &&
                     !memcmp(dv[0].mem, dv[1].mem, dv[0].bytes),
                 "[%s] a causal boolean mask's gradients differ from causal's", isas[t]->isa);
        for (int w = 0; w < 2; w++) tt_free(&o[w]), tt_free(&dq[w]), tt_free(&dk[w]), tt_free(&dv[w]);
    }
    free(mm);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout);
}

/* A boolean mask's forward is the same bits whatever block_m and the
 * thread count (the strips of a mixed tile stop at their rows' last open
 * key, and what they leave out adds exact zeros): document masks whose
 * boundaries cut the q-blocks, a random mask with hidden rows and tiles. */
static void mask_block_m_bits(void) {
    const int64_t b = 1, sq = 300, sk = 300, hq = 2, d = 64;
    uint64_t rng = 23;
    tt_tensor q = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0), k = tt_alloc(FLASHATTN_F32, b, sk, hq, d, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, b, sk, hq, d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    uint8_t *mm = malloc((size_t)(sq * sk));
    static const int blocks[4][2] = {{16, 1}, {48, 2}, {96, 1}, {0, 2}};
    const fa_kernels *isas[8];
    const int n = tt_isas(isas, 8);
    for (int kind = 0; kind < 2; kind++) {
        for (int64_t i = 0; i < sq; i++)
            for (int64_t j = 0; j < sk; j++)
                mm[i * sk + j] = kind == 0 ? i / 70 == j / 70 && j <= i /* causal documents of 70 */
                                           : i % 37 != 5 && (j < 100 || j >= 180) && tt_rand_u64(&rng) % 4;
        const flashattn_scores mask = {mm, FLASHATTN_F32, 1, 1, sq, sk, 0, 0, sk, 1};
        for (int t = 0; t < n; t++) {
            tt_tensor o[4];
            float lse[4][2 * 300];
            for (int w = 0; w < 4; w++) {
                flashattn_params p = flashattn_params_default();
                p.block_m = blocks[w][0], p.block_n = 64, p.num_threads = blocks[w][1], p.mask = &mask;
                o[w] = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0);
                TT_CHECK(fa_fwd_ex(&q.t, &k.t, &v.t, &o[w].t, lse[w], &p, NULL, 0, isas[t]) == FLASHATTN_OK,
                         "[%s] mask bits: status", isas[t]->isa);
                TT_CHECK(!memcmp(o[0].mem, o[w].mem, o[0].bytes) && !memcmp(lse[0], lse[w], sizeof lse[0]),
                         "[%s] %s mask: block_m %d, %d threads differ from block_m 16, 1 thread", isas[t]->isa,
                         kind ? "random" : "document", blocks[w][0], blocks[w][1]);
            }
            for (int w = 0; w < 4; w++) tt_free(&o[w]);
        }
    }
    free(mm);
    tt_free(&q), tt_free(&k), tt_free(&v);
}

/* Decode over a full cache: the cache is the dense K and V. */
static void decode(void) {
    for (int i = 0; i < 8; i++) {
        const int64_t b = 2, cap = 150, hq = 4, hkv = 2, d = 64, sq = i % 2 ? 1 : 5;
        const flashattn_dtype dt = (flashattn_dtype)(i % 3);
        uint64_t rng = 31 + (uint64_t)i;
        mcase c;
        memset(&c, 0, sizeof c);
        c.causal = i % 4 < 2, c.wl = c.wr = -1;
        c.softcap = i % 2 ? 5.0f : 0.0f;
        c.alibi = 1 + i % 2;
        c.sinks = i % 4 != 3;
        c.b = b, c.sq = sq, c.sk = cap, c.hq = hq, c.hkv = hkv, c.d = d, c.dt = dt;
        c.bias = i % 4;       /* each layout of test_modifiers' bias arrays, and none */
        c.mask = (i + 1) % 4; /* and of its masks: random, key padding, documents */
        mods m;
        flashattn_params p = params_of(&c, &m, &rng);
        tt_tensor q = tt_alloc(dt, b, sq, hq, d, 1, 0), kc = tt_alloc(dt, b, cap, hkv, d, 1, 0);
        tt_tensor vc = tt_alloc(dt, b, cap, hkv, d, 1, 0), o = tt_alloc(FLASHATTN_F32, b, sq, hq, d, 1, 0);
        tt_fill_normal(&q, &rng, 1.5), tt_fill_normal(&kc, &rng, 1.5), tt_fill_normal(&vc, &rng, 1.0);
        int32_t lens[2] = {(int32_t)cap, (int32_t)cap};
        flashattn_kv_cache cache;
        flashattn_kv_cache_init(&cache);
        cache.k = kc.t, cache.v = vc.t, cache.seqlens_i32 = lens;
        const size_t n = (size_t)(b * sq * hq * d), ln = (size_t)(b * hq * sq);
        double *ref = malloc(n * sizeof(double)), *rlse = malloc(ln * sizeof(double));
        TT_CHECK(fa_reference_fwd_f64(&q.t, &kc.t, &vc.t, &p, ref, rlse) == 0, "decode reference");
        const double bound = 1e-5; /* test_decode's rule for an f32 o */
        const fa_kernels *isas[8];
        const int ni = tt_isas(isas, 8);
        for (int t = 0; t < ni; t++)
            for (int splits = 1; splits <= 3; splits += 2) {
                p.num_splits = splits;
                float lse[64];
                const flashattn_status s = fa_decode_ex(&q.t, &cache, NULL, NULL, &o.t, lse, &p, NULL, 0, isas[t]);
                int inf_ok = 0;
                const double err = fa_max_abs_err(&o.t, ref), lerr = fa_lse_err(lse, rlse, ln, &inf_ok);
                TT_CHECK(s == FLASHATTN_OK && err <= bound && lerr <= 1e-4 * 2.25 && inf_ok,
                         "[%s] decode case %d splits %d: status %d, o err %.3g, lse err %.3g", isas[t]->isa, i,
                         splits, s, err, lerr);
            }
        free(ref), free(rlse), free(m.bias_mem), free(m.mask_mem);
        tt_free(&q), tt_free(&kc), tt_free(&vc), tt_free(&o);
    }
}

static void errors(void) {
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0), k = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0);
    tt_tensor o = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0);
    uint64_t rng = 3;
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0);
    float slopes[2] = {0.5f, 0.25f}, sinks[2] = {0.0f, 1.0f}, lse[16];
    for (int i = 0; i < 6; i++) {
        flashattn_params p = flashattn_params_default();
        p.alibi_slopes = slopes, p.sinks = sinks;
        slopes[1] = 0.25f, sinks[1] = 1.0f;
        const char *what = "";
        switch (i) {
        case 0: p.softcap = -1.0f, what = "softcap < 0"; break;
        case 1: p.softcap = NAN, what = "softcap NaN"; break;
        case 2: p.alibi_batch_stride = 3, what = "alibi stride 3"; break;
        case 3: slopes[1] = INFINITY, what = "slope inf"; break;
        case 4: sinks[1] = NAN, what = "sink NaN"; break;
        case 5: p.alibi_batch_stride = -2, what = "alibi stride -2"; break;
        }
        tt_fill_sentinel(o.mem, o.bytes);
        tt_fill_sentinel(lse, sizeof lse);
        const flashattn_status s = flashattn_fwd(&q.t, &k.t, &k.t, &o.t, lse, &p, NULL, 0);
        TT_CHECK(s == FLASHATTN_ERR_BAD_PARAM && tt_untouched(o.mem, o.bytes) && tt_untouched(lse, sizeof lse),
                 "%s: status %d, or output written", what, s);
    }
    tt_free(&q), tt_free(&k), tt_free(&o);
}

/* Bad dbias arrays: a status, and nothing written (dq, dk, dv or dbias). */
static void dbias_errors(void) {
    const int64_t B = 2, S = 8, H = 2, D = 16;
    tt_tensor q = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0), o = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0);
    tt_tensor g = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0);
    uint64_t rng = 4;
    tt_fill_normal(&q, &rng, 1.0);
    float bias[2 * 2 * 8 * 8] = {0}, db[2 * 2 * 8 * 8], lse[2 * 2 * 8];
    flashattn_scores bt = {bias, FLASHATTN_F32, B, H, S, S, H * S * S, S * S, S, 1};
    flashattn_params p = flashattn_params_default();
    p.bias = &bt;
    TT_CHECK(flashattn_fwd(&q.t, &q.t, &q.t, &o.t, lse, &p, NULL, 0) == FLASHATTN_OK, "dbias errors: forward");
    for (int i = 0; i < 6; i++) {
        flashattn_scores dt = {db, FLASHATTN_F32, B, H, S, S, H * S * S, S * S, S, 1};
        flashattn_params pd = p;
        pd.dbias = &dt;
        flashattn_status want = FLASHATTN_ERR_UNSUPPORTED;
        switch (i) {
        case 0: pd.bias = NULL, want = FLASHATTN_ERR_BAD_PARAM; break;
        case 1: dt.dtype = FLASHATTN_F16, want = FLASHATTN_ERR_BAD_DTYPE; break;
        case 2: dt.batch = 1, dt.stride_batch = 0; break;            /* sum over sequences */
        case 3: dt.heads = 1, dt.stride_head = 0; break;             /* over 2 kv-heads */
        case 4: dt.seq_k = 1, dt.stride_k = 0; break;                /* over keys */
        case 5: dt.stride_q = 4, want = FLASHATTN_ERR_BAD_STRIDE; break; /* rows overlap */
        }
        tt_fill_sentinel(db, sizeof db);
        tt_fill_sentinel(g.mem, g.bytes);
        const flashattn_status s = flashattn_bwd(&q.t, &q.t, &q.t, &o.t, &o.t, lse, &g.t, &g.t, &g.t, &pd, NULL, 0);
        TT_CHECK(s == want && tt_untouched(db, sizeof db) && tt_untouched(g.mem, g.bytes),
                 "dbias case %d: status %d (want %d), or output written", i, s, want);
    }
    tt_free(&q), tt_free(&o), tt_free(&g);
}

/* The softcap's extremes: a cap far above the logits, where tanh's
 * 1 - exp(-2y) would cancel (the forward lost digits in proportion to
 * cap / |s|), and a cap far below them, where 1 - tanh^2 would (the
 * backward's factor); a negative scale, whose terms bound the backward by
 * their size. */
static void softcap_extremes(void) {
    /* every table's softcap_row, tanh and 1 - tanh^2, against double's,
     * |x| / cap from 1e-6 to 30: within the kernel contract's ulp,
     * relatively (for 1 - tanh^2, plus the 2y ulp its conditioning gives) */
    const fa_kernels *isas[8];
    const int ni = tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        float x[200], dc[200], in[200];
        const float cap = 7.0f;
        for (int j = 0; j < 200; j++) in[j] = x[j] = (j % 2 ? -1.0f : 1.0f) * cap * 1e-6f * powf(3e7f, (float)j / 199.0f);
        isas[t]->softcap_row(x, 200, cap, dc);
        double terr = 0.0, derr = 0.0;
        for (int j = 0; j < 200; j++) {
            const double th = tanh((double)in[j] / cap), want = 1.0 - th * th;
            /* 1 - th^2 rounds in double where it is near 0: from exp(-2y) */
            const double y = fabs((double)in[j]) / cap, e = exp(-2.0 * y);
            const double dwant = y > 1.0 ? 4.0 * e / ((1.0 + e) * (1.0 + e)) : want;
            terr = fmax(terr, fabs(x[j] - cap * th) / (cap * fabs(th)));
            /* e's argument, -2y log2(e), carries y's rounding: 2y ulp of e */
            derr = fmax(derr, fabs(dc[j] - dwant) / dwant / ((16.0 + 4.0 * y) * 6e-8));
        }
        TT_CHECK(terr <= 8 * 6e-8 && derr <= 1.0, "[%s] softcap: tanh rel err %.3g, 1 - tanh^2 err %.3g of its bound",
                 isas[t]->isa, terr, derr);
    }
    static const float caps[] = {1e4f, 300.0f, 0.25f, 0.05f};
    for (int i = 0; i < 8; i++) {
        mcase c;
        memset(&c, 0, sizeof c);
        c.b = 1, c.sq = 70, c.sk = 90, c.hq = 2, c.hkv = 1, c.d = 64;
        c.causal = i % 2, c.align = FLASHATTN_ALIGN_BOTTOM_RIGHT, c.wl = c.wr = -1;
        c.dt = i < 6 ? FLASHATTN_F32 : FLASHATTN_BF16;
        c.softcap = caps[i % 4];
        c.scale = i == 5 ? -0.3f : 0.0f;
        run_case(&c, 900 + (uint64_t)i);
    }
}

int main(void) {
    errors();
    dbias_errors();
    softcap_extremes();
    sweep();
    mask_as_causal();
    mask_block_m_bits();
    decode();
    return tt_finish("test_modifiers");
}
