/*
 * The standard-attention baselines (src/baseline) against the FP64
 * reference, on every ISA path, with the forward test's pass rules: f32
 * inputs within 1e-5 (N(0,1)); f16/bf16 inputs within twice the error of
 * plain f32 standard attention rounded to the same dtype. The sweep covers
 * causal and windows in both alignments, GQA/MQA, seq_q != seq_k, empty
 * sequences, both layouts and padded rows, 1 and 2 threads (whose results
 * must agree exactly), and shapes where one pass holds several heads and
 * a GQA group straddles two passes. The CBLAS baseline, where built, runs
 * every f32 case.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baseline/standard.h"
#include "reference/attn_f64.h"
#include "testutil.h"

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    int causal, align;
    int64_t wl, wr;
    flashattn_dtype dt;
    int layout; /* 0 bshd, 1 bhsd, 2 bshd with padded rows */
} std_case;

static const char *dt_name(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

static void describe(const std_case *c, char *buf, size_t n) {
    snprintf(buf, n, "b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d align=%d win=(%lld,%lld) %s layout=%d",
             (long long)c->b, (long long)c->sq, (long long)c->sk, (long long)c->hq,
             (long long)c->hkv, (long long)c->d, c->causal, c->align, (long long)c->wl,
             (long long)c->wr, dt_name(c->dt), c->layout);
}

typedef flashattn_status (*size_fn)(const flashattn_tensor *, const flashattn_tensor *,
                                    const flashattn_tensor *, const flashattn_tensor *,
                                    const flashattn_params *, const fa_kernels *, size_t *);
typedef flashattn_status (*run_fn)(const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_params *, const fa_kernels *, void *, size_t);

static flashattn_status cblas_size(const flashattn_tensor *q, const flashattn_tensor *k,
                                   const flashattn_tensor *v, const flashattn_tensor *o,
                                   const flashattn_params *p, const fa_kernels *kern, size_t *ws) {
    return fa_standard_cblas_workspace_size(q, k, v, o, p, ws);
}

/* Run one baseline into a fresh output; returns the output (caller frees). */
static tt_tensor run_one(const std_case *c, const tt_tensor *q, const tt_tensor *k,
                         const tt_tensor *v, const flashattn_params *p, const fa_kernels *kern,
                         size_fn size, run_fn run, const char *what, const char *desc) {
    int bshd = c->layout != 1;
    tt_tensor o = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, !bshd, c->layout == 2 ? 5 : 0);
    size_t ws = 0;
    flashattn_status s = size(&q->t, &k->t, &v->t, &o.t, p, kern, &ws);
    TT_CHECK(s == FLASHATTN_OK, "[%s %s] size status %d (%s): %s", what, kern->isa, s,
             flashattn_last_error(), desc);
    TT_CHECK(ws >= (size_t)(c->sq * c->sk) * sizeof(float),
             "[%s %s] %zu workspace bytes cannot hold S: %s", what, kern->isa, ws, desc);
    void *w = malloc(ws ? ws : 1);
    if (!s) s = run(&q->t, &k->t, &v->t, &o.t, p, kern, w, ws);
    TT_CHECK(s == FLASHATTN_OK, "[%s %s] status %d (%s): %s", what, kern->isa, s,
             flashattn_last_error(), desc);
    free(w);
    return o;
}

/* Exact agreement of two outputs of the same layout, element by element
 * over the whole buffer (padding included); +0 and -0 agree. */
static int same_output(const tt_tensor *a, const tt_tensor *b) {
    if (a->bytes != b->bytes) return 0;
    if (a->t.dtype == FLASHATTN_F32) {
        const float *x = a->mem, *y = b->mem;
        for (size_t i = 0; i < a->bytes / 4; i++)
            if (!(x[i] == y[i]) && memcmp(&x[i], &y[i], 4)) return 0;
    } else {
        const uint16_t *x = a->mem, *y = b->mem;
        for (size_t i = 0; i < a->bytes / 2; i++)
            if (x[i] != y[i] && ((x[i] | y[i]) & 0x7fff)) return 0;
    }
    return 1;
}

static void run_case(const std_case *c, uint64_t seed) {
    uint64_t rng = seed;
    int bshd = c->layout != 1;
    int64_t pad = c->layout == 2 ? 3 : 0;
    tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, bshd, pad);
    tt_tensor k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, bshd, pad);
    tt_tensor v = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, bshd, pad);
    tt_fill_normal(&q, &rng, 1.0);
    tt_fill_normal(&k, &rng, 1.0);
    tt_fill_normal(&v, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal;
    p.align = c->align;
    p.window_left = c->wl;
    p.window_right = c->wr;
    size_t on = (size_t)(c->b * c->sq * c->hq * c->d);
    double *ref = malloc((on ? on : 1) * sizeof(double));
    double *std = malloc((on ? on : 1) * sizeof(double));
    char desc[256];
    describe(c, desc, sizeof desc);
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, ref, NULL) == FLASHATTN_OK, "reference: %s", desc);
    double bound = 1e-5;
    if (c->dt != FLASHATTN_F32) {
        tt_standard_f32(&q.t, &k.t, &v.t, &p, c->dt, std);
        double e = 0.0;
        for (size_t i = 0; i < on; i++) e = fmax(e, fabs(std[i] - ref[i]));
        bound = 2.0 * e;
    }

    const fa_kernels *isas[4];
    int n = tt_isas(isas, 4), first = 0;
    /* Multi-pass shapes exercise pass logic common to every path: the best
     * path alone keeps the sanitizer run short. */
    if ((double)c->b * c->hq * c->sq * c->sk > 4e6) first = n - 1;
    for (int t = first; t < n; t++) {
        p.num_threads = 1;
        tt_tensor o1 = run_one(c, &q, &k, &v, &p, isas[t], fa_standard_workspace_size,
                               fa_standard_fwd, "standard", desc);
        p.num_threads = 2;
        tt_tensor o2 = run_one(c, &q, &k, &v, &p, isas[t], fa_standard_workspace_size,
                               fa_standard_fwd, "standard", desc);
        double err = tt_max_abs_err(&o1, ref);
        TT_CHECK(err <= bound, "[standard %s] max abs err %.3g > bound %.3g: %s", isas[t]->isa,
                 err, bound, desc);
        TT_CHECK(same_output(&o1, &o2), "[standard %s] 1 and 2 threads differ: %s", isas[t]->isa,
                 desc);
        if (getenv("FA_TEST_VERBOSE"))
            printf("[standard %s] err %.3g (bound %.3g)  %s\n", isas[t]->isa, err, bound, desc);
        tt_free(&o1);
        tt_free(&o2);
        if (fa_standard_cblas_name() && c->dt == FLASHATTN_F32) {
            tt_tensor ob = run_one(c, &q, &k, &v, &p, isas[t], cblas_size, fa_standard_cblas_fwd,
                                   "cblas", desc);
            err = tt_max_abs_err(&ob, ref);
            TT_CHECK(err <= bound, "[cblas %s] max abs err %.3g > bound %.3g: %s", isas[t]->isa,
                     err, bound, desc);
            if (getenv("FA_TEST_VERBOSE"))
                printf("[cblas %s] err %.3g (bound %.3g)  %s\n", isas[t]->isa, err, bound, desc);
            tt_free(&ob);
        }
    }
    free(ref);
    free(std);
    tt_free(&q);
    tt_free(&k);
    tt_free(&v);
}

/* Bad calls return their code and leave the output alone. */
static void error_paths(void) {
    const fa_kernels *isas[4];
    tt_isas(isas, 4);
    uint64_t rng = 7;
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 40, 4, 16, 1, 0);
    tt_tensor k = tt_alloc(FLASHATTN_F32, 1, 50, 2, 16, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, 1, 50, 2, 16, 1, 0);
    tt_tensor o = tt_alloc(FLASHATTN_F32, 1, 40, 4, 16, 1, 0);
    tt_fill_normal(&q, &rng, 1.0);
    tt_fill_normal(&k, &rng, 1.0);
    tt_fill_normal(&v, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    size_t ws = 0;
    TT_CHECK(fa_standard_workspace_size(&q.t, &k.t, &v.t, &o.t, &p, isas[0], &ws) == FLASHATTN_OK,
             "workspace size of a valid problem");
    void *w = malloc(ws);
    tt_fill_sentinel(o.mem, o.bytes);
    TT_CHECK(fa_standard_fwd(&q.t, &k.t, &v.t, &o.t, &p, isas[0], w, ws - 1) ==
                 FLASHATTN_ERR_WORKSPACE_TOO_SMALL, "workspace one byte short");
    TT_CHECK(tt_untouched(o.mem, o.bytes), "output written despite a too-small workspace");
    k.t.heads = 3;
    v.t.heads = 3;
    TT_CHECK(fa_standard_fwd(&q.t, &k.t, &v.t, &o.t, &p, isas[0], w, ws) == FLASHATTN_ERR_BAD_HEADS,
             "heads_q 4 with heads_kv 3");
    TT_CHECK(tt_untouched(o.mem, o.bytes), "output written despite bad heads");
    k.t.heads = 2;
    v.t.heads = 2;
    TT_CHECK(fa_standard_fwd(&q.t, &k.t, &v.t, &o.t, &p, NULL, w, ws) == FLASHATTN_ERR_UNSUPPORTED,
             "NULL kernel table");
    if (fa_standard_cblas_name()) {
        tt_tensor oh = tt_alloc(FLASHATTN_F16, 1, 40, 4, 16, 1, 0);
        TT_CHECK(fa_standard_cblas_fwd(&q.t, &k.t, &v.t, &oh.t, &p, isas[0], NULL, 0) ==
                     FLASHATTN_ERR_BAD_DTYPE, "CBLAS baseline with an f16 output");
        TT_CHECK(tt_untouched(oh.mem, oh.bytes), "f16 output written by the CBLAS baseline");
        tt_free(&oh);
    } else {
        TT_CHECK(fa_standard_cblas_fwd(&q.t, &k.t, &v.t, &o.t, &p, isas[0], NULL, 0) ==
                     FLASHATTN_ERR_UNSUPPORTED, "CBLAS baseline without a CBLAS");
    }
    free(w);
    tt_free(&q);
    tt_free(&k);
    tt_free(&v);
    tt_free(&o);
}

int main(void) {
    /* b, sq, sk, hq, hkv, d, causal, align, wl, wr, dtype, layout */
    static const std_case cases[] = {
        {1, 17, 17, 1, 1, 1, 0, 0, -1, -1, FLASHATTN_F32, 0},
        {2, 113, 113, 4, 1, 64, 1, 0, -1, -1, FLASHATTN_F32, 1},
        {1, 300, 64, 2, 2, 40, 1, 0, -1, -1, FLASHATTN_F32, 2},   /* early rows see nothing */
        {1, 64, 300, 2, 2, 80, 1, 1, -1, -1, FLASHATTN_F32, 0},
        {1, 200, 200, 3, 1, 128, 0, 0, 16, 0, FLASHATTN_F32, 0},
        {1, 130, 90, 2, 1, 32, 0, 1, 8, 8, FLASHATTN_F32, 1},
        {1, 90, 130, 2, 2, 96, 0, 0, 5, -1, FLASHATTN_F32, 2},
        {1, 50, 500, 1, 1, 256, 0, 1, 0, 0, FLASHATTN_F32, 0},    /* windows past the last key */
        {1, 700, 700, 1, 1, 32, 0, 0, -1, -1, FLASHATTN_F32, 0},
        {1, 1500, 1500, 8, 2, 2, 1, 0, -1, -1, FLASHATTN_F32, 0}, /* a pass per head, GQA 4:1 */
        {1, 600, 600, 6, 2, 4, 1, 1, -1, -1, FLASHATTN_F32, 2},   /* 2 heads a pass, GQA 3:1:
                                                                    a group straddles passes */
        {2, 1, 1, 2, 1, 16, 1, 0, -1, -1, FLASHATTN_F32, 0},
        {1, 0, 5, 2, 1, 16, 0, 0, -1, -1, FLASHATTN_F32, 0},
        {1, 5, 0, 2, 1, 16, 0, 0, -1, -1, FLASHATTN_F32, 1},
        {2, 113, 77, 4, 2, 64, 0, 0, -1, -1, FLASHATTN_F16, 0},
        {1, 77, 113, 4, 4, 128, 1, 0, -1, -1, FLASHATTN_F16, 1},
        {2, 113, 77, 4, 2, 64, 1, 1, -1, -1, FLASHATTN_BF16, 2},
        {1, 77, 200, 8, 1, 40, 0, 0, -1, -1, FLASHATTN_BF16, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 500 + i);
    error_paths();
    return tt_finish("test_baseline");
}
