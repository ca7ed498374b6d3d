/*
 * Variable-length (packed) batches, on every ISA path.
 *
 * Forward and backward: each case packs a mix of lengths (0, 1, below and
 * above one block, one long among short ones, seq_q != seq_k, seqused_k
 * shorter than the keys given), some with the score modifiers (softcap,
 * ALiBi per sequence and head, sinks; or softcap, a bias and a boolean
 * mask per sequence), and checks
 *   - per sequence, O and LSE against the FP64 reference and dQ, dK, dV
 *     against the FP64 reference gradients, under test_forward's and
 *     test_backward's rules (at most twice the error of plain f32
 *     attention on the same sequence);
 *   - with block_m and block_n given, that O, LSE, dQ, dK and dV are
 *     bit-identical to one dense call per sequence (the header's promise),
 *     and with automatic tiles, without a boolean mask, in O and LSE too
 *     (where the dense call does not run as decode),
 *     and dK = dV = 0 on keys past seqused_k;
 *   - that 1 and 2 threads give the same bits (dQ under deterministic).
 * Decode with packed queries: appends of each sequence's own count, paged
 * and contiguous caches, leftpad, batch_idx, rotary (interleaved and not):
 * the cache's new rows against the rotation computed in double, O and LSE
 * against the FP64 reference over each sequence's keys.
 * Bad boundaries, cache options and rotary tables: a status, nothing written.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/decode.h"
#include "api/forward.h"
#include "core/dtype.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_f64.h"
#include "reference/compare.h"
#include "testutil.h"

#define MAXS 12

static const char *dtn(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

/* Rows [r0, r0 + n) of a packed tensor (batch 1) as a tensor of its own. */
static flashattn_tensor rows_of(const flashattn_tensor *t, int64_t r0, int64_t n) {
    flashattn_tensor v = *t;
    v.data = (char *)t->data + (size_t)(r0 * t->stride_seq) * flashattn_dtype_size(t->dtype);
    v.seqlen = n;
    return v;
}

typedef struct {
    int n;                                /* sequences */
    int64_t lq[MAXS], lk[MAXS], used[MAXS]; /* used[b] < 0: no seqused_k entry */
    int use_used;
    int64_t hq, hkv, d;
    int causal, align;
    int64_t wl, wr;
    flashattn_dtype dt;
    int bshd, det;
    int bm, bn; /* 0: automatic (no bit-identity check) */
    int mods;   /* 1: softcap, ALiBi per (sequence, head), sinks; 2: softcap, a bias
                 * [n, hq, max_q, max_k] and a mask [n, 1, max_q, max_k] */
} vcase;

static void describe(const vcase *c, char *buf, size_t n) {
    int at = snprintf(buf, n, "hq=%lld hkv=%lld d=%lld causal=%d align=%d win=(%lld,%lld) %s %s det=%d "
                      "tiles=%dx%d mods=%d lens",
                      (long long)c->hq, (long long)c->hkv, (long long)c->d, c->causal, c->align,
                      (long long)c->wl, (long long)c->wr, dtn(c->dt), c->bshd ? "bshd" : "bhsd",
                      c->det, c->bm, c->bn, c->mods);
    for (int b = 0; b < c->n && at < (int)n; b++)
        at += snprintf(buf + at, n - (size_t)at, " %lldx%lld%s", (long long)c->lq[b],
                       (long long)c->lk[b], c->use_used && c->used[b] != c->lk[b] ? "u" : "");
}

typedef struct {
    tt_tensor o, dq, dk, dv;
    float *lse;
} outs;

static outs outs_alloc(const vcase *c, int64_t tq, int64_t tk) {
    outs r;
    r.o = tt_alloc(c->dt, 1, tq, c->hq, c->d, c->bshd, 0);
    r.dq = tt_alloc(c->dt, 1, tq, c->hq, c->d, !c->bshd, 0);
    r.dk = tt_alloc(c->dt, 1, tk, c->hkv, c->d, c->bshd, 0);
    r.dv = tt_alloc(c->dt, 1, tk, c->hkv, c->d, !c->bshd, 0);
    r.lse = malloc((size_t)(c->hq * tq + 1) * sizeof(float));
    return r;
}

static void outs_free(outs *r) {
    tt_free(&r->o), tt_free(&r->dq), tt_free(&r->dk), tt_free(&r->dv);
    free(r->lse);
}

static int same_bytes(const tt_tensor *a, const tt_tensor *b) {
    return a->bytes == b->bytes && memcmp(a->mem, b->mem, a->bytes) == 0;
}

typedef struct {
    const vcase *c;
    tt_tensor q, k, v, dout;
    int32_t cu_q[MAXS + 1], cu_k[MAXS + 1], used[MAXS];
    int64_t tq, tk, max_q, max_k;
    /* the score modifiers (vcase.mods) */
    float slopes[MAXS * 8], sinks[8];
    float *bias;
    uint8_t *mask;
    flashattn_scores bias_s[MAXS + 1], mask_s[MAXS + 1]; /* [b]: sequence b's view; [n]: the whole */
} fixture;

/* The call's params: sequence b's own dense call (its slopes, its views of
 * the bias and mask), or the varlen call's for b < 0. */
static flashattn_params params_of(const fixture *f, int threads, int b) {
    const vcase *c = f->c;
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal, p.align = c->align;
    p.window_left = c->wl, p.window_right = c->wr;
    p.deterministic = c->det;
    p.block_m = c->bm, p.block_n = c->bn;
    p.num_threads = threads;
    if (c->mods) p.softcap = 8.0f;
    if (c->mods == 1) {
        p.alibi_slopes = b < 0 ? f->slopes : f->slopes + b * c->hq;
        p.alibi_batch_stride = b < 0 ? c->hq : 0;
        p.sinks = f->sinks;
    }
    if (c->mods == 2) p.bias = &f->bias_s[b < 0 ? c->n : b], p.mask = &f->mask_s[b < 0 ? c->n : b];
    return p;
}

static void mods_alloc(fixture *f, uint64_t *rng) {
    const vcase *c = f->c;
    for (int x = 0; x < MAXS * 8; x++) f->slopes[x] = (float)(0.05 + 0.4 * (double)(tt_rand_u64(rng) % 1000) / 1000.0);
    for (int x = 0; x < 8; x++) f->sinks[x] = (float)tt_rand_normal(rng);
    f->bias = NULL, f->mask = NULL;
    if (c->mods != 2) return;
    const int64_t mq = f->max_q, mk = f->max_k, per = c->hq * mq * mk;
    f->bias = malloc((size_t)(c->n * per + 1) * sizeof(float));
    f->mask = malloc((size_t)(c->n * mq * mk + 1));
    for (int64_t x = 0; x < c->n * per; x++) f->bias[x] = (float)tt_rand_normal(rng);
    for (int64_t x = 0; x < c->n * mq * mk; x++) f->mask[x] = tt_rand_u64(rng) % 5 != 0;
    for (int b = 0; b <= c->n; b++) {
        const int whole = b == c->n;
        const int64_t nq = whole ? mq : c->lq[b], nk = whole ? mk : c->use_used ? c->used[b] : c->lk[b];
        f->bias_s[b] = (flashattn_scores){f->bias + (whole ? 0 : b * per), FLASHATTN_F32, whole ? c->n : 1,
                                          c->hq, nq, nk, per, mq * mk, mk, 1};
        f->mask_s[b] = (flashattn_scores){f->mask + (whole ? 0 : b * mq * mk), FLASHATTN_F32, whole ? c->n : 1,
                                          1, nq, nk, mq * mk, 0, mk, 1};
    }
}

/* The varlen call's forward then backward into r. */
static flashattn_status run_varlen(const fixture *f, const fa_kernels *kern, int threads, outs *r) {
    flashattn_varlen vl;
    flashattn_varlen_init(&vl);
    vl.batch = f->c->n;
    vl.cu_seqlens_q = f->cu_q, vl.cu_seqlens_k = f->cu_k;
    vl.seqused_k = f->c->use_used ? f->used : NULL;
    flashattn_params p = params_of(f, threads, -1);
    p.varlen = &vl;
    flashattn_status s = fa_fwd_ex(&f->q.t, &f->k.t, &f->v.t, &r->o.t, r->lse, &p, NULL, 0, kern);
    if (s) return s;
    return fa_bwd_ex(&f->q.t, &f->k.t, &f->v.t, &r->o.t, &f->dout.t, r->lse, &r->dq.t, &r->dk.t,
                     &r->dv.t, &p, NULL, 0, kern);
}

/* One dense call per sequence, on views of the same packed arrays; the
 * LSE comes back [1, hq, lq] and is scattered to [hq, total_q]. Keys past
 * seqused_k keep their zeroed dK, dV. */
static flashattn_status run_dense(const fixture *f, const fa_kernels *kern, outs *r) {
    const vcase *c = f->c;
    /* one thread, as the varlen call compared: without the deterministic
     * flag dq's sums are in thread order */
    memset(r->dk.mem, 0, r->dk.bytes);
    memset(r->dv.mem, 0, r->dv.bytes);
    for (int b = 0; b < c->n; b++) {
        const int64_t nq = c->lq[b], nk = c->use_used ? c->used[b] : c->lk[b];
        const flashattn_tensor q = rows_of(&f->q.t, f->cu_q[b], nq), o = rows_of(&r->o.t, f->cu_q[b], nq);
        const flashattn_tensor dout = rows_of(&f->dout.t, f->cu_q[b], nq);
        const flashattn_tensor dq = rows_of(&r->dq.t, f->cu_q[b], nq);
        const flashattn_tensor k = rows_of(&f->k.t, f->cu_k[b], nk), v = rows_of(&f->v.t, f->cu_k[b], nk);
        const flashattn_tensor dk = rows_of(&r->dk.t, f->cu_k[b], nk), dv = rows_of(&r->dv.t, f->cu_k[b], nk);
        float *lse = malloc((size_t)(c->hq * nq + 1) * sizeof(float));
        const flashattn_params p = params_of(f, 1, b);
        flashattn_status s = fa_fwd_ex(&q, &k, &v, &o, lse, &p, NULL, 0, kern);
        if (!s) s = fa_bwd_ex(&q, &k, &v, &o, &dout, lse, &dq, &dk, &dv, &p, NULL, 0, kern);
        for (int64_t h = 0; h < c->hq; h++)
            memcpy(r->lse + h * f->tq + f->cu_q[b], lse + h * nq, (size_t)nq * sizeof(float));
        free(lse);
        if (s) return s;
    }
    return FLASHATTN_OK;
}

/* The FP64 reference gradients and the plain f32 ones of every sequence,
 * packed like dq, dk, dv (zero on keys past seqused_k), and the largest
 * sum of terms of each: test_backward's rule is applied to the whole
 * packed tensors, as it is to a whole dense batch there (on a sequence of
 * a few elements, rms and max are one and the same tail event). */
typedef struct {
    double *ref[3], *plain[3], mag[3];
    size_t cnt[3];
} grads;

static grads grads_alloc(const fixture *f) {
    grads g;
    const vcase *c = f->c;
    g.cnt[0] = (size_t)(f->tq * c->hq * c->d);
    g.cnt[1] = g.cnt[2] = (size_t)(f->tk * c->hkv * c->d);
    for (int x = 0; x < 3; x++) {
        g.ref[x] = calloc(g.cnt[x] + 1, sizeof(double));
        g.plain[x] = calloc(g.cnt[x] + 1, sizeof(double));
        g.mag[x] = 0.0;
    }
    return g;
}

static void grads_check(const grads *g, const outs *r, const char *isa, const char *desc) {
    const flashattn_tensor *got[3] = {&r->dq.t, &r->dk.t, &r->dv.t};
    static const char *gname[3] = {"dq", "dk", "dv"};
    for (int x = 0; x < 3; x++) {
        if (!g->cnt[x]) continue;
        tt_grad_errs e;
        TT_CHECK(tt_grad_pass(got[x], g->ref[x], g->plain[x], g->cnt[x], g->mag[x], &e),
                 "[%s] %s max err %.3g (bound %.3g), rms %.3g (bound %.3g): %s", isa, gname[x], e.max,
                 e.max_bound, e.rms, e.rms_bound, desc);
    }
}

static void grads_free(grads *g) {
    for (int x = 0; x < 3; x++) free(g->ref[x]), free(g->plain[x]);
}

/* Sequence b of r against the FP64 reference: O and LSE here, the
 * gradients into g. */
static void check_reference(const fixture *f, const outs *r, int b, const char *isa, const char *desc,
                            grads *g) {
    const vcase *c = f->c;
    const int64_t nq = c->lq[b], nk = c->use_used ? c->used[b] : c->lk[b];
    if (nq == 0) return;
    const flashattn_params p = params_of(f, 0, b);
    const flashattn_tensor q = rows_of(&f->q.t, f->cu_q[b], nq), o = rows_of(&r->o.t, f->cu_q[b], nq);
    const flashattn_tensor dout = rows_of(&f->dout.t, f->cu_q[b], nq);
    const flashattn_tensor k = rows_of(&f->k.t, f->cu_k[b], nk), v = rows_of(&f->v.t, f->cu_k[b], nk);
    const size_t nqe = (size_t)(nq * c->hq * c->d);
    double *ref = malloc(nqe * sizeof(double)), *std = malloc(nqe * sizeof(double));
    double *rlse = malloc((size_t)(c->hq * nq) * sizeof(double));
    float *lse = malloc((size_t)(c->hq * nq) * sizeof(float));
    for (int64_t h = 0; h < c->hq; h++)
        memcpy(lse + h * nq, r->lse + h * f->tq + f->cu_q[b], (size_t)nq * sizeof(float));

    TT_CHECK(fa_reference_fwd_f64(&q, &k, &v, &p, ref, rlse) == 0, "reference: %s", desc);
    double bound = 1e-5;
    if (c->dt != FLASHATTN_F32) {
        tt_standard_f32(&q, &k, &v, &p, c->dt, std);
        double e = 0.0;
        for (size_t x = 0; x < nqe; x++) e = fmax(e, fabs(std[x] - ref[x]));
        bound = 2.0 * e;
    }
    const double err = fa_max_abs_err(&o, ref);
    TT_CHECK(err <= bound, "[%s] seq %d: o max err %.3g > %.3g: %s", isa, b, err, bound, desc);
    int inf_ok = 0;
    const double lerr = fa_lse_err(lse, rlse, (size_t)(c->hq * nq), &inf_ok);
    TT_CHECK(lerr <= (c->dt == FLASHATTN_F32 ? 1e-5 : 1e-4) && inf_ok,
             "[%s] seq %d: lse err %.3g, -inf rows %s: %s", isa, b, lerr, inf_ok ? "ok" : "wrong", desc);

    /* the gradients' references go to their rows of the packed arrays */
    double mag[3] = {0, 0, 0};
    const size_t at[3] = {(size_t)(f->cu_q[b] * c->hq * c->d), (size_t)(f->cu_k[b] * c->hkv * c->d),
                          (size_t)(f->cu_k[b] * c->hkv * c->d)};
    TT_CHECK(fa_reference_bwd_f64(&q, &k, &v, &dout, &p, g->ref[0] + at[0], g->ref[1] + at[1],
                                  g->ref[2] + at[2]) == 0, "reference bwd: %s", desc);
    TT_CHECK(fa_reference_bwd_std_f32(&q, &k, &v, &o, &dout, lse, &p, c->dt, g->plain[0] + at[0],
                                      g->plain[1] + at[1], g->plain[2] + at[2], mag) == 0,
             "plain bwd: %s", desc);
    for (int x = 0; x < 3; x++) g->mag[x] = fmax(g->mag[x], mag[x]);
    free(ref), free(std), free(rlse), free(lse);
}

/* dK = dV = 0 on the keys of each sequence past seqused_k. */
static int unused_keys_zero(const fixture *f, const outs *r) {
    const vcase *c = f->c;
    if (!c->use_used) return 1;
    const size_t es = flashattn_dtype_size(c->dt);
    for (int b = 0; b < c->n; b++)
        for (int64_t j = f->cu_k[b] + c->used[b]; j < f->cu_k[b + 1]; j++)
            for (int64_t h = 0; h < c->hkv; h++)
                for (int64_t x = 0; x < c->d; x++) {
                    const tt_tensor *t[2] = {&r->dk, &r->dv};
                    for (int g = 0; g < 2; g++) {
                        const char *e = (const char *)t[g]->mem +
                                        (size_t)(j * t[g]->t.stride_seq + h * t[g]->t.stride_head + x) * es;
                        for (size_t y = 0; y < es; y++)
                            if (e[y]) return 0;
                    }
                }
    return 1;
}

static void run_case(const vcase *c, uint64_t seed) {
    fixture f;
    memset(&f, 0, sizeof f);
    f.c = c;
    f.cu_q[0] = f.cu_k[0] = 0;
    for (int b = 0; b < c->n; b++) {
        f.cu_q[b + 1] = f.cu_q[b] + (int32_t)c->lq[b];
        f.cu_k[b + 1] = f.cu_k[b] + (int32_t)c->lk[b];
        f.used[b] = (int32_t)c->used[b];
    }
    f.tq = f.cu_q[c->n], f.tk = f.cu_k[c->n];
    for (int b = 0; b < c->n; b++) {
        const int64_t nk = c->use_used ? c->used[b] : c->lk[b];
        if (c->lq[b] > f.max_q) f.max_q = c->lq[b];
        if (nk > f.max_k) f.max_k = nk;
    }
    uint64_t rng = seed;
    mods_alloc(&f, &rng);
    f.q = tt_alloc(c->dt, 1, f.tq, c->hq, c->d, c->bshd, 0);
    f.k = tt_alloc(c->dt, 1, f.tk, c->hkv, c->d, c->bshd, 0);
    f.v = tt_alloc(c->dt, 1, f.tk, c->hkv, c->d, !c->bshd, 0);
    f.dout = tt_alloc(c->dt, 1, f.tq, c->hq, c->d, c->bshd, 0);
    tt_fill_normal(&f.q, &rng, 1.0);
    tt_fill_normal(&f.k, &rng, 1.0);
    tt_fill_normal(&f.v, &rng, 1.0);
    tt_fill_normal(&f.dout, &rng, 1.0);
    char desc[512];
    describe(c, desc, sizeof desc);

    const fa_kernels *isas[8];
    const int n = tt_isas(isas, 8);
    for (int t = 0; t < n; t++) {
        const char *isa = isas[t]->isa;
        outs r = outs_alloc(c, f.tq, f.tk), r1 = outs_alloc(c, f.tq, f.tk);
        flashattn_status s = run_varlen(&f, isas[t], 2, &r);
        TT_CHECK(s == FLASHATTN_OK, "[%s] varlen status %d (%s): %s", isa, s, flashattn_last_error(), desc);
        if (s) {
            outs_free(&r), outs_free(&r1);
            continue;
        }
        grads g = grads_alloc(&f);
        for (int b = 0; b < c->n; b++) check_reference(&f, &r, b, isa, desc, &g);
        grads_check(&g, &r, isa, desc);
        grads_free(&g);
        TT_CHECK(unused_keys_zero(&f, &r), "[%s] dk/dv past seqused_k not zero: %s", isa, desc);

        s = run_varlen(&f, isas[t], 1, &r1);
        TT_CHECK(s == FLASHATTN_OK && same_bytes(&r.o, &r1.o) &&
                     !memcmp(r.lse, r1.lse, (size_t)(c->hq * f.tq) * sizeof(float)) &&
                     same_bytes(&r.dk, &r1.dk) && same_bytes(&r.dv, &r1.dv) &&
                     (!c->det || same_bytes(&r.dq, &r1.dq)),
                 "[%s] 1 and 2 threads differ: %s", isa, desc);

        if (c->bm && c->bn) {
            outs dn = outs_alloc(c, f.tq, f.tk);
            s = run_dense(&f, isas[t], &dn);
            TT_CHECK(s == FLASHATTN_OK, "[%s] dense status %d (%s): %s", isa, s, flashattn_last_error(), desc);
            TT_CHECK(same_bytes(&r1.o, &dn.o), "[%s] o differs from per-sequence calls: %s", isa, desc);
            TT_CHECK(!memcmp(r1.lse, dn.lse, (size_t)(c->hq * f.tq) * sizeof(float)),
                     "[%s] lse differs from per-sequence calls: %s", isa, desc);
            TT_CHECK(same_bytes(&r1.dk, &dn.dk) && same_bytes(&r1.dv, &dn.dv),
                     "[%s] dk/dv differ from per-sequence calls: %s", isa, desc);
            TT_CHECK(same_bytes(&r1.dq, &dn.dq), "[%s] dq differs from per-sequence calls: %s", isa, desc);
            outs_free(&dn);
        } else if (!c->bm && !c->bn && c->mods != 2 && !tt_fwd_as_decode(f.max_q, f.max_k, c->hq, c->hkv)) {
            /* Automatic tiles, no boolean mask: each sequence runs on the
             * tiles the rule gives it alone, so its O and LSE are a dense
             * call's on it, but where that call runs as decode. */
            outs dn = outs_alloc(c, f.tq, f.tk);
            s = run_dense(&f, isas[t], &dn);
            TT_CHECK(s == FLASHATTN_OK, "[%s] dense status %d (%s): %s", isa, s, flashattn_last_error(), desc);
            int64_t differ = 0, compared = 0;
            for (int b = 0; b < c->n && !s; b++) {
                const int64_t nk = c->use_used ? c->used[b] : c->lk[b];
                if (tt_fwd_as_decode(c->lq[b], nk, c->hq, c->hkv)) continue;
                compared++;
                for (int64_t i = f.cu_q[b]; i < f.cu_q[b + 1]; i++)
                    for (int64_t h = 0; h < c->hq; h++) {
                        differ += r1.lse[h * f.tq + i] != dn.lse[h * f.tq + i] &&
                                  !(isnan(r1.lse[h * f.tq + i]) && isnan(dn.lse[h * f.tq + i]));
                        for (int64_t x = 0; x < c->d; x++)
                            differ += fa_tensor_get(&r1.o.t, 0, i, h, x) != fa_tensor_get(&dn.o.t, 0, i, h, x);
                    }
            }
            TT_CHECK(differ == 0, "[%s] automatic tiles: %lld values differ from the per-sequence calls' (%lld "
                     "sequences compared): %s", isa, (long long)differ, (long long)compared, desc);
            outs_free(&dn);
        }
        outs_free(&r), outs_free(&r1);
    }
    tt_free(&f.q), tt_free(&f.k), tt_free(&f.v), tt_free(&f.dout);
    free(f.bias), free(f.mask);
}

static void sweep(void) {
    /* length mixes: {lq, lk} pairs */
    static const int64_t mixes[][MAXS][2] = {
        {{5, 5}, {0, 0}, {1, 1}, {33, 33}, {70, 70}},
        {{1, 40}, {17, 3}, {0, 9}, {64, 64}, {9, 0}, {130, 90}},
        {{300, 300}, {2, 2}, {3, 3}, {1, 1}, {4, 4}, {2, 2}, {5, 5}},
        {{16, 16}, {48, 80}, {80, 48}, {1, 1}},
        /* few query rows: with automatic tiles the forward runs as decode */
        {{1, 50}, {3, 20}, {0, 7}, {2, 2}, {4, 100}},
    };
    static const int mix_n[] = {5, 6, 7, 4, 5};
    static const int64_t heads[][2] = {{2, 2}, {4, 1}, {6, 2}, {1, 1}};
    static const int64_t dims[] = {32, 64, 40, 128};
    /* causal, align, wl, wr */
    static const int64_t masks[][4] = {{0, 0, -1, -1}, {1, 0, -1, -1}, {1, 1, -1, -1},
                                       {0, 0, 8, 0},   {0, 1, 4, 4},   {0, 0, -1, 3}};
    uint64_t rng = 2207;
    for (int i = 0; i < 30; i++) {
        vcase c;
        memset(&c, 0, sizeof c);
        const int m = i % 5;
        c.n = mix_n[m];
        for (int b = 0; b < c.n; b++) c.lq[b] = mixes[m][b][0], c.lk[b] = mixes[m][b][1];
        c.use_used = i % 5 == 2;
        for (int b = 0; b < c.n; b++)
            c.used[b] = c.use_used ? c.lk[b] - (int64_t)(tt_rand_u64(&rng) % (uint64_t)(c.lk[b] / 2 + 1)) : c.lk[b];
        c.hq = heads[i % 4][0], c.hkv = heads[i % 4][1];
        c.d = dims[(i / 4 + i) % 4];
        const int64_t *mk = masks[i % 6];
        c.causal = (int)mk[0], c.align = (int)mk[1], c.wl = mk[2], c.wr = mk[3];
        c.dt = (flashattn_dtype)(i / 2 % 3);
        c.bshd = i % 3 != 1;
        c.det = i % 2;
        /* explicit tiles in most cases (the bit-identity check), automatic in some */
        c.bm = i % 4 == 3 ? 0 : 16 * (1 + (int)(i % 3));
        c.bn = c.bm ? 32 * (1 + (int)(i / 3 % 2)) : 0;
        /* the score modifiers in every third case */
        c.mods = i % 3 == 2 ? 1 + (int)(i / 3 % 2) : 0;
        run_case(&c, 1000 + (uint64_t)i);
    }
}

/* Automatic tiles on a mix the batch's single tile choice would not suit:
 * the rule's block_n shrinks to a short sequence's keys, so a short
 * sequence among long ones gets a smaller block_n alone than the batch
 * would get (plan->per_seq gives each its own). Each sequence's O and LSE
 * must be a dense call's on it, bit for bit, on every path. */
static void auto_tiles_per_sequence(void) {
    static const int64_t lens[] = {4500, 300, 0, 257, 60};
    enum { N = 5, HQ = 2, HKV = 1, D = 32 };
    int32_t cu[N + 1] = {0};
    for (int b = 0; b < N; b++) cu[b + 1] = cu[b] + (int32_t)lens[b];
    const int64_t tq = cu[N];
    uint64_t rng = 77;
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, tq, HQ, D, 1, 0), k = tt_alloc(FLASHATTN_F32, 1, tq, HKV, D, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, 1, tq, HKV, D, 1, 0);
    tt_tensor o = tt_alloc(FLASHATTN_F32, 1, tq, HQ, D, 1, 0), od = tt_alloc(FLASHATTN_F32, 1, tq, HQ, D, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    float *lse = malloc(sizeof(float) * (size_t)(HQ * tq)), *lsed = malloc(sizeof(float) * (size_t)(HQ * tq));
    flashattn_varlen vl;
    flashattn_varlen_init(&vl);
    vl.batch = N, vl.cu_seqlens_q = cu, vl.cu_seqlens_k = cu;
    const fa_kernels *isas[8];
    const int ni = tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        flashattn_params p = flashattn_params_default();
        p.causal = 1;
        p.varlen = &vl;
        flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]);
        p.varlen = NULL;
        for (int b = 0; b < N && !s; b++) {
            const flashattn_tensor qb = rows_of(&q.t, cu[b], lens[b]), kb = rows_of(&k.t, cu[b], lens[b]);
            const flashattn_tensor vb = rows_of(&v.t, cu[b], lens[b]), ob = rows_of(&od.t, cu[b], lens[b]);
            float *l = malloc(sizeof(float) * (size_t)(HQ * lens[b] + 1));
            s = fa_fwd_ex(&qb, &kb, &vb, &ob, l, &p, NULL, 0, isas[t]);
            for (int64_t h = 0; h < HQ; h++) memcpy(lsed + h * tq + cu[b], l + h * lens[b], sizeof(float) * (size_t)lens[b]);
            free(l);
        }
        TT_CHECK(s == FLASHATTN_OK, "[%s] per-sequence tiles: status %d (%s)", isas[t]->isa, s, flashattn_last_error());
        TT_CHECK(!s && same_bytes(&o, &od) && !memcmp(lse, lsed, sizeof(float) * (size_t)(HQ * tq)),
                 "[%s] automatic tiles: a causal mix of 4500 and short sequences differs from per-sequence calls",
                 isas[t]->isa);
    }
    free(lse), free(lsed);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&o), tt_free(&od);
}

/* ---- decode with packed queries ---------------------------------------- */

typedef struct {
    int n;
    int64_t lq[MAXS];   /* query rows (= rows appended when appending) */
    int64_t len[MAXS];  /* cache seqlens before the append */
    int64_t pad[MAXS];  /* leftpad */
    int append, paged, batch_idx, rot_dim, rot_inter, causal;
    int64_t hq, hkv, d;
    flashattn_dtype qdt, cdt;
} dcase;

/* Rotate x (n elements, double) at position pos as the header states. */
static void rotate_ref(double *x, int64_t rd, int inter, const float *cs, const float *sn, int64_t pos) {
    for (int64_t t = 0; t < rd / 2; t++) {
        const int64_t a = inter ? 2 * t : t, b = inter ? 2 * t + 1 : t + rd / 2;
        const double c = cs[pos * (rd / 2) + t], s = sn[pos * (rd / 2) + t];
        const double x1 = x[a], x2 = x[b];
        x[a] = x1 * c - x2 * s;
        x[b] = x1 * s + x2 * c;
    }
}

/* Cache row r (counted from the entry's row 0) of sequence b, head h. */
typedef struct {
    const int32_t *table; /* NULL: contiguous */
    const int32_t *bidx;  /* NULL: entry b */
    int64_t max_pages, page;
} cache_map;

static const void *cache_at(const cache_map *m, const tt_tensor *t, int b, int64_t r, int64_t h) {
    int64_t entry = m->bidx ? m->bidx[b] : b, row = r;
    if (m->table) entry = m->table[b * m->max_pages + r / m->page], row = r % m->page;
    return (const char *)t->mem +
           (size_t)(entry * t->t.stride_batch + row * t->t.stride_seq + h * t->t.stride_head) *
               flashattn_dtype_size(t->t.dtype);
}

static double get(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c) {
    return fa_tensor_get(t, b, s, h, c);
}

static void run_decode_case(const dcase *c, uint64_t seed) {
    uint64_t rng = seed;
    int32_t cu[MAXS + 1], lens[MAXS], pads[MAXS], bidx[MAXS];
    cu[0] = 0;
    int64_t most = 0;
    for (int b = 0; b < c->n; b++) {
        cu[b + 1] = cu[b] + (int32_t)c->lq[b];
        lens[b] = (int32_t)c->len[b], pads[b] = (int32_t)c->pad[b];
        const int64_t end = c->len[b] + (c->append ? c->lq[b] : 0);
        if (end > most) most = end;
    }
    const int64_t tq = cu[c->n], page = 8;
    const int64_t cap = (most + page - 1) / page * page + page;
    const int64_t entries = c->batch_idx ? c->n + 2 : c->n;
    /* batch_idx: sequences use the entries in reverse, skipping two */
    for (int b = 0; b < c->n; b++) bidx[b] = (int32_t)(entries - 1 - b);
    const int64_t max_pages = cap / page, pool = c->paged ? c->n * max_pages + 3 : 0;
    int32_t *table = malloc((size_t)(c->n * max_pages + 1) * sizeof(int32_t));
    for (int64_t x = 0; x < c->n * max_pages; x++) /* the pool's pages in reverse, 3 unused */
        table[x] = (int32_t)(pool - 1 - x);
    tt_tensor kc = c->paged ? tt_alloc(c->cdt, pool, page, c->hkv, c->d, 1, 0)
                            : tt_alloc(c->cdt, entries, cap, c->hkv, c->d, 1, 0);
    tt_tensor vc = c->paged ? tt_alloc(c->cdt, pool, page, c->hkv, c->d, 1, 0)
                            : tt_alloc(c->cdt, entries, cap, c->hkv, c->d, 1, 0);
    tt_fill_normal(&kc, &rng, 1.0);
    tt_fill_normal(&vc, &rng, 1.0);
    tt_tensor q = tt_alloc(c->qdt, 1, tq, c->hq, c->d, 1, 0);
    tt_tensor kn = tt_alloc(c->qdt, 1, tq, c->hkv, c->d, 1, 0);
    tt_tensor vn = tt_alloc(c->qdt, 1, tq, c->hkv, c->d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0);
    tt_fill_normal(&kn, &rng, 1.0);
    tt_fill_normal(&vn, &rng, 1.0);
    const int64_t rl = most + 4, rd = c->rot_dim;
    float *cs = malloc((size_t)(rl * (rd / 2) + 1) * sizeof(float));
    float *sn = malloc((size_t)(rl * (rd / 2) + 1) * sizeof(float));
    for (int64_t pos = 0; pos < rl; pos++)
        for (int64_t t = 0; t < rd / 2; t++) {
            const double ang = (double)pos * pow(10000.0, -2.0 * (double)t / (double)rd);
            cs[pos * (rd / 2) + t] = (float)cos(ang), sn[pos * (rd / 2) + t] = (float)sin(ang);
        }
    const size_t kbytes = kc.bytes;
    void *kc0 = malloc(kbytes), *vc0 = malloc(kbytes);
    memcpy(kc0, kc.mem, kbytes), memcpy(vc0, vc.mem, kbytes);

    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = kc.t, cache.v = vc.t;
    cache.seqlens_i32 = lens;
    cache.leftpad = pads;
    cache.batch_idx = c->batch_idx ? bidx : NULL;
    if (c->paged) cache.block_table = table, cache.max_pages_per_seq = max_pages;
    if (rd) {
        cache.rotary_cos = cs, cache.rotary_sin = sn;
        cache.rotary_len = rl, cache.rotary_dim = rd, cache.rotary_interleaved = c->rot_inter;
    }
    flashattn_varlen vl;
    flashattn_varlen_init(&vl);
    vl.batch = c->n, vl.cu_seqlens_q = cu;
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal;
    p.varlen = &vl;
    char desc[256];
    int at = snprintf(desc, sizeof desc, "decode hq=%lld hkv=%lld d=%lld q=%s cache=%s append=%d paged=%d "
                      "batch_idx=%d rot=%d/%d causal=%d seqs",
                      (long long)c->hq, (long long)c->hkv, (long long)c->d, dtn(c->qdt), dtn(c->cdt),
                      c->append, c->paged, c->batch_idx, (int)rd, c->rot_inter, c->causal);
    for (int b = 0; b < c->n && at < (int)sizeof desc; b++)
        at += snprintf(desc + at, sizeof desc - (size_t)at, " %lld@%lld-%lld", (long long)c->lq[b],
                       (long long)c->pad[b], (long long)c->len[b]);

    const fa_kernels *isas[8];
    const int ni = tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        const char *isa = isas[t]->isa;
        memcpy(kc.mem, kc0, kbytes), memcpy(vc.mem, vc0, kbytes);
        tt_tensor o = tt_alloc(FLASHATTN_F32, 1, tq, c->hq, c->d, 1, 0);
        float *lse = malloc((size_t)(c->hq * tq + 1) * sizeof(float));
        flashattn_status s = fa_decode_ex(&q.t, &cache, c->append ? &kn.t : NULL,
                                          c->append ? &vn.t : NULL, &o.t, lse, &p, NULL, 0, isas[t]);
        TT_CHECK(s == FLASHATTN_OK, "[%s] status %d (%s): %s", isa, s, flashattn_last_error(), desc);
        for (int b = 0; s == FLASHATTN_OK && b < c->n; b++) {
            const cache_map map = {c->paged ? table : NULL, c->batch_idx ? bidx : NULL, max_pages, page};
            const int64_t add = c->append ? c->lq[b] : 0, nk = c->len[b] - c->pad[b] + add;
            /* the new rows: V as given (rounded to the cache dtype), K rotated */
            double worst = 0.0;
            const double tol = c->cdt == FLASHATTN_F32 ? 1e-6 : c->cdt == FLASHATTN_F16 ? 1e-3 : 8e-3;
            for (int64_t j = 0; j < add; j++)
                for (int64_t h = 0; h < c->hkv; h++) {
                    double kr[256];
                    for (int64_t x = 0; x < c->d; x++) kr[x] = get(&kn.t, 0, cu[b] + j, h, x);
                    if (rd) rotate_ref(kr, rd, c->rot_inter, cs, sn, c->len[b] + j);
                    const void *krow = cache_at(&map, &kc, b, c->len[b] + j, h);
                    const void *vrow = cache_at(&map, &vc, b, c->len[b] + j, h);
                    for (int64_t x = 0; x < c->d; x++) {
                        const double kg = fa_widen(krow, c->cdt, x), vg = fa_widen(vrow, c->cdt, x);
                        const double vw = get(&vn.t, 0, cu[b] + j, h, x);
                        worst = fmax(worst, fabs(kg - kr[x]) / fmax(1.0, fabs(kr[x])));
                        worst = fmax(worst, fabs(vg - vw) / fmax(1.0, fabs(vw)));
                    }
                }
            TT_CHECK(worst <= tol, "[%s] seq %d: appended rows off by %.3g: %s", isa, b, worst, desc);
            if (c->lq[b] == 0) continue;
            /* the reference over the sequence's keys (cache rows pad..), q rotated in double */
            /* (every input widened exactly to f32: the reference takes one dtype) */
            tt_tensor ks = tt_alloc(FLASHATTN_F32, 1, nk, c->hkv, c->d, 1, 0);
            tt_tensor vs = tt_alloc(FLASHATTN_F32, 1, nk, c->hkv, c->d, 1, 0);
            tt_tensor qs = tt_alloc(FLASHATTN_F32, 1, c->lq[b], c->hq, c->d, 1, 0);
            for (int64_t j = 0; j < nk; j++)
                for (int64_t h = 0; h < c->hkv; h++) {
                    float *kd = (float *)ks.mem + j * ks.t.stride_seq + h * ks.t.stride_head;
                    float *vd = (float *)vs.mem + j * vs.t.stride_seq + h * vs.t.stride_head;
                    const void *kr = cache_at(&map, &kc, b, c->pad[b] + j, h);
                    const void *vr = cache_at(&map, &vc, b, c->pad[b] + j, h);
                    for (int64_t x = 0; x < c->d; x++)
                        kd[x] = fa_widen(kr, c->cdt, x), vd[x] = fa_widen(vr, c->cdt, x);
                }
            for (int64_t i = 0; i < c->lq[b]; i++)
                for (int64_t h = 0; h < c->hq; h++) {
                    double qr[256];
                    for (int64_t x = 0; x < c->d; x++) qr[x] = get(&q.t, 0, cu[b] + i, h, x);
                    if (rd) rotate_ref(qr, rd, c->rot_inter, cs, sn, c->len[b] + (c->causal ? i : 0));
                    float *row = (float *)qs.mem + i * qs.t.stride_seq + h * qs.t.stride_head;
                    for (int64_t x = 0; x < c->d; x++) row[x] = (float)qr[x];
                }
            flashattn_params pd = flashattn_params_default();
            pd.causal = c->causal;
            const size_t ne = (size_t)(c->lq[b] * c->hq * c->d);
            double *ref = malloc(ne * sizeof(double)), *rlse = malloc((size_t)(c->hq * c->lq[b]) * sizeof(double));
            double *std = malloc(ne * sizeof(double));
            TT_CHECK(fa_reference_fwd_f64(&qs.t, &ks.t, &vs.t, &pd, ref, rlse) == 0, "reference: %s", desc);
            double bound = 1e-5;
            if (c->cdt != FLASHATTN_F32 || c->qdt != FLASHATTN_F32) {
                tt_standard_f32(&qs.t, &ks.t, &vs.t, &pd, FLASHATTN_F32, std);
                double e = 0.0;
                for (size_t x = 0; x < ne; x++) e = fmax(e, fabs(std[x] - ref[x]));
                bound = fmax(1e-5, 2.0 * e);
            }
            const flashattn_tensor ov = rows_of(&o.t, cu[b], c->lq[b]);
            const double err = fa_max_abs_err(&ov, ref);
            TT_CHECK(err <= bound, "[%s] seq %d: o max err %.3g > %.3g: %s", isa, b, err, bound, desc);
            float *sl = malloc((size_t)(c->hq * c->lq[b]) * sizeof(float));
            for (int64_t h = 0; h < c->hq; h++)
                memcpy(sl + h * c->lq[b], lse + h * tq + cu[b], (size_t)c->lq[b] * sizeof(float));
            int inf_ok = 0;
            const double lerr = fa_lse_err(sl, rlse, (size_t)(c->hq * c->lq[b]), &inf_ok);
            TT_CHECK(lerr <= 1e-4 && inf_ok, "[%s] seq %d: lse err %.3g: %s", isa, b, lerr, desc);
            free(sl), free(ref), free(rlse), free(std);
            tt_free(&ks), tt_free(&vs), tt_free(&qs);
        }
        tt_free(&o);
        free(lse);
    }
    free(kc0), free(vc0), free(cs), free(sn), free(table);
    tt_free(&kc), tt_free(&vc), tt_free(&q), tt_free(&kn), tt_free(&vn);
}

static void decode_sweep(void) {
    static const int64_t lq[][5] = {{1, 3, 0, 7, 2}, {4, 1, 1, 12, 0}, {1, 1, 1, 1, 1}};
    static const int64_t len[][5] = {{10, 0, 5, 33, 1}, {0, 17, 40, 3, 9}, {50, 2, 0, 20, 8}};
    static const int64_t pad[][5] = {{3, 0, 5, 0, 1}, {0, 4, 0, 2, 0}, {10, 1, 0, 19, 0}};
    for (int i = 0; i < 12; i++) {
        dcase c;
        memset(&c, 0, sizeof c);
        c.n = 5;
        const int m = i % 3;
        for (int b = 0; b < 5; b++) {
            c.lq[b] = lq[m][b], c.len[b] = len[m][b];
            c.pad[b] = i % 4 == 0 ? 0 : pad[m][b];
        }
        c.append = i % 5 != 4;
        c.paged = i % 2;
        c.batch_idx = !c.paged && i % 4 == 2;
        c.rot_dim = i % 3 == 0 ? 0 : (i % 3 == 1 ? 16 : 32);
        c.rot_inter = i / 3 % 2;
        c.causal = i % 4 != 3;
        c.hq = i % 2 ? 4 : 2, c.hkv = i % 2 ? 1 : 2;
        c.d = i % 3 == 2 ? 32 : 48;
        c.qdt = (flashattn_dtype)(i % 3);
        c.cdt = (flashattn_dtype)(i / 2 % 3);
        run_decode_case(&c, 77 + (uint64_t)i);
    }
}

/* ---- bad input ----------------------------------------------------------- */

static void errors(void) {
    int32_t cu_q[4] = {0, 3, 5, 9}, cu_k[4] = {0, 4, 4, 10}, used[3] = {4, 0, 6};
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 9, 2, 16, 1, 0), k = tt_alloc(FLASHATTN_F32, 1, 10, 2, 16, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, 1, 10, 2, 16, 1, 0), o = tt_alloc(FLASHATTN_F32, 1, 9, 2, 16, 1, 0);
    uint64_t rng = 5;
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    float lse[18];
    flashattn_varlen vl;
    flashattn_params p = flashattn_params_default();
    p.varlen = &vl;
    struct {
        const char *what;
        int32_t q1, k2, used2, batch, size_off;
        flashattn_status want;
    } bad[] = {
        {"good", 3, 4, 6, 3, 0, FLASHATTN_OK},
        {"cu_q decreasing", 6, 4, 6, 3, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"cu_k decreasing", 3, 11, 6, 3, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"seqused_k past the keys", 3, 4, 7, 3, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"seqused_k negative", 3, 4, -1, 3, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"totals disagree (batch 2)", 3, 4, 6, 2, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"negative batch", 3, 4, 6, -1, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"struct_size", 3, 4, 6, 3, 8, FLASHATTN_ERR_BAD_PARAM},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        flashattn_varlen_init(&vl);
        cu_q[1] = bad[i].q1, cu_k[2] = bad[i].k2, used[2] = bad[i].used2;
        vl.batch = bad[i].batch, vl.struct_size += (size_t)bad[i].size_off;
        vl.cu_seqlens_q = cu_q, vl.cu_seqlens_k = cu_k, vl.seqused_k = used;
        tt_fill_sentinel(o.mem, o.bytes);
        tt_fill_sentinel(lse, sizeof lse);
        const flashattn_status s = flashattn_fwd(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0);
        TT_CHECK(s == bad[i].want, "%s: status %d, want %d (%s)", bad[i].what, s, bad[i].want, flashattn_last_error());
        if (bad[i].want)
            TT_CHECK(tt_untouched(o.mem, o.bytes) && tt_untouched(lse, sizeof lse), "%s: wrote output", bad[i].what);
        else
            TT_CHECK(!tt_untouched(o.mem, o.bytes), "%s: wrote nothing", bad[i].what);
    }
    cu_q[1] = 3, cu_k[2] = 4, used[2] = 6;
    flashattn_varlen_init(&vl);
    vl.batch = 3, vl.cu_seqlens_q = cu_q, vl.cu_seqlens_k = cu_k;
    vl.cu_seqlens_k = NULL;
    TT_CHECK(flashattn_fwd(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0) == FLASHATTN_ERR_NULL_POINTER,
             "NULL cu_seqlens_k accepted");
    vl.cu_seqlens_k = cu_k;
    flashattn_tensor q3 = q.t, o3 = o.t;
    q3.batch = 2, q3.seqlen = 4, o3.batch = 2, o3.seqlen = 4;
    flashattn_tensor k3 = k.t, v3 = v.t;
    k3.batch = 2, k3.seqlen = 5, v3.batch = 2, v3.seqlen = 5;
    TT_CHECK(flashattn_fwd(&q3, &k3, &v3, &o3, NULL, &p, NULL, 0) == FLASHATTN_ERR_BAD_SHAPE,
             "batch 2 tensors accepted with varlen");

    /* decode: cache options */
    tt_tensor kc = tt_alloc(FLASHATTN_F32, 3, 16, 2, 16, 1, 0), vc = tt_alloc(FLASHATTN_F32, 3, 16, 2, 16, 1, 0);
    tt_fill_normal(&kc, &rng, 1.0), tt_fill_normal(&vc, &rng, 1.0);
    int32_t lens[3] = {2, 5, 1}, pads[3] = {0, 1, 0}, bidx[3] = {2, 1, 0};
    float cs[64], sn[64];
    for (int x = 0; x < 64; x++) cs[x] = 1.0f, sn[x] = 0.0f;
    struct {
        const char *what;
        int pad1, bidx0, rot_dim, rot_len, cu_k, paged;
        flashattn_status want;
    } dbad[] = {
        {"good", 1, 2, 8, 16, 0, 0, FLASHATTN_OK},
        {"leftpad past seqlens", 6, 2, 8, 16, 0, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"batch_idx out of range", 1, 3, 8, 16, 0, 0, FLASHATTN_ERR_BAD_PARAM},
        {"odd rotary_dim", 1, 2, 7, 16, 0, 0, FLASHATTN_ERR_BAD_PARAM},
        {"rotary_dim past head_dim", 1, 2, 18, 16, 0, 0, FLASHATTN_ERR_BAD_PARAM},
        {"rotary position past rotary_len", 1, 2, 8, 5, 0, 0, FLASHATTN_ERR_BAD_SHAPE},
        {"cu_seqlens_k in decode", 1, 2, 8, 16, 1, 0, FLASHATTN_ERR_BAD_PARAM},
        {"batch_idx with a paged cache", 1, 2, 8, 16, 0, 1, FLASHATTN_ERR_BAD_PARAM},
    };
    for (size_t i = 0; i < sizeof dbad / sizeof dbad[0]; i++) {
        flashattn_kv_cache c;
        flashattn_kv_cache_init(&c);
        c.k = kc.t, c.v = vc.t;
        c.seqlens_i32 = lens;
        pads[1] = dbad[i].pad1, bidx[0] = dbad[i].bidx0;
        c.leftpad = pads, c.batch_idx = bidx;
        c.rotary_cos = cs, c.rotary_sin = sn, c.rotary_dim = dbad[i].rot_dim, c.rotary_len = dbad[i].rot_len;
        int32_t table[3] = {0, 1, 2};
        if (dbad[i].paged) c.block_table = table, c.max_pages_per_seq = 1;
        flashattn_varlen_init(&vl);
        vl.batch = 3, vl.cu_seqlens_q = cu_q, vl.cu_seqlens_k = dbad[i].cu_k ? cu_k : NULL;
        const void *kbefore = NULL;
        void *ksave = malloc(kc.bytes);
        memcpy(ksave, kc.mem, kc.bytes);
        kbefore = ksave;
        tt_tensor kn = tt_alloc(FLASHATTN_F32, 1, 9, 2, 16, 1, 0), vn = tt_alloc(FLASHATTN_F32, 1, 9, 2, 16, 1, 0);
        tt_fill_normal(&kn, &rng, 1.0), tt_fill_normal(&vn, &rng, 1.0);
        tt_fill_sentinel(o.mem, o.bytes);
        const flashattn_status s = flashattn_decode(&q.t, &c, &kn.t, &vn.t, &o.t, lse, &p, NULL, 0);
        TT_CHECK(s == dbad[i].want, "decode %s: status %d, want %d (%s)", dbad[i].what, s, dbad[i].want,
                 flashattn_last_error());
        if (dbad[i].want)
            TT_CHECK(tt_untouched(o.mem, o.bytes) && !memcmp(kbefore, kc.mem, kc.bytes),
                     "decode %s: wrote output or cache", dbad[i].what);
        memcpy(kc.mem, ksave, kc.bytes);
        free(ksave);
        tt_free(&kn), tt_free(&vn);
    }
    tt_free(&kc), tt_free(&vc);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&o);
}

int main(void) {
    errors();
    sweep();
    auto_tiles_per_sequence();
    decode_sweep();
    return tt_finish("test_varlen");
}
