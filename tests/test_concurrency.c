/*
 * Several threads calling the library at once through the public API,
 * from the first call of the process on, so that the one-time set-up (the
 * kernel table, the CPU's caches, the tuning file) is raced as well as the
 * calls: forwards (with and without the LSE, on the library's workspace and
 * on the caller's), a deterministic backward, decodes (each thread
 * appending to its own copy of a cache, all reading one shared cache), a
 * merge, and a call that fails (flashattn_last_error is the thread's own).
 * Every result must be bit-identical to the same call made alone
 * afterwards. Then the same calls from inside an OpenMP parallel region
 * of the caller's: a call on one thread runs its loops without a region
 * of its own (core/threads.h), which must not share them out among the
 * caller's team. `make test-tsan` runs this under ThreadSanitizer.
 */
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { THREADS = 4, ROUNDS = 3, SQ = 37, SK = 75, HQ = 4, HKV = 2, D = 24, B = 2, CAP = 48 };

static tt_tensor q, k, v, dout, kc, vc, q1, knew, vnew;
static const int64_t lens[B] = {20, 33};
static pthread_barrier_t start;

/* One thread's outputs (the cache it appends to included). */
typedef struct {
    tt_tensor o, o2, bo, dq, dk, dv, dec, app, kc, vc, merged, part[2];
    float lse[B * HQ * SQ], blse[B * HQ * SQ], dlse[B * HQ], plse[2][B * HQ * SQ], mlse[B * HQ * SQ];
    int wrong_message;
} outputs;

static void alloc_outputs(outputs *r) {
    r->o = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    r->o2 = tt_alloc(FLASHATTN_BF16, B, SQ, HQ, D, 0, 0);
    r->bo = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    r->dq = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    r->dk = tt_alloc(FLASHATTN_F32, B, SK, HKV, D, 1, 0);
    r->dv = tt_alloc(FLASHATTN_F32, B, SK, HKV, D, 1, 0);
    r->dec = tt_alloc(FLASHATTN_F32, B, 1, HQ, D, 1, 0);
    r->app = tt_alloc(FLASHATTN_F32, B, 1, HQ, D, 1, 0);
    r->kc = tt_alloc(FLASHATTN_F16, B, CAP, HKV, D, 1, 0);
    r->vc = tt_alloc(FLASHATTN_F16, B, CAP, HKV, D, 1, 0);
    r->merged = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    for (int i = 0; i < 2; i++) r->part[i] = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    memset(r->lse, 0, sizeof r->lse), memset(r->blse, 0, sizeof r->blse), memset(r->dlse, 0, sizeof r->dlse);
    memset(r->plse, 0, sizeof r->plse), memset(r->mlse, 0, sizeof r->mlse);
    r->wrong_message = 0;
}

static void free_outputs(outputs *r) {
    tt_tensor *t[] = {&r->o, &r->o2, &r->bo, &r->dq, &r->dk, &r->dv, &r->dec, &r->app, &r->kc, &r->vc, &r->merged,
                      &r->part[0], &r->part[1]};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) tt_free(t[i]);
}

static int fail(const char *what, flashattn_status s) {
    fprintf(stderr, "FAIL: %s: status %d (%s)\n", what, (int)s, flashattn_last_error());
    return 1;
}

/* Every call, once; returns the number that failed. */
static int calls(outputs *r, int threads) {
    int bad = 0;
    flashattn_status s;
    flashattn_params p = flashattn_params_default();
    p.causal = 1;
    p.num_threads = threads;
    if ((s = flashattn_fwd(&q.t, &k.t, &v.t, &r->o.t, r->lse, &p, NULL, 0))) bad += fail("forward", s);
    /* no LSE, bf16 out, the caller's workspace, a window */
    flashattn_params w = p;
    w.causal = 0, w.window_left = 9, w.window_right = 4;
    size_t bytes = 0;
    if ((s = flashattn_fwd_workspace_size(&q.t, &k.t, &v.t, &r->o2.t, NULL, &w, &bytes))) bad += fail("workspace", s);
    void *ws = malloc(bytes ? bytes : 1);
    if ((s = flashattn_fwd(&q.t, &k.t, &v.t, &r->o2.t, NULL, &w, ws, bytes))) bad += fail("forward, own workspace", s);
    free(ws);
    /* the backward of the first forward, deterministic: bit-identical dq */
    flashattn_params d = p;
    d.deterministic = 1;
    memcpy(r->bo.mem, r->o.mem, r->o.bytes);
    memcpy(r->blse, r->lse, sizeof r->lse);
    if ((s = flashattn_bwd(&q.t, &k.t, &v.t, &r->bo.t, &dout.t, r->blse, &r->dq.t, &r->dk.t, &r->dv.t, &d, NULL, 0)))
        bad += fail("backward", s);
    /* decode: against the shared cache (read only), then appending to this thread's copy */
    flashattn_kv_cache c;
    flashattn_kv_cache_init(&c);
    c.k = kc.t, c.v = vc.t;
    c.seqlens_i64 = lens;
    flashattn_params dp = flashattn_params_default();
    dp.num_splits = 3;
    dp.num_threads = threads;
    if ((s = flashattn_decode(&q1.t, &c, NULL, NULL, &r->dec.t, r->dlse, &dp, NULL, 0))) bad += fail("decode", s);
    memcpy(r->kc.mem, kc.mem, kc.bytes), memcpy(r->vc.mem, vc.mem, vc.bytes);
    c.k = r->kc.t, c.v = r->vc.t;
    if ((s = flashattn_decode(&q1.t, &c, &knew.t, &vnew.t, &r->app.t, NULL, &dp, NULL, 0))) bad += fail("append", s);
    /* two halves of the keys, merged */
    for (int i = 0; i < 2; i++) {
        flashattn_tensor kh = k.t, vh = v.t;
        kh.seqlen = vh.seqlen = i == 0 ? SK / 2 : SK - SK / 2;
        kh.data = (float *)k.mem + (i ? SK / 2 : 0) * k.t.stride_seq;
        vh.data = (float *)v.mem + (i ? SK / 2 : 0) * v.t.stride_seq;
        if ((s = flashattn_fwd(&q.t, &kh, &vh, &r->part[i].t, r->plse[i], NULL, NULL, 0))) bad += fail("part", s);
    }
    const flashattn_tensor parts[2] = {r->part[0].t, r->part[1].t};
    const float *pl[2] = {r->plse[0], r->plse[1]};
    if ((s = flashattn_merge(2, parts, pl, &r->merged.t, r->mlse, &p))) bad += fail("merge", s);
    /* a failing call: its message, not another thread's */
    flashattn_tensor odd = r->o.t;
    odd.head_dim = D + 1;
    if (flashattn_fwd(&q.t, &k.t, &v.t, &odd, NULL, &p, NULL, 0) == FLASHATTN_OK ||
        !strstr(flashattn_last_error(), "head_dim"))
        r->wrong_message = 1;
    return bad;
}

static outputs results[THREADS];
static int failures[THREADS];

static void *worker(void *arg) {
    outputs *r = arg;
    pthread_barrier_wait(&start);
    for (int round = 0; round < ROUNDS; round++) failures[r - results] += calls(r, 1 + (int)(r - results) % 2);
    return NULL;
}

static int same(const tt_tensor *a, const tt_tensor *b) { return memcmp(a->mem, b->mem, a->bytes) == 0; }

/* Every result of r against the call made alone. */
static void check_against(const outputs *r, const outputs *alone, int fails, const char *who, int t) {
    TT_CHECK(fails == 0 && !r->wrong_message, "%s %d: %d calls failed, message %s", who, t, fails,
             r->wrong_message ? "another thread's" : "its own");
    TT_CHECK(same(&r->o, &alone->o) && !memcmp(r->lse, alone->lse, sizeof r->lse), "%s %d: forward differs", who, t);
    TT_CHECK(same(&r->o2, &alone->o2), "%s %d: forward (own workspace, window) differs", who, t);
    TT_CHECK(same(&r->dq, &alone->dq) && same(&r->dk, &alone->dk) && same(&r->dv, &alone->dv),
             "%s %d: backward differs", who, t);
    TT_CHECK(same(&r->dec, &alone->dec) && !memcmp(r->dlse, alone->dlse, sizeof r->dlse), "%s %d: decode differs",
             who, t);
    TT_CHECK(same(&r->app, &alone->app) && same(&r->kc, &alone->kc) && same(&r->vc, &alone->vc),
             "%s %d: appending decode differs", who, t);
    TT_CHECK(same(&r->merged, &alone->merged) && !memcmp(r->mlse, alone->mlse, sizeof r->mlse),
             "%s %d: merge differs", who, t);
}

int main(void) {
    uint64_t rng = 2024;
    q = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    k = tt_alloc(FLASHATTN_F32, B, SK, HKV, D, 1, 0);
    v = tt_alloc(FLASHATTN_F32, B, SK, HKV, D, 1, 0);
    dout = tt_alloc(FLASHATTN_F32, B, SQ, HQ, D, 1, 0);
    kc = tt_alloc(FLASHATTN_F16, B, CAP, HKV, D, 1, 0);
    vc = tt_alloc(FLASHATTN_F16, B, CAP, HKV, D, 1, 0);
    q1 = tt_alloc(FLASHATTN_F32, B, 1, HQ, D, 1, 0);
    knew = tt_alloc(FLASHATTN_F32, B, 1, HKV, D, 1, 0);
    vnew = tt_alloc(FLASHATTN_F32, B, 1, HKV, D, 1, 0);
    tt_tensor *in[] = {&q, &k, &v, &dout, &kc, &vc, &q1, &knew, &vnew};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) tt_fill_normal(in[i], &rng, 1.0);
    /* no library call before the threads start: they race its set-up */
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) alloc_outputs(&results[t]);
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, &results[t]);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);
    outputs alone;
    alloc_outputs(&alone);
    TT_CHECK(calls(&alone, 1) == 0, "the calls fail on their own");
    for (int t = 0; t < THREADS; t++) check_against(&results[t], &alone, failures[t], "thread", t);
#ifdef _OPENMP
    /* the caller's own team, each member calling on 1 or 2 threads */
    for (int t = 0; t < THREADS; t++) free_outputs(&results[t]), alloc_outputs(&results[t]), failures[t] = 0;
#pragma omp parallel num_threads(THREADS)
    {
        const int t = omp_get_thread_num();
        failures[t] += calls(&results[t], 1 + t % 2);
    }
    for (int t = 0; t < THREADS; t++) check_against(&results[t], &alone, failures[t], "OpenMP thread", t);
#endif
    for (int t = 0; t < THREADS; t++) free_outputs(&results[t]);
    free_outputs(&alone);
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) tt_free(in[i]);
    return tt_finish("test_concurrency");
}
