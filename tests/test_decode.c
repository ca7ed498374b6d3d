/*
 * Decode against the FP64 reference, on every ISA path: contiguous caches
 * (both layouts) and paged ones (page sizes 1, 7, 16, 64, pages shuffled in
 * the pool, unused block-table entries -1), ragged lengths including 0,
 * appends that cross page boundaries (the cache is compared byte for byte
 * with what it must hold afterwards: the old rows, the new rows rounded to
 * the cache dtype, and untouched sentinel bytes everywhere else), GQA and
 * MQA, seq_q > 1 with causal and window masks, every dtype mix.
 * The wide path (many rows per kv-head: K and V widened piece by piece for
 * the GEMM kernel) on every ISA: pages that cut pieces, head_dim not a
 * multiple of 16, masks, splits, user block_m; the plan is checked to take
 * it. Then: every split count 1..8 agrees within f32 rounding, a fixed split
 * count is bit-identical across thread counts (narrow and wide paths), the workspace does not
 * depend on the seqlens values, and bad input changes nothing.
 *
 * Pass rules are test_forward's: all-f32 inputs, max abs error <= 1e-5;
 * otherwise at most twice the error of plain f32 attention whose output is
 * rounded to o's dtype (and <= 1e-5 when o is f32). LSE within 1e-5 (f32
 * inputs) / 1e-4, -inf exactly where the reference has -inf.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/decode.h"
#include "api/validate.h"
#include "core/dtype.h"
#include "dispatch/isa.h"
#include "plan/tiles_decode.h"
#include "reference/attn_f64.h"
#include "reference/attn_std_f32.h"
#include "testutil.h"

#define MAXB 6

typedef struct {
    int64_t batch, seq_q, hq, hkv, d, seq_new;
    int64_t page_size; /* 0: contiguous cache */
    int64_t spare;     /* capacity beyond the longest sequence */
    int64_t lens[MAXB]; /* cached rows before the append */
    int causal, align;
    int64_t wl, wr;
    flashattn_dtype qdt, cdt, odt, ndt;
    int bhsd; /* contiguous cache as [b, h, s, d] */
    int num_splits, block_n, block_m, threads;
    int null_new; /* pass k_new = v_new = NULL (seq_new must be 0) */
} dcase;

typedef struct {
    tt_tensor q, knew, vnew, kc, vc, klog, vlog;
    int32_t *table;
    int64_t max_pages, capacity;
    int64_t seqlens[MAXB];
    unsigned char *k0, *v0, *kexp, *vexp; /* cache bytes before / expected after */
    flashattn_kv_cache cache;
} fixture;

static size_t esize(flashattn_dtype dt) { return flashattn_dtype_size(dt); }

static const char *dtn(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

static void describe(const dcase *c, char *buf, size_t n) {
    int k = snprintf(buf, n,
                     "b=%lld sq=%lld hq=%lld hkv=%lld d=%lld new=%lld page=%lld causal=%d "
                     "align=%d win=(%lld,%lld) q=%s cache=%s o=%s new=%s bhsd=%d splits=%d bn=%d bm=%d lens=",
                     (long long)c->batch, (long long)c->seq_q, (long long)c->hq,
                     (long long)c->hkv, (long long)c->d, (long long)c->seq_new,
                     (long long)c->page_size, c->causal, c->align, (long long)c->wl,
                     (long long)c->wr, dtn(c->qdt), dtn(c->cdt), dtn(c->odt), dtn(c->ndt),
                     c->bhsd, c->num_splits, c->block_n, c->block_m);
    for (int64_t b = 0; b < c->batch && k < (int)n; b++)
        k += snprintf(buf + k, n - (size_t)k, "%lld,", (long long)c->lens[b]);
}

static void put(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c, double v) {
    int64_t off = b * t->stride_batch + s * t->stride_seq + h * t->stride_head + c;
    if (t->dtype == FLASHATTN_F32) ((float *)t->data)[off] = (float)v;
    if (t->dtype == FLASHATTN_F16) ((uint16_t *)t->data)[off] = fa_f32_to_f16((float)v);
    if (t->dtype == FLASHATTN_BF16) ((uint16_t *)t->data)[off] = fa_f32_to_bf16((float)v);
}

/* Byte offset of logical row j of sequence b, kv-head h, in the cache. */
static size_t cache_off(const fixture *f, const dcase *c, const tt_tensor *t, int64_t b,
                        int64_t j, int64_t h) {
    int64_t page = b, slot = j;
    if (c->page_size) {
        page = f->table[b * f->max_pages + j / c->page_size];
        slot = j % c->page_size;
    }
    return (size_t)(page * t->t.stride_batch + slot * t->t.stride_seq + h * t->t.stride_head) *
           esize(t->t.dtype);
}

static const void *log_row(const tt_tensor *t, int64_t b, int64_t j, int64_t h) {
    return (const char *)t->mem +
           (size_t)(b * t->t.stride_batch + j * t->t.stride_seq + h * t->t.stride_head) *
               esize(t->t.dtype);
}

/* Built in place: the cache descriptor points into the fixture. */
static void build(fixture *fp, const dcase *c, uint64_t seed) {
    fixture f;
    memset(&f, 0, sizeof f);
    uint64_t rng = seed;
    int64_t maxl = 1;
    for (int64_t b = 0; b < c->batch; b++)
        if (c->lens[b] + c->seq_new > maxl) maxl = c->lens[b] + c->seq_new;
    f.q = tt_alloc(c->qdt, c->batch, c->seq_q, c->hq, c->d, 1, 0);
    tt_fill_normal(&f.q, &rng, 1.0);
    /* The logical sequences: cached rows, then the new rows rounded to the
     * cache dtype (what the append must store). */
    f.klog = tt_alloc(c->cdt, c->batch, maxl, c->hkv, c->d, 1, 0);
    f.vlog = tt_alloc(c->cdt, c->batch, maxl, c->hkv, c->d, 1, 0);
    tt_fill_normal(&f.klog, &rng, 1.0);
    tt_fill_normal(&f.vlog, &rng, 1.0);
    f.knew = tt_alloc(c->ndt, c->batch, c->seq_new, c->hkv, c->d, 1, 0);
    f.vnew = tt_alloc(c->ndt, c->batch, c->seq_new, c->hkv, c->d, 1, 0);
    tt_fill_normal(&f.knew, &rng, 1.0);
    tt_fill_normal(&f.vnew, &rng, 1.0);
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t j = 0; j < c->seq_new; j++)
            for (int64_t h = 0; h < c->hkv; h++)
                for (int64_t e = 0; e < c->d; e++) {
                    put(&f.klog.t, b, c->lens[b] + j, h, e, fa_tensor_get(&f.knew.t, b, j, h, e));
                    put(&f.vlog.t, b, c->lens[b] + j, h, e, fa_tensor_get(&f.vnew.t, b, j, h, e));
                }

    flashattn_kv_cache_init(&f.cache);
    if (c->page_size) {
        f.max_pages = (maxl + c->spare + c->page_size - 1) / c->page_size;
        f.capacity = f.max_pages * c->page_size;
        int64_t used = 0;
        for (int64_t b = 0; b < c->batch; b++)
            used += (c->lens[b] + c->seq_new + c->page_size - 1) / c->page_size;
        const int64_t pool = used + 3;
        int64_t *perm = malloc((size_t)pool * sizeof *perm);
        for (int64_t i = 0; i < pool; i++) perm[i] = i;
        for (int64_t i = pool - 1; i > 0; i--) {
            int64_t r = (int64_t)(tt_rand_u64(&rng) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[r], perm[r] = t;
        }
        f.table = malloc((size_t)(c->batch * f.max_pages + 1) * sizeof(int32_t));
        int64_t next = 0;
        for (int64_t b = 0; b < c->batch; b++) {
            const int64_t need = (c->lens[b] + c->seq_new + c->page_size - 1) / c->page_size;
            for (int64_t i = 0; i < f.max_pages; i++)
                f.table[b * f.max_pages + i] = i < need ? (int32_t)perm[next++] : -1;
        }
        free(perm);
        f.kc = tt_alloc(c->cdt, pool, c->page_size, c->hkv, c->d, 1, 0);
        f.vc = tt_alloc(c->cdt, pool, c->page_size, c->hkv, c->d, 1, 0);
        f.cache.block_table = f.table;
        f.cache.max_pages_per_seq = f.max_pages;
    } else {
        f.capacity = maxl + c->spare;
        f.kc = tt_alloc(c->cdt, c->batch, f.capacity, c->hkv, c->d, !c->bhsd, c->bhsd ? 0 : 2);
        f.vc = tt_alloc(c->cdt, c->batch, f.capacity, c->hkv, c->d, !c->bhsd, 0);
    }
    f.cache.k = f.kc.t;
    f.cache.v = f.vc.t;
    for (int64_t b = 0; b < c->batch; b++) f.seqlens[b] = c->lens[b];
    f.cache.seqlens_i64 = f.seqlens;

    /* The old rows go into the cache; the expected cache after the call is
     * that plus the new rows, and sentinel bytes everywhere else. */
    const size_t rowb = (size_t)c->d * esize(c->cdt);
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t j = 0; j < c->lens[b]; j++)
            for (int64_t h = 0; h < c->hkv; h++) {
                memcpy((char *)f.kc.mem + cache_off(&f, c, &f.kc, b, j, h), log_row(&f.klog, b, j, h), rowb);
                memcpy((char *)f.vc.mem + cache_off(&f, c, &f.vc, b, j, h), log_row(&f.vlog, b, j, h), rowb);
            }
    f.k0 = malloc(f.kc.bytes + 1), f.v0 = malloc(f.vc.bytes + 1);
    f.kexp = malloc(f.kc.bytes + 1), f.vexp = malloc(f.vc.bytes + 1);
    memcpy(f.k0, f.kc.mem, f.kc.bytes);
    memcpy(f.v0, f.vc.mem, f.vc.bytes);
    memcpy(f.kexp, f.kc.mem, f.kc.bytes);
    memcpy(f.vexp, f.vc.mem, f.vc.bytes);
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t j = c->lens[b]; j < c->lens[b] + c->seq_new; j++)
            for (int64_t h = 0; h < c->hkv; h++) {
                memcpy(f.kexp + cache_off(&f, c, &f.kc, b, j, h), log_row(&f.klog, b, j, h), rowb);
                memcpy(f.vexp + cache_off(&f, c, &f.vc, b, j, h), log_row(&f.vlog, b, j, h), rowb);
            }
    *fp = f;
    fp->cache.seqlens_i64 = fp->seqlens;
}

static void release(fixture *f) {
    tt_free(&f->q), tt_free(&f->knew), tt_free(&f->vnew), tt_free(&f->kc), tt_free(&f->vc);
    tt_free(&f->klog), tt_free(&f->vlog);
    free(f->table), free(f->k0), free(f->v0), free(f->kexp), free(f->vexp);
}

static void reset_cache(fixture *f) {
    memcpy(f->kc.mem, f->k0, f->kc.bytes);
    memcpy(f->vc.mem, f->v0, f->vc.bytes);
}

static flashattn_params params_of(const dcase *c) {
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal;
    p.align = c->align;
    p.window_left = c->wl;
    p.window_right = c->wr;
    p.num_splits = c->num_splits;
    p.block_n = c->block_n;
    p.block_m = c->block_m;
    p.num_threads = c->threads;
    return p;
}

/* Rows [0, len) of sequence b of t, widened exactly to a f32 [1, len, h, d]
 * tensor: the references take one dtype for q, k and v. */
static tt_tensor widen(const tt_tensor *t, int64_t b, int64_t len) {
    tt_tensor w = tt_alloc(FLASHATTN_F32, 1, len, t->t.heads, t->t.head_dim, 1, 0);
    for (int64_t j = 0; j < len; j++)
        for (int64_t h = 0; h < t->t.heads; h++)
            for (int64_t e = 0; e < t->t.head_dim; e++)
                put(&w.t, 0, j, h, e, fa_tensor_get(&t->t, b, j, h, e));
    return w;
}

/* Reference O, LSE and the f32 yardstick, one sequence at a time over its
 * logical rows [0, lens + seq_new). */
static void reference(const dcase *c, const fixture *f, double *ref, double *ref_lse,
                      double *std) {
    flashattn_params p = params_of(c);
    for (int64_t b = 0; b < c->batch; b++) {
        const int64_t len = c->lens[b] + c->seq_new;
        tt_tensor q = widen(&f->q, b, c->seq_q), k = widen(&f->klog, b, len);
        tt_tensor v = widen(&f->vlog, b, len);
        const size_t orows = (size_t)(b * c->seq_q * c->hq * c->d);
        TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, ref + orows,
                                      ref_lse + b * c->hq * c->seq_q) == FLASHATTN_OK,
                 "reference failed");
        if (std) fa_reference_std_f32(&q.t, &k.t, &v.t, &p, c->odt, std + orows);
        tt_free(&q), tt_free(&k), tt_free(&v);
    }
}

/* Run decode on one path; returns the status. o, lse receive the results. */
static flashattn_status run(const dcase *c, fixture *f, const fa_kernels *kern, tt_tensor *o,
                            float *lse) {
    flashattn_params p = params_of(c);
    const flashattn_tensor *kn = c->null_new ? NULL : &f->knew.t;
    const flashattn_tensor *vn = c->null_new ? NULL : &f->vnew.t;
    size_t ws = 0;
    flashattn_status s = fa_decode_workspace_size_ex(&f->q.t, &f->cache, kn, vn, &o->t, lse, &p,
                                                     kern, &ws);
    if (s) return s;
    void *w = malloc(ws ? ws : 1);
    s = fa_decode_ex(&f->q.t, &f->cache, kn, vn, &o->t, lse, &p, w, ws, kern);
    free(w);
    return s;
}

static void run_case(const dcase *c, uint64_t seed) {
    fixture f;
    build(&f, c, seed);
    char desc[512];
    describe(c, desc, sizeof desc);
    const size_t on = (size_t)(c->batch * c->seq_q * c->hq * c->d);
    const size_t ln = (size_t)(c->batch * c->hq * c->seq_q);
    double *ref = malloc((on + 1) * sizeof(double)), *std = malloc((on + 1) * sizeof(double));
    double *ref_lse = malloc((ln + 1) * sizeof(double));
    int all_f32 = c->qdt == FLASHATTN_F32 && c->cdt == FLASHATTN_F32 && c->odt == FLASHATTN_F32;
    reference(c, &f, ref, ref_lse, all_f32 ? NULL : std);
    double bound = 1e-5;
    if (!all_f32) {
        double e = 0.0;
        for (size_t i = 0; i < on; i++) e = fmax(e, fabs(std[i] - ref[i]));
        bound = c->odt == FLASHATTN_F32 ? fmax(1e-5, 2.0 * e) : 2.0 * e;
    }
    const double lbound = c->qdt == FLASHATTN_F32 && c->cdt == FLASHATTN_F32 ? 1e-5 : 1e-4;

    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    for (int t = 0; t < n; t++) {
        reset_cache(&f);
        tt_tensor o = tt_alloc(c->odt, c->batch, c->seq_q, c->hq, c->d, t % 2 == 0, 0);
        float *lse = malloc((ln + 1) * sizeof(float));
        flashattn_status s = run(c, &f, isas[t], &o, lse);
        TT_CHECK(s == FLASHATTN_OK, "[%s] status %d (%s): %s", isas[t]->isa, s,
                 flashattn_last_error(), desc);
        const double err = tt_max_abs_err(&o, ref);
        TT_CHECK(err <= bound, "[%s] max abs err %.3g > %.3g: %s", isas[t]->isa, err, bound, desc);
        double lerr = 0.0;
        int inf_ok = 1;
        for (size_t i = 0; i < ln; i++) {
            if (isinf(ref_lse[i])) {
                inf_ok &= isinf(lse[i]) && lse[i] < 0;
            } else {
                double e = fabs(lse[i] - ref_lse[i]);
                if (!(e <= lerr)) lerr = e;
            }
        }
        TT_CHECK(lerr <= lbound && inf_ok, "[%s] lse err %.3g, -inf rows %s: %s", isas[t]->isa,
                 lerr, inf_ok ? "ok" : "WRONG", desc);
        TT_CHECK(memcmp(f.kc.mem, f.kexp, f.kc.bytes) == 0 &&
                     memcmp(f.vc.mem, f.vexp, f.vc.bytes) == 0,
                 "[%s] cache after the append differs from the expected bytes: %s", isas[t]->isa,
                 desc);
        if (getenv("FA_TEST_VERBOSE"))
            printf("[%s] err %.3g (bound %.3g) lse err %.3g  %s\n", isas[t]->isa, err, bound, lerr,
                   desc);
        free(lse);
        tt_free(&o);
    }
    free(ref), free(std), free(ref_lse);
    release(&f);
}

static dcase base_case(void) {
    dcase c;
    memset(&c, 0, sizeof c);
    c.batch = 1, c.seq_q = 1, c.hq = 4, c.hkv = 1, c.d = 64;
    c.wl = c.wr = -1;
    c.qdt = c.cdt = c.odt = c.ndt = FLASHATTN_F32;
    c.spare = 5;
    return c;
}

static void sweep(void) {
    static const int64_t pages[] = {0, 1, 7, 16, 64, 0};
    static const int64_t heads[][2] = {{8, 2}, {8, 1}, {2, 2}, {6, 3}, {4, 1}};
    static const int64_t dims[] = {64, 128, 80, 1, 256, 40};
    static const int64_t seqq[] = {1, 1, 3, 1, 7, 2};
    static const int64_t news[] = {0, 1, 5, 0, 9, 1};
    static const int64_t lens[][4] = {{0, 1, 37, 130}, {5, 0, 64, 63},  {200, 7, 15, 1},
                                      {17, 300, 0, 9}, {3, 3, 3, 3},    {129, 0, 0, 65}};
    /* causal, align, window_left, window_right */
    static const int64_t masks[][4] = {{0, 0, -1, -1}, {1, 0, -1, -1}, {0, 0, 16, 0},
                                       {1, 1, -1, -1}, {0, 0, 8, 2},   {1, 0, 30, -1}};
    uint64_t rng = 99;
    for (int i = 0; i < 48; i++) {
        dcase c = base_case();
        c.page_size = pages[i % 6];
        c.bhsd = c.page_size == 0 && i % 12 == 5;
        c.hq = heads[i % 5][0], c.hkv = heads[i % 5][1];
        c.d = dims[(i / 6 + i) % 6];
        c.seq_q = seqq[(i / 2) % 6];
        c.seq_new = news[(i / 3) % 6];
        c.null_new = c.seq_new == 0 && i % 2;
        c.batch = 1 + (int64_t)(tt_rand_u64(&rng) % 4);
        for (int b = 0; b < 4; b++) c.lens[b] = lens[(i + b) % 6][(i / 6 + b) % 4];
        const int64_t *mk = masks[(i + i / 5) % 6];
        c.causal = (int)mk[0], c.align = (int)mk[1], c.wl = mk[2], c.wr = mk[3];
        c.qdt = (flashattn_dtype)(i % 3);
        c.cdt = (flashattn_dtype)(i / 3 % 3);
        c.odt = (flashattn_dtype)((i + 1) % 3);
        c.ndt = (flashattn_dtype)(i / 2 % 3);
        c.num_splits = (int)(i % 4 == 3 ? 3 : 0);
        /* Any step size works; long steps leave room for fewer kv-heads per
         * work item (300 keys: one to three), short row tiles give several
         * query tiles per sequence. */
        const int bsel = i / 2 % 5; /* not i % 5: that picks the heads */
        c.block_n = bsel == 4 ? 7 : bsel == 2 ? 16 : bsel == 1 ? 300 : 0;
        c.block_m = (int)(i % 7 == 2 ? c.hq / c.hkv : i % 7 == 5 ? 2 * c.hq / c.hkv + 1 : 0);
        if (tt_quick() && i % 2) continue;
        run_case(&c, 500 + (uint64_t)i);
    }
}

/* The plan a case gets on a kernel table (before any append), aiming at
 * `units` work units whatever the threads (the forward's route) or, with
 * 0, splitting by the threads (flashattn_decode). */
static fa_decode_plan plan_units_of(const dcase *c, fixture *f, const fa_kernels *kern, int units) {
    fa_decode_plan plan;
    memset(&plan, 0, sizeof plan);
    flashattn_params p;
    fa_decode_problem dp;
    tt_tensor o = tt_alloc(c->odt, c->batch, c->seq_q, c->hq, c->d, 1, 0);
    const flashattn_tensor *kn = c->null_new ? NULL : &f->knew.t;
    const flashattn_tensor *vn = c->null_new ? NULL : &f->vnew.t;
    const flashattn_params user = params_of(c);
    TT_CHECK(fa_read_params(&user, &p) == FLASHATTN_OK &&
                 fa_validate_decode(&f->q.t, &f->cache, kn, vn, &o.t, NULL, &p, &dp) ==
                     FLASHATTN_OK &&
                 fa_plan_decode(&dp, &p, kern, units, 0, &plan) == FLASHATTN_OK,
             "[%s] plan: %s", kern->isa, flashattn_last_error());
    tt_free(&o);
    return plan;
}

static fa_decode_plan plan_of(const dcase *c, fixture *f, const fa_kernels *kern) {
    return plan_units_of(c, f, kern, 0);
}

/* Many rows per kv-head (speculative decoding, chunked prefill into a
 * cache): the wide path, checked to be taken on every ISA. Page sizes 1 and
 * 7 and odd step sizes cut the pieces anywhere; head_dim 80, 40 and 1 leave
 * padding in the widened V rows and partial 16-column groups nowhere. */
static void wide(void) {
    static const int64_t pages[] = {0, 7, 16, 1, 64, 0, 5, 0};
    static const int64_t heads[][2] = {{8, 2}, {8, 1}, {4, 4}, {12, 3}, {16, 2}};
    static const int64_t dims[] = {128, 80, 64, 40, 1, 256, 96};
    static const int64_t seqq[] = {16, 9, 33, 20, 64, 5};
    static const int64_t lens[][4] = {{300, 1, 37, 130}, {65, 0, 64, 200}, {129, 7, 2, 33}};
    static const int64_t masks[][4] = {{0, 0, -1, -1}, {1, 0, -1, -1}, {0, 0, 16, 0},
                                       {1, 1, -1, -1}, {0, 0, 8, 2}};
    for (int i = 0; i < 16; i++) {
        dcase c = base_case();
        c.page_size = pages[i % 8];
        c.hq = heads[i % 5][0], c.hkv = heads[i % 5][1];
        const int64_t g = c.hq / c.hkv;
        c.d = dims[i % 7];
        c.seq_q = seqq[i % 6];
        while (g * c.seq_q < 24) c.seq_q *= 2; /* enough rows per kv-head (24) */
        c.seq_new = i % 3 == 1 ? 3 : 0;
        c.null_new = c.seq_new == 0 && i % 2;
        c.batch = 1 + i % 3;
        for (int b = 0; b < 4; b++) c.lens[b] = lens[(i + b) % 3][(i / 3 + b) % 4];
        const int64_t *mk = masks[i % 5];
        c.causal = (int)mk[0], c.align = (int)mk[1], c.wl = mk[2], c.wr = mk[3];
        c.qdt = (flashattn_dtype)(i % 3);
        c.cdt = (flashattn_dtype)((i / 2 + 1) % 3);
        c.odt = (flashattn_dtype)((i + 2) % 3);
        c.ndt = (flashattn_dtype)(i / 3 % 3);
        c.num_splits = i % 4 == 3 ? 3 : 0;
        c.block_n = i % 5 == 2 ? 7 : i % 5 == 4 ? 300 : i % 5 == 1 ? 48 : 0;
        /* user block_m: whole query positions of at least 24 rows */
        c.block_m = i % 6 == 5 ? (int)(g * ((24 + g - 1) / g + 1)) : 0;
        if (tt_quick() && i % 2) continue;
        const fa_kernels *isas[4];
        const int n = tt_isas(isas, 4);
        fixture f;
        /* even query tiles can leave fewer rows than seq_q suggests: grow
         * seq_q until the plan takes the wide path (the rule is the
         * planner's; here it is only checked to be taken) */
        for (;;) {
            build(&f, &c, 900 + (uint64_t)i);
            if (plan_of(&c, &f, isas[0]).wide_piece || c.seq_q > 256) break;
            release(&f);
            c.seq_q += 8;
        }
        for (int t = 0; t < n; t++) {
            const fa_decode_plan plan = plan_of(&c, &f, isas[t]);
            TT_CHECK(plan.wide_piece == isas[t]->nr, "[%s] case %d: wide path not taken", isas[t]->isa,
                     i);
        }
        release(&f);
        run_case(&c, 900 + (uint64_t)i);
    }
}

/* A fixed split count is bit-identical on 1 and 2 threads on the wide path,
 * and its splits agree with one split within f32 rounding. */
static void wide_threads(void) {
    dcase c = base_case();
    c.batch = 2, c.hq = 8, c.hkv = 2, c.d = 96, c.seq_q = 24, c.page_size = 7, c.seq_new = 2;
    c.lens[0] = 700, c.lens[1] = 333;
    c.cdt = FLASHATTN_BF16, c.causal = 1;
    fixture f;
    build(&f, &c, 17);
    const size_t on = (size_t)(c.batch * c.seq_q * c.hq * c.d);
    const size_t ln = (size_t)(c.batch * c.hq * c.seq_q);
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    for (int t = 0; t < n; t++) {
        TT_CHECK(plan_of(&c, &f, isas[t]).wide_piece == isas[t]->nr, "[%s] wide path not taken",
                 isas[t]->isa);
        tt_tensor o1 = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
        tt_tensor oa = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
        tt_tensor ob = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
        float *l1 = malloc(ln * sizeof(float)), *la = malloc(ln * sizeof(float)),
              *lb = malloc(ln * sizeof(float));
        c.num_splits = 1, c.threads = 2;
        reset_cache(&f);
        run(&c, &f, isas[t], &o1, l1);
        c.num_splits = 3, c.threads = 1;
        reset_cache(&f);
        run(&c, &f, isas[t], &oa, la);
        c.threads = 2;
        reset_cache(&f);
        run(&c, &f, isas[t], &ob, lb);
        c.threads = 0, c.num_splits = 0;
        TT_CHECK(memcmp(oa.mem, ob.mem, oa.bytes) == 0 && memcmp(la, lb, ln * sizeof(float)) == 0,
                 "[%s] wide, splits=3: 1 and 2 threads differ", isas[t]->isa);
        double e = 0.0;
        for (size_t i = 0; i < on; i++)
            e = fmax(e, fabs((double)((float *)oa.mem)[i] - ((float *)o1.mem)[i]));
        TT_CHECK(e <= 1e-6, "[%s] wide, splits=3 vs 1: O diff %.3g", isas[t]->isa, e);
        free(l1), free(la), free(lb);
        tt_free(&o1), tt_free(&oa), tt_free(&ob);
    }
    release(&f);
}

/* Every split count gives the same answer within f32 rounding, and a given
 * split count gives the same bits on 1 and 2 threads. */
static void splits(void) {
    dcase c = base_case();
    c.batch = 2, c.hq = 8, c.hkv = 2, c.d = 128, c.page_size = 16, c.seq_new = 1;
    c.lens[0] = 2999, c.lens[1] = 1700;
    c.cdt = FLASHATTN_F16;
    run_case(&c, 7);
    fixture f;
    build(&f, &c, 7);
    const size_t on = (size_t)(c.batch * c.seq_q * c.hq * c.d), ln = (size_t)(c.batch * c.hq);
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    for (int t = 0; t < n; t++) {
        tt_tensor o1 = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
        float lse1[64];
        c.num_splits = 1;
        reset_cache(&f);
        TT_CHECK(run(&c, &f, isas[t], &o1, lse1) == FLASHATTN_OK, "[%s] splits=1", isas[t]->isa);
        double omax = 0.0;
        for (size_t i = 0; i < on; i++) omax = fmax(omax, fabs(((float *)o1.mem)[i]));
        for (int s = 2; s <= 8; s++) {
            tt_tensor os = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
            float lses[64];
            c.num_splits = s;
            reset_cache(&f);
            TT_CHECK(run(&c, &f, isas[t], &os, lses) == FLASHATTN_OK, "[%s] splits=%d",
                     isas[t]->isa, s);
            double e = 0.0, le = 0.0;
            for (size_t i = 0; i < on; i++)
                e = fmax(e, fabs((double)((float *)os.mem)[i] - ((float *)o1.mem)[i]));
            for (size_t i = 0; i < ln; i++) le = fmax(le, fabs((double)lses[i] - lse1[i]));
            /* Splits change the order of the f32 sums over ~3000 keys of
             * |V| ~ 1 and round O and LSE once more in the partials: allow
             * a few ulp at 1 (the reference bound is 1e-5) and at LSE ~ 8. */
            TT_CHECK(e <= 1e-6 && le <= 2e-6,
                     "[%s] splits=%d vs 1: O diff %.3g (|O| <= %.3g), LSE diff %.3g",
                     isas[t]->isa, s, e, omax, le);
            if (getenv("FA_TEST_VERBOSE"))
                printf("[%s] splits=%d O diff %.3g (|O|max %.3g) LSE diff %.3g\n", isas[t]->isa,
                       s, e, omax, le);
            tt_free(&os);
        }
        /* bit-identical across thread counts for a fixed split count */
        tt_tensor oa = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
        tt_tensor ob = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
        float la[64], lb[64];
        c.num_splits = 3;
        c.threads = 1;
        reset_cache(&f);
        run(&c, &f, isas[t], &oa, la);
        c.threads = 2;
        reset_cache(&f);
        run(&c, &f, isas[t], &ob, lb);
        c.threads = 0;
        TT_CHECK(memcmp(oa.mem, ob.mem, oa.bytes) == 0 && memcmp(la, lb, ln * sizeof(float)) == 0,
                 "[%s] splits=3: 1 and 2 threads differ", isas[t]->isa);
        tt_free(&oa), tt_free(&ob), tt_free(&o1);
    }
    release(&f);
}

/* A call with a few microseconds of work runs on fewer threads than asked
 * (waking a thread costs as much), in one work item of every kv-head when
 * alone; a long cache keeps the threads asked for. The results do not
 * depend on the threads (sweep, wide_threads, splits). */
static void small_work_threads(void) {
    /* capacity: the longest sequence plus c.spare; work 2 * hq * seq_q *
     * capacity * 2d = 4096 * capacity flops at hq 8, d 128, one query row */
    static const struct { int64_t len; int threads, want; } cases[] = {
        {1, 2, 1},   {1, 8, 1},   {59, 4, 1},   {123, 4, 2},
        {187, 4, 3}, {251, 4, 4}, {4091, 2, 2}, {0, 2, 1},
    };
    const fa_kernels *kern = fa_active_kernels();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dcase c = base_case();
        c.hq = 8, c.hkv = 8, c.d = 128, c.lens[0] = cases[i].len, c.threads = cases[i].threads;
        fixture f;
        build(&f, &c, 5);
        const fa_decode_plan plan = plan_of(&c, &f, kern), fwd = plan_units_of(&c, &f, kern, 16);
        TT_CHECK(plan.threads == cases[i].want && fwd.threads == cases[i].want,
                 "capacity %lld, %d threads asked: %d and %d threads planned, %d expected",
                 (long long)f.capacity, cases[i].threads, plan.threads, fwd.threads, cases[i].want);
        TT_CHECK(fwd.threads > 1 || fwd.heads_per_item == 8,
                 "capacity %lld alone: %d kv-heads a work item, 8 expected", (long long)f.capacity,
                 fwd.heads_per_item);
        release(&f);
    }
}

/* One workspace serves every step: its size ignores the seqlens values. */
static void workspace_stable(void) {
    dcase c = base_case();
    c.batch = 3, c.hq = 8, c.hkv = 2, c.page_size = 16, c.seq_new = 1, c.spare = 200;
    c.lens[0] = 10, c.lens[1] = 0, c.lens[2] = 100;
    fixture f;
    build(&f, &c, 3);
    tt_tensor o = tt_alloc(FLASHATTN_F32, c.batch, 1, c.hq, c.d, 1, 0);
    flashattn_params p = params_of(&c);
    size_t w1 = 0, w2 = 0;
    TT_CHECK(flashattn_decode_workspace_size(&f.q.t, &f.cache, &f.knew.t, &f.vnew.t, &o.t, NULL,
                                             &p, &w1) == FLASHATTN_OK,
             "workspace query: %s", flashattn_last_error());
    f.seqlens[0] = 5, f.seqlens[1] = 14, f.seqlens[2] = 0; /* within the pages given */
    TT_CHECK(flashattn_decode_workspace_size(&f.q.t, &f.cache, &f.knew.t, &f.vnew.t, &o.t, NULL,
                                             &p, &w2) == FLASHATTN_OK,
             "workspace query: %s", flashattn_last_error());
    TT_CHECK(w1 == w2 && w1 > 0, "workspace %zu vs %zu bytes for other lengths", w1, w2);
    tt_free(&o);
    release(&f);
}

/* The public entry (active ISA, library-allocated workspace), int32 lengths. */
static void public_api(void) {
    dcase c = base_case();
    c.batch = 2, c.hq = 4, c.hkv = 2, c.seq_q = 2, c.seq_new = 2, c.causal = 1;
    c.lens[0] = 40, c.lens[1] = 3;
    c.cdt = FLASHATTN_BF16;
    fixture f;
    build(&f, &c, 11);
    int32_t lens32[2] = {40, 3};
    f.cache.seqlens_i64 = NULL;
    f.cache.seqlens_i32 = lens32;
    const size_t on = (size_t)(c.batch * c.seq_q * c.hq * c.d), ln = (size_t)(c.batch * c.hq * 2);
    double *ref = malloc(on * sizeof(double)), *std = malloc(on * sizeof(double));
    double ref_lse[16];
    reference(&c, &f, ref, ref_lse, std);
    double e = 0.0;
    for (size_t i = 0; i < on; i++) e = fmax(e, fabs(std[i] - ref[i]));
    tt_tensor o = tt_alloc(FLASHATTN_F32, c.batch, c.seq_q, c.hq, c.d, 1, 0);
    float lse[16];
    flashattn_params p = params_of(&c);
    flashattn_status s =
        flashattn_decode(&f.q.t, &f.cache, &f.knew.t, &f.vnew.t, &o.t, lse, &p, NULL, 0);
    TT_CHECK(s == FLASHATTN_OK, "public decode: %s", flashattn_last_error());
    double err = tt_max_abs_err(&o, ref);
    TT_CHECK(err <= fmax(1e-5, 2 * e), "public decode [%s]: err %.3g", flashattn_isa(), err);
    TT_CHECK(memcmp(f.kc.mem, f.kexp, f.kc.bytes) == 0, "public decode: cache bytes");
    for (size_t i = 0; i < ln; i++)
        TT_CHECK(isinf(ref_lse[i]) ? isinf(lse[i]) : fabs(lse[i] - ref_lse[i]) <= 1e-4,
                 "public decode: lse[%zu]", i);
    free(ref), free(std);
    tt_free(&o);
    release(&f);
}

int main(void) {
    sweep();
    wide();
    if (!tt_quick()) wide_threads(); /* 700 keys on two thread counts */
    splits();
    workspace_stable();
    small_work_threads();
    public_api();
    return tt_finish("test_decode");
}
