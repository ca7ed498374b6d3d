/*
 * Quantised KV caches (int8, fp8 e4m3 and e5m2), on every ISA path.
 *
 * Conversions: every fp8 code widens and narrows back to itself (NaN to
 * the canonical code, e5m2's infinities to the largest finite value), and
 * narrowing is round to nearest even, saturating, against a search of
 * the whole code table in double at random values, subnormals, every
 * midpoint between neighbours and the floats on either side of it; int8
 * the same against rint.
 *
 * Decode: contiguous and paged caches (pages shuffled in the pool), GQA,
 * ragged lengths with 0, appends that cross pages, seq_q > 1 causal and
 * windowed, the narrow (GEMV-like) and wide (GEMM) paths, splits, per-token,
 * per-channel and per-head scales for K and V in every combination, K with
 * per-channel outliers. Each call against the FP64 reference over the
 * dequantised cache (element * scale) within the all-f32 rule (max abs
 * error 1e-5, LSE 1e-5); the appended rows and their per-token scales
 * bit for bit what core/quant.h's rule gives, every other byte of the
 * cache and of the scales untouched. A fixed split count gives the same
 * bits on 1 and 2 threads. A NaN scale on a key reaches only the rows that
 * see it. Bad scales (missing, wrong shape or dtype, on a float cache,
 * non-positive fixed values, unknown kind) and 8-bit dtypes anywhere but a
 * cache: a clear status, nothing written.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/decode.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "reference/attn_f64.h"
#include "testutil.h"

/* ---- conversions ------------------------------------------------------- */

static float code_value(flashattn_dtype dt, int c) {
    const uint8_t b[4] = {(uint8_t)c, 0, 0, 0}; /* fa_widen reads one element of dt */
    return fa_widen(b, dt, 0);
}

static uint8_t narrow(flashattn_dtype dt, float x) {
    return dt == FLASHATTN_INT8 ? (uint8_t)fa_f32_to_int8(x)
           : dt == FLASHATTN_FP8_E4M3 ? fa_f32_to_e4m3(x) : fa_f32_to_e5m2(x);
}

/* The nearest finite code to x by a search in double, ties to the even
 * code (its lowest bit clear: the mantissa's last bit), saturating. */
static uint8_t nearest(flashattn_dtype dt, float x) {
    if (x != x) return dt == FLASHATTN_INT8 ? 0 : (uint8_t)(signbit(x) ? 0x80 : 0) | (dt == FLASHATTN_FP8_E4M3 ? 0x7f : 0x7e);
    int best = -1;
    double bd = INFINITY;
    for (int c = 0; c < 256; c++) {
        const float v = code_value(dt, c);
        if (!isfinite(v) || (dt == FLASHATTN_INT8 && c == 0x80)) continue; /* -128: never written */
        if (dt != FLASHATTN_INT8 && v == 0.0f && signbit(v) != signbit(x)) continue; /* fp8 zeros keep x's sign */
        const double dist = fabs((double)v - (double)x);
        if (dist < bd || (dist == bd && !(c & 1) && dt != FLASHATTN_INT8) ||
            (dist == bd && dt == FLASHATTN_INT8 && !((int8_t)c & 1))) {
            bd = dist;
            best = c;
        }
    }
    return (uint8_t)best;
}

static void test_conversions(void) {
    static const flashattn_dtype fp8[2] = {FLASHATTN_FP8_E4M3, FLASHATTN_FP8_E5M2};
    for (int f = 0; f < 2; f++)
        for (int c = 0; c < 256; c++) {
            const flashattn_dtype dt = fp8[f];
            const float v = code_value(dt, c);
            const uint8_t back = narrow(dt, v), sign = (uint8_t)(c & 0x80);
            uint8_t want = (uint8_t)c;
            if (v != v) want = (uint8_t)(sign | (dt == FLASHATTN_FP8_E4M3 ? 0x7f : 0x7e));
            if (isinf(v)) want = (uint8_t)(sign | 0x7b);
            TT_CHECK(back == want, "%s code 0x%02x (%a) narrows to 0x%02x, want 0x%02x", fa_dtype_name(dt), c,
                     (double)v, back, want);
        }
    static const flashattn_dtype all[3] = {FLASHATTN_INT8, FLASHATTN_FP8_E4M3, FLASHATTN_FP8_E5M2};
    uint64_t rng = 4242;
    for (int f = 0; f < 3; f++) {
        const flashattn_dtype dt = all[f];
        const float top = fa_quant_max(dt);
        /* midpoints between neighbouring codes and the floats around them */
        for (int c = 0; c < 255; c++) {
            const float a = code_value(dt, c), b = code_value(dt, c + 1);
            if (!isfinite(a) || !isfinite(b) || (dt == FLASHATTN_INT8 && (c == 0x7f || c == 0x80))) continue;
            const float mid = (float)(((double)a + (double)b) / 2);
            const float xs[3] = {mid, nextafterf(mid, -INFINITY), nextafterf(mid, INFINITY)};
            for (int i = 0; i < 3; i++)
                TT_CHECK(narrow(dt, xs[i]) == nearest(dt, xs[i]), "%s: %a narrows to 0x%02x, nearest 0x%02x",
                         fa_dtype_name(dt), (double)xs[i], narrow(dt, xs[i]), nearest(dt, xs[i]));
        }
        /* random magnitudes from below the subnormals to past the top, and specials */
        for (int i = 0; i < 20000; i++) {
            const double u = (double)(tt_rand_u64(&rng) >> 11) / 9007199254740992.0;
            float x = (float)(top * 2.0 * pow(2.0, -30.0 * u));
            if (i & 1) x = -x;
            TT_CHECK(narrow(dt, x) == nearest(dt, x), "%s: %a narrows to 0x%02x, nearest 0x%02x",
                     fa_dtype_name(dt), (double)x, narrow(dt, x), nearest(dt, x));
        }
        const float sp[6] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 3.4e38f};
        for (int i = 0; i < 6; i++) {
            const uint8_t want = isinf(sp[i]) || sp[i] > top ? narrow(dt, sp[i] > 0 ? top : -top) : nearest(dt, sp[i]);
            TT_CHECK(narrow(dt, sp[i]) == want, "%s: special %a narrows to 0x%02x, want 0x%02x", fa_dtype_name(dt),
                     (double)sp[i], narrow(dt, sp[i]), want);
        }
    }
}

/* ---- decode ------------------------------------------------------------ */

#define MAXB 4

typedef struct {
    int64_t batch, seq_q, hq, hkv, d, seq_new, page; /* page 0: contiguous */
    int64_t lens[MAXB];
    int causal;
    int64_t wl;
    flashattn_dtype dt;
    flashattn_scale_kind kind[2]; /* of K, of V */
    int splits;
} qcase;

typedef struct {
    tt_tensor q, knew, vnew;
    flashattn_tensor kv[2], sc[2]; /* the cache's k, v and their scales */
    unsigned char *mem[2], *init[2], *want[2];
    float *smem[2], *sinit[2], *swant[2];
    size_t bytes[2], sbytes[2];
    int32_t *table;
    int64_t cap, max_pages, slots; /* slots: rows of a cache entry (page or sequence) */
    flashattn_kv_cache cache;
    int64_t seqlens[MAXB];
} qfix;

static int64_t entry_row(const qfix *f, const qcase *c, int64_t b, int64_t j, int64_t *entry) {
    if (!c->page) {
        *entry = b;
        return j;
    }
    *entry = f->table[b * f->max_pages + j / c->page];
    return j % c->page;
}

/* Row j of sequence b, kv-head h, of k (t = 0) or v in a cache image
 * `mem`, and its per-token scale in `smem`. */
static unsigned char *row_in(const qfix *f, const qcase *c, int t, unsigned char *mem, int64_t b, int64_t j,
                             int64_t h) {
    int64_t e, s = entry_row(f, c, b, j, &e);
    (void)t;
    return mem + (size_t)((e * f->slots + s) * c->hkv + h) * (size_t)c->d;
}

static float *scale_in(const qfix *f, const qcase *c, int t, float *smem, int64_t b, int64_t j, int64_t h,
                       int64_t *step) {
    *step = 0;
    if (c->kind[t] != FLASHATTN_SCALE_PER_TOKEN) {
        *step = c->kind[t] == FLASHATTN_SCALE_PER_CHANNEL;
        return smem + h * (*step ? c->d : 1);
    }
    int64_t e, s = entry_row(f, c, b, j, &e);
    return smem + (e * f->slots + s) * c->hkv + h;
}

/* A source value: K has outliers in channels 3 and 11 (x 8), as real K does. */
static float source(uint64_t *rng, int t, int64_t ch) {
    const float x = (float)tt_rand_normal(rng);
    return t == 0 && (ch % 16 == 3 || ch % 16 == 11) ? 8.0f * x : x;
}

/* Quantise row x into `row` as the library must: per token (its scale
 * written to *s) or with the fixed scales at s. */
static void quantise(const qcase *c, int t, unsigned char *row, const float *x, float *s, int64_t step) {
    if (c->kind[t] == FLASHATTN_SCALE_PER_TOKEN) *s = fa_quant_token_scale(x, c->d, c->dt);
    fa_quant_row(row, c->dt, x, c->d, s, step);
}

static void build(qfix *fp, const qcase *c, uint64_t seed) {
    qfix f;
    memset(&f, 0, sizeof f);
    uint64_t rng = seed;
    int64_t maxl = 1;
    for (int64_t b = 0; b < c->batch; b++) {
        f.seqlens[b] = c->lens[b];
        if (c->lens[b] + c->seq_new > maxl) maxl = c->lens[b] + c->seq_new;
    }
    int64_t entries = c->batch;
    if (c->page) {
        f.max_pages = (maxl + 3 + c->page - 1) / c->page;
        f.cap = f.max_pages * c->page;
        f.slots = c->page;
        entries = c->batch * f.max_pages + 2;
        f.table = malloc((size_t)(c->batch * f.max_pages) * sizeof(int32_t));
        int64_t *perm = malloc((size_t)entries * sizeof *perm);
        for (int64_t i = 0; i < entries; i++) perm[i] = i;
        for (int64_t i = entries - 1; i > 0; i--) {
            const int64_t r = (int64_t)(tt_rand_u64(&rng) % (uint64_t)(i + 1)), x = perm[i];
            perm[i] = perm[r], perm[r] = x;
        }
        for (int64_t i = 0; i < c->batch * f.max_pages; i++) f.table[i] = (int32_t)perm[i];
        free(perm);
    } else {
        f.cap = maxl + 3;
        f.slots = f.cap;
    }
    f.q = tt_alloc(FLASHATTN_F32, c->batch, c->seq_q, c->hq, c->d, 1, 0);
    tt_fill_normal(&f.q, &rng, 1.0);
    f.knew = tt_alloc(FLASHATTN_F32, c->batch, c->seq_new, c->hkv, c->d, 1, 0);
    f.vnew = tt_alloc(FLASHATTN_F32, c->batch, c->seq_new, c->hkv, c->d, 1, 0);
    flashattn_kv_cache_init(&f.cache);
    /* all rows' source values: the cached ones, then the new ones (k_new, v_new) */
    float *src[2];
    for (int t = 0; t < 2; t++) {
        src[t] = malloc((size_t)(c->batch * maxl * c->hkv * c->d) * sizeof(float));
        for (int64_t i = 0; i < c->batch * maxl * c->hkv * c->d; i++) src[t][i] = source(&rng, t, i % c->d);
        tt_tensor *nt = t ? &f.vnew : &f.knew;
        for (int64_t b = 0; b < c->batch; b++)
            for (int64_t j = 0; j < c->seq_new; j++)
                memcpy((float *)nt->mem + ((b * c->seq_new + j) * c->hkv) * c->d,
                       src[t] + ((b * maxl + c->lens[b] + j) * c->hkv) * c->d,
                       (size_t)(c->hkv * c->d) * sizeof(float));
        f.bytes[t] = (size_t)(entries * f.slots * c->hkv * c->d);
        f.mem[t] = malloc(f.bytes[t]), f.init[t] = malloc(f.bytes[t]), f.want[t] = malloc(f.bytes[t]);
        memset(f.init[t], 0x5a, f.bytes[t]);
        const int token = c->kind[t] == FLASHATTN_SCALE_PER_TOKEN;
        const int64_t sn = token ? entries * f.slots * c->hkv : c->hkv * (c->kind[t] == FLASHATTN_SCALE_PER_CHANNEL ? c->d : 1);
        f.sbytes[t] = (size_t)sn * sizeof(float);
        f.smem[t] = malloc(f.sbytes[t]), f.sinit[t] = malloc(f.sbytes[t]), f.swant[t] = malloc(f.sbytes[t]);
        for (int64_t i = 0; i < sn; i++) f.sinit[t][i] = token ? -777.0f : 0.0f;
        if (!token) /* calibrated on every row the cache will hold */
            for (int64_t b = 0; b < c->batch; b++)
                for (int64_t j = 0; j < c->lens[b] + c->seq_new; j++)
                    for (int64_t h = 0; h < c->hkv; h++)
                        for (int64_t e = 0; e < c->d; e++) {
                            const int64_t at = c->kind[t] == FLASHATTN_SCALE_PER_CHANNEL ? h * c->d + e : h;
                            const float a = fabsf(src[t][((b * maxl + j) * c->hkv + h) * c->d + e]) / fa_quant_max(c->dt);
                            if (a > f.sinit[t][at]) f.sinit[t][at] = a;
                        }
        /* the cached rows quantised into the initial image, the new ones
         * into the expected image after the append */
        memcpy(f.want[t], f.init[t], f.bytes[t]);
        memcpy(f.swant[t], f.sinit[t], f.sbytes[t]);
        for (int64_t b = 0; b < c->batch; b++)
            for (int64_t j = 0; j < c->lens[b] + c->seq_new; j++)
                for (int64_t h = 0; h < c->hkv; h++) {
                    const float *x = src[t] + ((b * maxl + j) * c->hkv + h) * c->d;
                    int64_t step;
                    float *s0 = scale_in(&f, c, t, f.sinit[t], b, j, h, &step);
                    float *s1 = scale_in(&f, c, t, f.swant[t], b, j, h, &step);
                    if (j < c->lens[b]) quantise(c, t, row_in(&f, c, t, f.init[t], b, j, h), x, s0, step);
                    quantise(c, t, row_in(&f, c, t, f.want[t], b, j, h), x, s1, step);
                }
        flashattn_tensor kv = {f.mem[t], c->dt, entries, f.slots, c->hkv, c->d,
                               f.slots * c->hkv * c->d, c->hkv * c->d, c->d, 1};
        f.kv[t] = kv;
        if (token) {
            flashattn_tensor s = {f.smem[t], FLASHATTN_F32, entries, f.slots, c->hkv, 1, f.slots * c->hkv, c->hkv, 1, 1};
            f.sc[t] = s;
        } else {
            const int64_t w = c->kind[t] == FLASHATTN_SCALE_PER_CHANNEL ? c->d : 1;
            flashattn_tensor s = {f.smem[t], FLASHATTN_F32, 1, 1, c->hkv, w, c->hkv * w, c->hkv * w, w, 1};
            f.sc[t] = s;
        }
        free(src[t]);
    }
    f.cache.k = f.kv[0], f.cache.v = f.kv[1];
    f.cache.k_scale = f.sc[0], f.cache.v_scale = f.sc[1];
    f.cache.k_scale_kind = c->kind[0], f.cache.v_scale_kind = c->kind[1];
    f.cache.block_table = f.table;
    f.cache.max_pages_per_seq = f.max_pages;
    *fp = f;
    fp->cache.seqlens_i64 = fp->seqlens;
}

static void reset(qfix *f) {
    for (int t = 0; t < 2; t++) {
        memcpy(f->mem[t], f->init[t], f->bytes[t]);
        memcpy(f->smem[t], f->sinit[t], f->sbytes[t]);
    }
}

static void release(qfix *f) {
    tt_free(&f->q), tt_free(&f->knew), tt_free(&f->vnew);
    for (int t = 0; t < 2; t++) {
        free(f->mem[t]), free(f->init[t]), free(f->want[t]);
        free(f->smem[t]), free(f->sinit[t]), free(f->swant[t]);
    }
    free(f->table);
}

static flashattn_params params_of(const qcase *c, int threads) {
    flashattn_params p = flashattn_params_default();
    p.causal = c->causal;
    p.window_left = c->wl;
    p.num_splits = c->splits;
    p.num_threads = threads;
    return p;
}

/* The FP64 reference over the expected cache, dequantised (element *
 * scale, in f32), one sequence at a time. */
static void reference(const qcase *c, qfix *f, double *ref, double *lse) {
    const flashattn_params p = params_of(c, 0);
    for (int64_t b = 0; b < c->batch; b++) {
        const int64_t len = c->lens[b] + c->seq_new;
        tt_tensor q = tt_alloc(FLASHATTN_F32, 1, c->seq_q, c->hq, c->d, 1, 0), kv[2];
        memcpy(q.mem, (float *)f->q.mem + b * c->seq_q * c->hq * c->d, q.bytes);
        for (int t = 0; t < 2; t++) {
            kv[t] = tt_alloc(FLASHATTN_F32, 1, len, c->hkv, c->d, 1, 0);
            for (int64_t j = 0; j < len; j++)
                for (int64_t h = 0; h < c->hkv; h++) {
                    int64_t step;
                    const unsigned char *row = row_in(f, c, t, f->want[t], b, j, h);
                    const float *s = scale_in(f, c, t, f->swant[t], b, j, h, &step);
                    for (int64_t e = 0; e < c->d; e++)
                        ((float *)kv[t].mem)[(j * c->hkv + h) * c->d + e] = fa_widen(row, c->dt, e) * s[e * step];
                }
        }
        TT_CHECK(fa_reference_fwd_f64(&q.t, &kv[0].t, &kv[1].t, &p, ref + b * c->seq_q * c->hq * c->d,
                                      lse + b * c->hq * c->seq_q) == FLASHATTN_OK,
                 "reference failed");
        tt_free(&q), tt_free(&kv[0]), tt_free(&kv[1]);
    }
}

static flashattn_status run(const qcase *c, qfix *f, const fa_kernels *kern, int threads, float *o, float *lse) {
    const flashattn_params p = params_of(c, threads);
    flashattn_tensor ot = flashattn_tensor_bshd(o, FLASHATTN_F32, c->batch, c->seq_q, c->hq, c->d);
    const flashattn_tensor *kn = c->seq_new ? &f->knew.t : NULL, *vn = c->seq_new ? &f->vnew.t : NULL;
    size_t ws = 0;
    flashattn_status s = fa_decode_workspace_size_ex(&f->q.t, &f->cache, kn, vn, &ot, lse, &p, kern, &ws);
    if (s) return s;
    void *w = malloc(ws ? ws : 1);
    s = fa_decode_ex(&f->q.t, &f->cache, kn, vn, &ot, lse, &p, w, ws, kern);
    free(w);
    return s;
}

static const char *kind_name(flashattn_scale_kind k) {
    return k == FLASHATTN_SCALE_PER_TOKEN ? "token" : k == FLASHATTN_SCALE_PER_CHANNEL ? "channel" : "head";
}

static void run_case(const qcase *c, uint64_t seed) {
    qfix f;
    build(&f, c, seed);
    char desc[256];
    snprintf(desc, sizeof desc, "%s K:%s V:%s b=%lld sq=%lld hq=%lld hkv=%lld d=%lld new=%lld page=%lld causal=%d wl=%lld splits=%d",
             fa_dtype_name(c->dt), kind_name(c->kind[0]), kind_name(c->kind[1]), (long long)c->batch,
             (long long)c->seq_q, (long long)c->hq, (long long)c->hkv, (long long)c->d, (long long)c->seq_new,
             (long long)c->page, c->causal, (long long)c->wl, c->splits);
    const size_t on = (size_t)(c->batch * c->seq_q * c->hq * c->d), ln = (size_t)(c->batch * c->hq * c->seq_q);
    double *ref = malloc((on + 1) * sizeof(double)), *rlse = malloc((ln + 1) * sizeof(double));
    reference(c, &f, ref, rlse);
    float *o = malloc((on + 1) * sizeof(float)), *o2 = malloc((on + 1) * sizeof(float));
    float *lse = malloc((ln + 1) * sizeof(float)), *lse2 = malloc((ln + 1) * sizeof(float));
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    for (int t = 0; t < n; t++) {
        reset(&f);
        flashattn_status s = run(c, &f, isas[t], 1, o, lse);
        TT_CHECK(s == FLASHATTN_OK, "[%s] status %d (%s): %s", isas[t]->isa, s, flashattn_last_error(), desc);
        if (s) continue;
        double err = 0.0, lerr = 0.0;
        int inf_ok = 1;
        for (size_t i = 0; i < on; i++) err = fmax(err, fabs((double)o[i] - ref[i]) + (o[i] != o[i]));
        for (size_t i = 0; i < ln; i++)
            if (isinf(rlse[i])) inf_ok &= isinf(lse[i]) && lse[i] < 0;
            else lerr = fmax(lerr, fabs((double)lse[i] - rlse[i]) + (lse[i] != lse[i]));
        TT_CHECK(err <= 1e-5, "[%s] max abs err %.3g > 1e-5: %s", isas[t]->isa, err, desc);
        TT_CHECK(lerr <= 1e-5 && inf_ok, "[%s] lse err %.3g, -inf rows %s: %s", isas[t]->isa, lerr,
                 inf_ok ? "ok" : "WRONG", desc);
        for (int x = 0; x < 2; x++) {
            for (size_t i = 0; i < f.bytes[x] && getenv("FA_TEST_VERBOSE"); i++)
                if (f.mem[x][i] != f.want[x][i]) {
                    printf("first diff %s at %zu (row %zu): got %02x want %02x init %02x\n", x ? "v" : "k", i, i / (size_t)c->d,
                           f.mem[x][i], f.want[x][i], f.init[x][i]);
                    break;
                }
            TT_CHECK(memcmp(f.mem[x], f.want[x], f.bytes[x]) == 0,
                     "[%s] cache %s after the append differs from the expected bytes: %s", isas[t]->isa, x ? "v" : "k", desc);
            TT_CHECK(memcmp(f.smem[x], f.swant[x], f.sbytes[x]) == 0,
                     "[%s] %s scales after the append differ from the expected ones: %s", isas[t]->isa, x ? "v" : "k", desc);
        }
        if (getenv("FA_TEST_VERBOSE")) printf("[%s] err %.3g lse err %.3g  %s\n", isas[t]->isa, err, lerr, desc);
        if (t == n - 1 && c->splits) { /* the same bits on two threads */
            reset(&f);
            TT_CHECK(run(c, &f, isas[t], 2, o2, lse2) == FLASHATTN_OK && memcmp(o, o2, on * sizeof(float)) == 0 &&
                         memcmp(lse, lse2, ln * sizeof(float)) == 0,
                     "[%s] 2 threads differ from 1: %s", isas[t]->isa, desc);
        }
    }
    free(ref), free(rlse), free(o), free(o2), free(lse), free(lse2);
    release(&f);
}

static qcase base(void) {
    qcase c;
    memset(&c, 0, sizeof c);
    c.batch = 2, c.seq_q = 1, c.hq = 8, c.hkv = 2, c.d = 128, c.seq_new = 1;
    c.lens[0] = 300, c.lens[1] = 77;
    c.wl = -1;
    c.dt = FLASHATTN_INT8;
    return c;
}

static void sweep(void) {
    static const flashattn_dtype dts[3] = {FLASHATTN_INT8, FLASHATTN_FP8_E4M3, FLASHATTN_FP8_E5M2};
    uint64_t seed = 1;
    /* every dtype and pair of scale kinds, contiguous and paged */
    for (int d = 0; d < 3; d++)
        for (int kk = 0; kk < 3; kk++)
            for (int kv = 0; kv < 3; kv++) {
                qcase c = base();
                c.dt = dts[d];
                c.kind[0] = (flashattn_scale_kind)kk, c.kind[1] = (flashattn_scale_kind)kv;
                c.page = (kk + kv + d) % 2 ? 16 : 0;
                run_case(&c, seed++);
            }
    /* shapes: GQA and MQA, odd head_dim, empty sequences, pages of 1 and 7,
     * several queries causal or windowed, long appends, splits */
    static const struct {
        int64_t batch, seq_q, hq, hkv, d, seq_new, page, l0, l1, l2;
        int causal;
        int64_t wl;
        int splits;
    } shapes[] = {
        {3, 1, 4, 1, 64, 1, 7, 0, 5, 1000, 0, -1, 0},
        {1, 3, 6, 3, 80, 3, 1, 40, 0, 0, 1, -1, 0},
        {2, 2, 2, 2, 40, 0, 0, 129, 17, 0, 1, 20, 3},
        {1, 1, 8, 1, 256, 5, 64, 2000, 0, 0, 0, -1, 4},
        {2, 8, 8, 2, 128, 8, 16, 100, 33, 0, 1, -1, 0}, /* 32 rows a kv-head: the wide path */
        {1, 12, 4, 1, 72, 12, 0, 250, 0, 0, 1, 50, 2},  /* wide, windowed, odd head_dim */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 3; d++) {
            qcase c = base();
            c.batch = shapes[i].batch, c.seq_q = shapes[i].seq_q, c.hq = shapes[i].hq, c.hkv = shapes[i].hkv;
            c.d = shapes[i].d, c.seq_new = shapes[i].seq_new, c.page = shapes[i].page;
            c.lens[0] = shapes[i].l0, c.lens[1] = shapes[i].l1, c.lens[2] = shapes[i].l2;
            c.causal = shapes[i].causal, c.wl = shapes[i].wl, c.splits = shapes[i].splits;
            c.dt = dts[d];
            c.kind[0] = (flashattn_scale_kind)((i + (size_t)d) % 3), c.kind[1] = (flashattn_scale_kind)((i + 2 * (size_t)d) % 3);
            run_case(&c, seed++);
        }
}

/* A NaN per-token scale on the last key of a sequence: with seq_q 3,
 * causal, only the last query row sees it, and only its O is NaN. */
static void test_nan_scale(void) {
    for (int t = 0; t < 2; t++) {
        qcase c = base();
        c.batch = 1, c.seq_q = 3, c.seq_new = 0, c.causal = 1, c.lens[0] = 50;
        qfix f;
        build(&f, &c, 99);
        int64_t step;
        *scale_in(&f, &c, t, f.sinit[t], 0, 49, 1, &step) = NAN; /* kv-head 1: query heads 4..7 */
        const size_t on = (size_t)(c.seq_q * c.hq * c.d);
        float *o = malloc(on * sizeof(float)), lse[3 * 8];
        const fa_kernels *isas[4];
        const int n = tt_isas(isas, 4);
        for (int k = 0; k < n; k++) {
            reset(&f);
            TT_CHECK(run(&c, &f, isas[k], 1, o, lse) == FLASHATTN_OK, "[%s] nan scale: %s", isas[k]->isa,
                     flashattn_last_error());
            for (int64_t i = 0; i < c.seq_q; i++)
                for (int64_t h = 0; h < c.hq; h++) {
                    int finite = 1;
                    for (int64_t e = 0; e < c.d; e++) finite &= isfinite(o[(i * c.hq + h) * c.d + e]) != 0;
                    const int sees = i == c.seq_q - 1 && h >= 4;
                    TT_CHECK(finite == !sees, "[%s] NaN %s scale: row %lld head %lld is %s", isas[k]->isa,
                             t ? "v" : "k", (long long)i, (long long)h, finite ? "finite" : "not finite");
                }
        }
        free(o);
        release(&f);
    }
}

/* Bad input: a clear status, o and the cache untouched. */
static void test_errors(void) {
    qcase c = base();
    c.kind[0] = FLASHATTN_SCALE_PER_TOKEN, c.kind[1] = FLASHATTN_SCALE_PER_CHANNEL;
    qfix f;
    build(&f, &c, 7);
    const size_t on = (size_t)(c.batch * c.seq_q * c.hq * c.d);
    float *o = malloc(on * sizeof(float)), lse[16];
    const fa_kernels *isas[4];
    tt_isas(isas, 4);
    float zero_scale[2 * 128];
    for (int i = 0; i < 2 * 128; i++) zero_scale[i] = 1.0f;
    zero_scale[77] = 0.0f;
    for (int which = 0; which < 11; which++) {
        reset(&f);
        const flashattn_kv_cache keep = f.cache;
        flashattn_status want = FLASHATTN_OK;
        switch (which) {
        case 0: f.cache.k_scale.data = NULL, want = FLASHATTN_ERR_NULL_POINTER; break;
        case 1: f.cache.v_scale.dtype = FLASHATTN_F16, want = FLASHATTN_ERR_BAD_DTYPE; break;
        case 2: f.cache.k_scale.head_dim = 2, want = FLASHATTN_ERR_BAD_SHAPE; break;
        case 3: f.cache.v_scale.head_dim = 1, want = FLASHATTN_ERR_BAD_SHAPE; break; /* channel kind: [1, 1, h, d] */
        case 4: f.cache.k_scale.seqlen -= 1, want = FLASHATTN_ERR_BAD_SHAPE; break;
        case 5: f.cache.v_scale.data = zero_scale, want = FLASHATTN_ERR_BAD_PARAM; break;
        case 6: f.cache.k_scale_kind = (flashattn_scale_kind)7, want = FLASHATTN_ERR_BAD_PARAM; break;
        case 7: f.cache.k_scale.stride_seq = 0, want = FLASHATTN_ERR_BAD_STRIDE; break; /* appending: rows overlap */
        case 8: f.q.t.dtype = FLASHATTN_INT8, want = FLASHATTN_ERR_BAD_DTYPE; break;
        case 9: f.knew.t.dtype = FLASHATTN_FP8_E4M3, want = FLASHATTN_ERR_BAD_DTYPE; break;
        case 10: f.cache.v.dtype = FLASHATTN_FP8_E5M2, want = FLASHATTN_ERR_BAD_DTYPE; break; /* k int8, v fp8 */
        }
        for (size_t i = 0; i < on; i++) o[i] = 12345.0f;
        const flashattn_status s = run(&c, &f, isas[0], 1, o, lse);
        int untouched = 1;
        for (size_t i = 0; i < on; i++) untouched &= o[i] == 12345.0f;
        TT_CHECK(s == want, "bad input %d: status %d, want %d (%s)", which, s, want, flashattn_last_error());
        TT_CHECK(untouched && memcmp(f.mem[0], f.init[0], f.bytes[0]) == 0 && memcmp(f.mem[1], f.init[1], f.bytes[1]) == 0 &&
                     memcmp(f.smem[0], f.sinit[0], f.sbytes[0]) == 0,
                 "bad input %d: something was written", which);
        f.cache = keep;
        f.q.t.dtype = FLASHATTN_F32, f.knew.t.dtype = FLASHATTN_F32;
    }
    release(&f);
    /* scales on a float cache; and an int8 k in the forward */
    float kbuf[4 * 64], scale[1] = {1.0f};
    for (int i = 0; i < 4 * 64; i++) kbuf[i] = 0.0f;
    flashattn_kv_cache fc;
    flashattn_kv_cache_init(&fc);
    fc.k = fc.v = flashattn_tensor_bshd(kbuf, FLASHATTN_F32, 1, 4, 1, 64);
    fc.k_scale = flashattn_tensor_bshd(scale, FLASHATTN_F32, 1, 1, 1, 1);
    fc.k_scale_kind = FLASHATTN_SCALE_PER_HEAD;
    int64_t len = 4;
    fc.seqlens_i64 = &len;
    float q[64] = {0}, out[64];
    flashattn_tensor qt = flashattn_tensor_bshd(q, FLASHATTN_F32, 1, 1, 1, 64);
    flashattn_tensor ot = flashattn_tensor_bshd(out, FLASHATTN_F32, 1, 1, 1, 64);
    flashattn_params p = flashattn_params_default();
    TT_CHECK(flashattn_decode(&qt, &fc, NULL, NULL, &ot, NULL, &p, NULL, 0) == FLASHATTN_ERR_BAD_PARAM,
             "scales on an f32 cache: %s", flashattn_last_error());
    flashattn_tensor kt = flashattn_tensor_bshd(kbuf, FLASHATTN_INT8, 1, 4, 1, 64);
    TT_CHECK(flashattn_fwd(&qt, &kt, &kt, &ot, NULL, &p, NULL, 0) == FLASHATTN_ERR_BAD_DTYPE,
             "int8 k in flashattn_fwd: %s", flashattn_last_error());
    free(o);
}

/* flashattn_quantize: per-token, and fixed scales calibrated or given,
 * bit for bit the rule of core/quant.h; bad input writes nothing. */
static void test_quantize(void) {
    const int64_t B = 2, S = 37, H = 3, D = 40;
    uint64_t rng = 5;
    tt_tensor src = tt_alloc(FLASHATTN_F16, B, S, H, D, 1, 0);
    tt_fill_normal(&src, &rng, 2.0);
    const size_t n = (size_t)(B * S * H * D);
    unsigned char *dst = malloc(n), *want = malloc(n);
    float *sc = malloc((size_t)(B * S * H) * sizeof(float)), *wsc = malloc((size_t)(B * S * H) * sizeof(float));
    static const flashattn_dtype dts[3] = {FLASHATTN_INT8, FLASHATTN_FP8_E4M3, FLASHATTN_FP8_E5M2};
    for (int d = 0; d < 3; d++)
        for (int kind = 0; kind < 3; kind++) {
            const flashattn_dtype dt = dts[d];
            const int64_t w = kind == FLASHATTN_SCALE_PER_CHANNEL ? D : 1, ns = kind ? H * w : B * S * H;
            flashattn_tensor dt_t = flashattn_tensor_bshd(dst, dt, B, S, H, D);
            flashattn_tensor st = kind ? flashattn_tensor_bshd(sc, FLASHATTN_F32, 1, 1, H, w)
                                       : flashattn_tensor_bshd(sc, FLASHATTN_F32, B, S, H, 1);
            memset(dst, 0x33, n);
            for (int64_t i = 0; i < ns; i++) sc[i] = -1.0f;
            const flashattn_status s = flashattn_quantize(&src.t, &dt_t, &st, (flashattn_scale_kind)kind, 1, 0);
            TT_CHECK(s == FLASHATTN_OK, "quantize %s kind %d: %s", fa_dtype_name(dt), kind, flashattn_last_error());
            /* the expected scales and bytes */
            for (int64_t i = 0; i < ns; i++) wsc[i] = 0.0f;
            float x[64];
            for (int64_t r = 0; kind && r < B * S * H; r++)
                for (int64_t e = 0; e < D; e++) {
                    const int64_t at = (r % H) * w + (w > 1 ? e : 0);
                    const float a = fabsf((float)fa_tensor_get(&src.t, r / H / S, r / H % S, r % H, e));
                    if (a > wsc[at]) wsc[at] = a;
                }
            for (int64_t i = 0; kind && i < ns; i++) wsc[i] = wsc[i] > 0 ? wsc[i] / fa_quant_max(dt) : 1.17549435e-38f;
            for (int64_t r = 0; r < B * S * H; r++) {
                for (int64_t e = 0; e < D; e++) x[e] = (float)fa_tensor_get(&src.t, r / H / S, r / H % S, r % H, e);
                if (!kind) wsc[r] = fa_quant_token_scale(x, D, dt);
                fa_quant_row(want + r * D, dt, x, D, kind ? wsc + (r % H) * w : wsc + r, w > 1);
            }
            TT_CHECK(memcmp(dst, want, n) == 0 && memcmp(sc, wsc, (size_t)ns * sizeof(float)) == 0,
                     "quantize %s kind %d: bytes or scales differ from the rule", fa_dtype_name(dt), kind);
            /* given fixed scales are read, not changed */
            if (kind) {
                for (int64_t i = 0; i < ns; i++) sc[i] = 0.05f;
                TT_CHECK(flashattn_quantize(&src.t, &dt_t, &st, (flashattn_scale_kind)kind, 0, 1) == FLASHATTN_OK &&
                             sc[0] == 0.05f && sc[ns - 1] == 0.05f,
                         "quantize %s kind %d, given scales: %s", fa_dtype_name(dt), kind, flashattn_last_error());
                for (int64_t i = 0; i < ns; i++) wsc[i] = 0.05f;
                for (int64_t r = 0; r < B * S * H; r++) {
                    for (int64_t e = 0; e < D; e++) x[e] = (float)fa_tensor_get(&src.t, r / H / S, r / H % S, r % H, e);
                    fa_quant_row(want + r * D, dt, x, D, wsc + (r % H) * w, w > 1);
                }
                TT_CHECK(memcmp(dst, want, n) == 0, "quantize %s kind %d, given scales: bytes differ", fa_dtype_name(dt),
                         kind);
            }
        }
    /* bad input: nothing written */
    flashattn_tensor d8 = flashattn_tensor_bshd(dst, FLASHATTN_INT8, B, S, H, D);
    flashattn_tensor tok = flashattn_tensor_bshd(sc, FLASHATTN_F32, B, S, H, 1);
    flashattn_tensor chan = flashattn_tensor_bshd(sc, FLASHATTN_F32, 1, 1, H, D);
    flashattn_tensor d16 = d8, s8 = src.t, dshort = d8, nanhead = chan;
    d16.dtype = FLASHATTN_F16, s8.dtype = FLASHATTN_INT8, dshort.seqlen = S - 1;
    for (int i = 0; i < H * D; i++) sc[i] = 1.0f;
    sc[5] = -1.0f; /* a bad given scale in nanhead's heads */
    const struct {
        const flashattn_tensor *src, *dst, *scale;
        int kind, calibrate;
        flashattn_status want;
    } bad[] = {
        {&s8, &d8, &tok, 0, 0, FLASHATTN_ERR_BAD_DTYPE},   {&src.t, &d16, &tok, 0, 0, FLASHATTN_ERR_BAD_DTYPE},
        {&src.t, &dshort, &tok, 0, 0, FLASHATTN_ERR_BAD_SHAPE}, {&src.t, &d8, &chan, 0, 0, FLASHATTN_ERR_BAD_SHAPE},
        {&src.t, &d8, &tok, 1, 0, FLASHATTN_ERR_BAD_SHAPE}, {&src.t, &d8, &nanhead, 1, 0, FLASHATTN_ERR_BAD_PARAM},
        {&src.t, &d8, &tok, 0, 2, FLASHATTN_ERR_BAD_PARAM}, {&src.t, &d8, NULL, 0, 0, FLASHATTN_ERR_NULL_POINTER},
        {&src.t, &d8, &tok, 9, 0, FLASHATTN_ERR_BAD_PARAM},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(dst, 0x33, n);
        int clean = 1;
        const flashattn_status s = flashattn_quantize(bad[i].src, bad[i].dst, bad[i].scale,
                                                      (flashattn_scale_kind)bad[i].kind, bad[i].calibrate, 0);
        for (size_t j = 0; j < n; j++) clean &= dst[j] == 0x33;
        TT_CHECK(s == bad[i].want && clean, "quantize bad input %zu: status %d (want %d), %s", i, s, bad[i].want,
                 clean ? "nothing written" : "WRITTEN");
    }
    /* calibrating on a NaN: an error, and neither scales nor bytes written */
    ((uint16_t *)src.mem)[77] = 0x7e00;
    for (int i = 0; i < H * D; i++) sc[i] = 7.0f;
    memset(dst, 0x33, n);
    int clean = 1;
    TT_CHECK(flashattn_quantize(&src.t, &d8, &chan, FLASHATTN_SCALE_PER_CHANNEL, 1, 0) == FLASHATTN_ERR_BAD_PARAM,
             "calibrating on a NaN must fail");
    for (size_t j = 0; j < n; j++) clean &= dst[j] == 0x33;
    for (int i = 0; i < H * D; i++) clean &= sc[i] == 7.0f;
    TT_CHECK(clean, "calibrating on a NaN wrote something");
    tt_free(&src);
    free(dst), free(want), free(sc), free(wsc);
}

int main(void) {
    test_conversions();
    test_quantize();
    sweep();
    test_nan_scale();
    test_errors();
    return tt_finish("test_quant_cache");
}
