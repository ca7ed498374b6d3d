/*
 * Two builds of libflashattn timed against each other in one process, for
 * changes that must not change speed: both libraries loaded with dlopen
 * (RTLD_LOCAL), the same inputs, their calls alternating in every round
 * (which goes first swaps each round), medians of the rounds and of the
 * per-round ratios. Forward, backward and decode shapes on 1 and 2
 * threads. Build and run with bench/ab/run.sh.
 *
 *   ab_time OLD.so NEW.so [all|fwd|bwd|dec|focus|short|fshort|tiny|window]
 */
#include <dlfcn.h>
#include <flashattn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>

typedef flashattn_status (*fwd_fn)(const flashattn_tensor *, const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_tensor *, float *, const flashattn_params *, void *, size_t);
typedef flashattn_status (*fwdws_fn)(const flashattn_tensor *, const flashattn_tensor *, const flashattn_tensor *,
                                     const flashattn_tensor *, const float *, const flashattn_params *, size_t *);
typedef flashattn_status (*bwd_fn)(const flashattn_tensor *, const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_tensor *, const flashattn_tensor *, const float *,
                                   const flashattn_tensor *, const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_params *, void *, size_t);
typedef flashattn_status (*bwdws_fn)(const flashattn_tensor *, const flashattn_tensor *, const flashattn_tensor *,
                                     const flashattn_tensor *, const flashattn_tensor *, const float *,
                                     const flashattn_tensor *, const flashattn_tensor *, const flashattn_tensor *,
                                     const flashattn_params *, size_t *);
typedef flashattn_status (*dec_fn)(const flashattn_tensor *, const flashattn_kv_cache *, const flashattn_tensor *,
                                   const flashattn_tensor *, const flashattn_tensor *, float *,
                                   const flashattn_params *, void *, size_t);
typedef flashattn_status (*decws_fn)(const flashattn_tensor *, const flashattn_kv_cache *, const flashattn_tensor *,
                                     const flashattn_tensor *, const flashattn_tensor *, const float *,
                                     const flashattn_params *, size_t *);
typedef struct { fwd_fn fwd; fwdws_fn fwdws; bwd_fn bwd; bwdws_fn bwdws; dec_fn dec; decws_fn decws; } lib;

static lib load(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(1); }
    lib l = {(fwd_fn)dlsym(h, "flashattn_fwd"), (fwdws_fn)dlsym(h, "flashattn_fwd_workspace_size"),
             (bwd_fn)dlsym(h, "flashattn_bwd"), (bwdws_fn)dlsym(h, "flashattn_bwd_workspace_size"),
             (dec_fn)dlsym(h, "flashattn_decode"), (decws_fn)dlsym(h, "flashattn_decode_workspace_size")};
    return l;
}
static flashattn_tensor (*bshd)(void *, flashattn_dtype, int64_t, int64_t, int64_t, int64_t);
static flashattn_params (*pdefault)(void);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median(double *x, int n) { qsort(x, n, sizeof *x, cmp); return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]); }
static uint64_t rs = 1;
static void *rnd(flashattn_dtype dt, size_t n) {
    void *p = malloc(n * (dt == FLASHATTN_F32 ? 4 : 2) + 64);
    for (size_t i = 0; i < n; i++) {
        rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
        float f = (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
        if (dt == FLASHATTN_F32) ((float *)p)[i] = f;
        else { _Float16 h = (_Float16)f; memcpy((uint16_t *)p + i, &h, 2); }
    }
    return p;
}
static lib A, B;
static int rounds = 11;
static int window = -1; /* window_left of the `window` set's calls */

static void report(const char *what, double *ta, double *tb, int n) {
    double r[64];
    for (int i = 0; i < n; i++) r[i] = tb[i] / ta[i];
    double ma = median(ta, n), mb = median(tb, n), mr = median(r, n);
    printf("%-44s old %9.3f ms  new %9.3f ms  new/old %.3f (median of per-round ratios %.3f)\n", what, ma * 1e3, mb * 1e3, mb / ma, mr);
    fflush(stdout);
}

static void fwd(int sq, int sk, int h, int hk, int d, flashattn_dtype dt, int causal, int threads, int lse_on) {
    void *q = rnd(dt, (size_t)sq * h * d), *k = rnd(dt, (size_t)sk * hk * d), *v = rnd(dt, (size_t)sk * hk * d);
    void *o = malloc((size_t)sq * h * d * 4 + 64); float *lse = malloc((size_t)h * sq * 4 + 64);
    flashattn_tensor Q = bshd(q, dt, 1, sq, h, d), K = bshd(k, dt, 1, sk, hk, d),
                     V = bshd(v, dt, 1, sk, hk, d), O = bshd(o, dt, 1, sq, h, d);
    flashattn_params p = pdefault(); p.causal = causal; p.num_threads = threads; p.window_left = window;
    size_t wa, wb; A.fwdws(&Q, &K, &V, &O, lse_on ? lse : NULL, &p, &wa); B.fwdws(&Q, &K, &V, &O, lse_on ? lse : NULL, &p, &wb);
    void *sa = malloc(wa + 64), *sb = malloc(wb + 64);
    double ta[64], tb[64];
    int reps = 1; double t0 = now(); A.fwd(&Q, &K, &V, &O, lse_on ? lse : NULL, &p, sa, wa); double one = now() - t0;
    if (one < 0.02) reps = (int)(0.02 / (one > 1e-7 ? one : 1e-7)) + 1;
    for (int r = 0; r < rounds; r++) {
        for (int s = 0; s < 2; s++) {
            const int useA = (r + s) % 2 == 0;
            double t = now();
            for (int i = 0; i < reps; i++) (useA ? A : B).fwd(&Q, &K, &V, &O, lse_on ? lse : NULL, &p, useA ? sa : sb, useA ? wa : wb);
            t = (now() - t) / reps;
            if (useA) ta[r] = t; else tb[r] = t;
        }
    }
    char what[128];
    snprintf(what, sizeof what, "fwd %s sq%d sk%d h%d/%d d%d%s%s w%d t%d", dt == FLASHATTN_F32 ? "f32" : "f16", sq, sk, h, hk, d, causal ? " causal" : "", lse_on ? " lse" : "", window, threads);
    report(what, ta, tb, rounds);
    free(q); free(k); free(v); free(o); free(lse); free(sa); free(sb);
}

static void bwd(int s_, int h, int d, int causal, int threads) {
    flashattn_dtype dt = FLASHATTN_F32;
    size_t n = (size_t)s_ * h * d;
    void *q = rnd(dt, n), *k = rnd(dt, n), *v = rnd(dt, n), *o = malloc(n * 4), *dout = rnd(dt, n);
    void *dq = malloc(n * 4), *dk = malloc(n * 4), *dv = malloc(n * 4); float *lse = malloc((size_t)h * s_ * 4);
    flashattn_tensor Q = bshd(q, dt, 1, s_, h, d), K = bshd(k, dt, 1, s_, h, d),
                     V = bshd(v, dt, 1, s_, h, d), O = bshd(o, dt, 1, s_, h, d),
                     DO = bshd(dout, dt, 1, s_, h, d), DQ = bshd(dq, dt, 1, s_, h, d),
                     DK = bshd(dk, dt, 1, s_, h, d), DV = bshd(dv, dt, 1, s_, h, d);
    flashattn_params p = pdefault(); p.causal = causal; p.num_threads = threads; p.window_left = window;
    A.fwd(&Q, &K, &V, &O, lse, &p, NULL, 0);
    size_t wa, wb; A.bwdws(&Q, &K, &V, &O, &DO, lse, &DQ, &DK, &DV, &p, &wa); B.bwdws(&Q, &K, &V, &O, &DO, lse, &DQ, &DK, &DV, &p, &wb);
    void *sa = malloc(wa + 64), *sb = malloc(wb + 64);
    double ta[64], tb[64];
    /* long calls: at most 7 rounds of one; short ones: every round at
     * least 20 ms of calls, as fwd times them */
    int reps = 1, rr = rounds < 7 ? rounds : 7;
    double t0 = now();
    A.bwd(&Q, &K, &V, &O, &DO, lse, &DQ, &DK, &DV, &p, sa, wa);
    const double one = now() - t0;
    if (one < 0.02) reps = (int)(0.02 / (one > 1e-7 ? one : 1e-7)) + 1, rr = rounds;
    for (int r = 0; r < rr; r++)
        for (int s = 0; s < 2; s++) {
            const int useA = (r + s) % 2 == 0;
            double t = now();
            for (int i = 0; i < reps; i++)
                (useA ? A : B).bwd(&Q, &K, &V, &O, &DO, lse, &DQ, &DK, &DV, &p, useA ? sa : sb, useA ? wa : wb);
            t = (now() - t) / reps;
            if (useA) ta[r] = t; else tb[r] = t;
        }
    char what[128];
    snprintf(what, sizeof what, "bwd f32 seq%d h%d d%d%s w%d t%d", s_, h, d, causal ? " causal" : "", window, threads);
    report(what, ta, tb, rr);
}

/* An int8 cache (cdt FLASHATTN_INT8) holds random bytes with per-token
 * scales; otherwise f16. */
static void dec(int kv, int sq, int h, int hk, int d, int threads, flashattn_dtype cdt) {
    void *q = rnd(FLASHATTN_F32, (size_t)sq * h * d), *o = malloc((size_t)sq * h * d * 4); float *lse = malloc((size_t)h * sq * 4);
    const size_t nc = (size_t)kv * hk * d;
    void *kc = cdt == FLASHATTN_INT8 ? rnd(FLASHATTN_F16, nc / 2 + 1) : rnd(cdt, nc);
    void *vc = cdt == FLASHATTN_INT8 ? rnd(FLASHATTN_F16, nc / 2 + 1) : rnd(cdt, nc);
    float *ks = malloc((size_t)kv * hk * 4), *vs = malloc((size_t)kv * hk * 4);
    for (size_t i = 0; i < (size_t)kv * hk; i++) ks[i] = vs[i] = 1.0f / 127;
    int64_t lens[1] = {kv};
    flashattn_kv_cache c; memset(&c, 0, sizeof c); c.struct_size = sizeof c;
    c.k = bshd(kc, cdt, 1, kv, hk, d); c.v = bshd(vc, cdt, 1, kv, hk, d); c.seqlens_i64 = lens;
    if (cdt == FLASHATTN_INT8) {
        c.k_scale = bshd(ks, FLASHATTN_F32, 1, kv, hk, 1); c.v_scale = bshd(vs, FLASHATTN_F32, 1, kv, hk, 1);
        c.k_scale_kind = c.v_scale_kind = FLASHATTN_SCALE_PER_TOKEN;
    }
    flashattn_tensor Q = bshd(q, FLASHATTN_F32, 1, sq, h, d), O = bshd(o, FLASHATTN_F32, 1, sq, h, d);
    flashattn_params p = pdefault(); p.num_threads = threads; p.causal = 1;
    size_t wa, wb; A.decws(&Q, &c, NULL, NULL, &O, lse, &p, &wa); B.decws(&Q, &c, NULL, NULL, &O, lse, &p, &wb);
    void *sa = malloc(wa + 64), *sb = malloc(wb + 64);
    double ta[64], tb[64];
    int reps = 1; double t0 = now(); A.dec(&Q, &c, NULL, NULL, &O, lse, &p, sa, wa); double one = now() - t0;
    if (one < 0.02) reps = (int)(0.02 / (one > 1e-7 ? one : 1e-7)) + 1;
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < 2; s++) {
            const int useA = (r + s) % 2 == 0;
            double t = now();
            for (int i = 0; i < reps; i++) (useA ? A : B).dec(&Q, &c, NULL, NULL, &O, lse, &p, useA ? sa : sb, useA ? wa : wb);
            t = (now() - t) / reps;
            if (useA) ta[r] = t; else tb[r] = t;
        }
    char what[128];
    snprintf(what, sizeof what, "decode %s cache kv%d sq%d h%d/%d d%d t%d",
             cdt == FLASHATTN_INT8 ? "int8" : "f16", kv, sq, h, hk, d, threads);
    report(what, ta, tb, rounds);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: ab_time OLD.so NEW.so [all|fwd|bwd|dec|focus|short|fshort|tiny|window]\n");
        return 2;
    }
    A = load(argv[1]); B = load(argv[2]);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    bshd = dlsym(h, "flashattn_tensor_bshd");
    pdefault = dlsym(h, "flashattn_params_default");
    const char *only = argc > 3 ? argv[3] : "all";
    if (!strcmp(only, "focus")) {
        rounds = 41;
        fwd(512, 512, 8, 8, 128, FLASHATTN_F32, 0, 1, 0);
        fwd(1024, 1024, 8, 8, 128, FLASHATTN_F16, 0, 1, 0);
        fwd(64, 64, 8, 8, 128, FLASHATTN_F32, 1, 1, 1);
        fwd(512, 512, 8, 8, 128, FLASHATTN_F32, 0, 2, 0);
        return 0;
    }
    if (!strcmp(only, "tiny")) { /* a call's fixed cost: one to a few dozen rows and keys */
        rounds = 21;
        for (int t = 1; t <= 2; t++) {
            fwd(1, 1, 8, 8, 128, FLASHATTN_F32, 0, t, 1);
            fwd(1, 1, 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            fwd(2, 2, 8, 8, 128, FLASHATTN_F32, 0, t, 1);
            fwd(16, 16, 8, 8, 128, FLASHATTN_F32, 0, t, 1);
            fwd(16, 16, 8, 8, 128, FLASHATTN_F16, 0, t, 1);
            fwd(32, 33, 8, 8, 128, FLASHATTN_F32, 1, t, 1);
            fwd(64, 64, 8, 8, 128, FLASHATTN_F32, 0, t, 1);
        }
        return 0;
    }
    if (!strcmp(only, "short") || !strcmp(only, "fshort")) {
        /* fshort: the forward rows alone, with more rounds */
        const int fwd_only = only[0] == 'f';
        rounds = fwd_only ? 41 : 21;
        for (int t = 1; t <= 2; t++) {
            fwd(128, 128, 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            fwd(256, 256, 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            fwd(512, 512, 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            if (fwd_only) {
                fwd(128, 128, 8, 8, 64, FLASHATTN_F32, 0, t, 0);
                continue;
            }
            fwd(512, 512, 8, 8, 128, FLASHATTN_F32, 1, t, 0);
            fwd(512, 512, 8, 8, 64, FLASHATTN_F32, 0, t, 0);
            bwd(128, 8, 128, 0, t);
            bwd(256, 8, 128, 0, t);
            bwd(512, 8, 128, 0, t);
            bwd(128, 8, 64, 0, t);
        }
        return 0;
    }
    for (int t = 1; t <= 2; t++) {
        if (!strcmp(only, "all") || !strcmp(only, "fwd")) {
            int seqs[] = {512, 1024, 2048, 4096};
            for (int i = 0; i < 4; i++) fwd(seqs[i], seqs[i], 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            fwd(2048, 2048, 8, 8, 128, FLASHATTN_F32, 1, t, 1);
            fwd(1024, 1024, 8, 8, 128, FLASHATTN_F16, 0, t, 0);
            fwd(1024, 1024, 8, 8, 64, FLASHATTN_F32, 1, t, 0);
            fwd(16, 16, 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            fwd(64, 64, 8, 8, 128, FLASHATTN_F32, 1, t, 1);
            fwd(128, 128, 8, 8, 128, FLASHATTN_F32, 0, t, 0);
            fwd(256, 256, 8, 8, 128, FLASHATTN_F16, 1, t, 0);
        }
        if (!strcmp(only, "all") || !strcmp(only, "bwd")) {
            bwd(1024, 8, 128, 0, t);
            bwd(2048, 8, 128, 1, t);
            bwd(256, 8, 64, 0, t);
            bwd(512, 8, 128, 1, t);
            bwd(1024, 8, 128, 1, t);
            bwd(4096, 8, 128, 1, t);
        }
        if (!strcmp(only, "window")) { /* causal sliding windows (window_left) */
            const int wins[] = {256, 1024};
            for (int i = 0; i < 2; i++) {
                window = wins[i];
                fwd(4096, 4096, 8, 8, 128, FLASHATTN_F32, 1, t, 1);
                bwd(4096, 8, 128, 1, t);
            }
            window = 4095;
            fwd(8192, 8192, 8, 8, 128, FLASHATTN_F32, 1, t, 1);
            window = -1;
        }
        if (!strcmp(only, "all") || !strcmp(only, "dec")) {
            dec(8192, 1, 32, 8, 128, t, FLASHATTN_F16);
            dec(32768, 1, 32, 8, 128, t, FLASHATTN_F16);
            dec(8192, 8, 32, 8, 128, t, FLASHATTN_F16);
            dec(1024, 1, 32, 8, 128, t, FLASHATTN_INT8);
            dec(32768, 1, 32, 8, 128, t, FLASHATTN_INT8);
        }
    }
    return 0;
}
