/*
 * `flashattn bench --decode`: flashattn_decode (one generation step, no
 * append) against a KV cache, contiguous or paged, one row per cache
 * length. Decode is bound by reading the cache, so the figure of merit is
 * the cache bytes read per second against the read bandwidth, measured in
 * the same process, on the same threads, by the read loop run once before
 * every timed call: on a shared host the bandwidth left to us drifts from
 * second to second, and samples taken beside each call see the same
 * neighbours as the call. The median of those samples is the reference;
 * the best one is reported too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "json_out.h"
#include "peak.h"
#include "placement.h"
#include "reference/attn_f64.h"
#include "reference/random.h"
#include "timing.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define DEC_MAX_LENS 32

typedef struct {
    int64_t batch, heads, heads_kv, head_dim, seq_q, page, lens[DEC_MAX_LENS];
    int nlens, threads, reps, json, splits, bw_mib, outliers;
    flashattn_dtype kv_dtype;
    flashattn_dtype cache;            /* an 8-bit cache dtype, timed beside kv_dtype; else kv_dtype */
    flashattn_scale_kind scale_kind[2]; /* of its K and V */
} dec_opts;

typedef struct {
    flashattn_tensor q, o;
    flashattn_kv_cache cache;
    flashattn_params p;
    void *ws;
    size_t ws_bytes;
} dec_ctx;

static const char *dtype_name(flashattn_dtype dt) {
    static const char *names[FLASHATTN_DTYPE_COUNT] = {"f32", "f16", "bf16", "int8", "fp8_e4m3", "fp8_e5m2"};
    return (unsigned)dt < FLASHATTN_DTYPE_COUNT ? names[dt] : "?";
}

static int is_quant(flashattn_dtype dt) { return dt >= FLASHATTN_INT8 && dt < FLASHATTN_DTYPE_COUNT; }

static const char *kind_name(flashattn_scale_kind k) {
    return k == FLASHATTN_SCALE_PER_TOKEN ? "token" : k == FLASHATTN_SCALE_PER_CHANNEL ? "channel" : "head";
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn bench --decode [--kv-len 4096,32768,...] [--batch B] [--heads H]\n"
            "                       [--heads-kv HK] [--head-dim D] [--kv-dtype f32|f16|bf16]\n"
            "                       [--seq-q S] [--page-size P] [--splits N] [--threads T]\n"
            "                       [--reps R] [--bw-mib M] [--json]\n"
            "                       [--cache int8|fp8_e4m3|fp8_e5m2 [--k-scale token|channel|head]\n"
            "                        [--v-scale token|channel|head] [--outliers]]\n\n"
            "One decode step (S query rows per sequence, no append) against a cache of kv-len\n"
            "rows per sequence: contiguous, or paged with --page-size P (pages of the batch\n"
            "interleaved in the pool, as a server allocates them). kv_gbs counts the K and V\n"
            "bytes read; pct_bandwidth compares it with the read bandwidth: a full read of an\n"
            "array of M MiB (default 1024), same threads, run before every timed call; the\n"
            "median of those reads is bandwidth_gbs, the best bandwidth_best_gbs.\n"
            "Defaults: --kv-len 4096,32768,\n"
            "batch 1, heads 32, heads-kv 8, head-dim 128, f16, seq-q 1, contiguous, splits 0\n"
            "(automatic), 5 reps (medians, after a warm-up run); q and o use the cache dtype.\n\n"
            "--cache X: the same step on a quantised copy of the --kv-dtype cache\n"
            "(flashattn_quantize; scales per token unless --k-scale / --v-scale say otherwise),\n"
            "timed alternately with the --kv-dtype step in the same run: X ms, the ratio X / kv-dtype,\n"
            "the quantised bytes (scales included) per second against the bandwidth, and the\n"
            "error of O against the --kv-dtype O (max |diff| / max |O|, cosine similarity).\n"
            "--outliers multiplies K's channels 3 and 11 of every 16 by 8 (the per-channel\n"
            "outliers of real keys) in both caches.\n");
}

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_lens(const char *s, dec_opts *o) {
    o->nlens = 0;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || o->nlens == DEC_MAX_LENS || (*end && *end != ',')) return -1;
        o->lens[o->nlens++] = v;
        s = *end ? end + 1 : end;
    }
    return o->nlens > 0 ? 0 : -1;
}

/* 0 ok, 1 --help, 2 error (printed). */
static int parse_args(int argc, char **argv, dec_opts *o) {
    int64_t v = 0;
    memset(o, 0, sizeof *o);
    o->batch = 1, o->heads = 32, o->heads_kv = 8, o->head_dim = 128, o->seq_q = 1;
    o->kv_dtype = o->cache = FLASHATTN_F16, o->reps = 5, o->bw_mib = 1024;
    o->lens[0] = 4096, o->lens[1] = 32768, o->nlens = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!strcmp(a, "--decode")) continue;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--outliers")) o->outliers = 1;
        else if (!val) bad = 1;
        else if (!strcmp(a, "--kv-len")) bad = parse_lens(val, o), i++;
        else if (!strcmp(a, "--batch")) bad = parse_int(val, 1, 1 << 16, &o->batch), i++;
        else if (!strcmp(a, "--heads")) bad = parse_int(val, 1, 1 << 12, &o->heads), i++;
        else if (!strcmp(a, "--heads-kv")) bad = parse_int(val, 1, 1 << 12, &o->heads_kv), i++;
        else if (!strcmp(a, "--head-dim")) bad = parse_int(val, 1, FLASHATTN_MAX_HEAD_DIM, &o->head_dim), i++;
        else if (!strcmp(a, "--seq-q")) bad = parse_int(val, 1, 4096, &o->seq_q), i++;
        else if (!strcmp(a, "--page-size")) bad = parse_int(val, 0, 1 << 20, &o->page), i++;
        else if (!strcmp(a, "--splits")) bad = parse_int(val, 0, FLASHATTN_MAX_SPLITS, &v), o->splits = (int)v, i++;
        else if (!strcmp(a, "--threads")) bad = parse_int(val, 1, FA_PEAK_MAX_THREADS, &v), o->threads = (int)v, i++;
        else if (!strcmp(a, "--reps")) bad = parse_int(val, 1, 1000, &v), o->reps = (int)v, i++;
        else if (!strcmp(a, "--bw-mib")) bad = parse_int(val, 1, 1 << 20, &v), o->bw_mib = (int)v, i++;
        else if (!strcmp(a, "--cache")) {
            i++;
            if (!strcmp(val, "int8")) o->cache = FLASHATTN_INT8;
            else if (!strcmp(val, "fp8_e4m3")) o->cache = FLASHATTN_FP8_E4M3;
            else if (!strcmp(val, "fp8_e5m2")) o->cache = FLASHATTN_FP8_E5M2;
            else bad = 1;
        } else if (!strcmp(a, "--k-scale") || !strcmp(a, "--v-scale")) {
            flashattn_scale_kind *k = &o->scale_kind[a[2] == 'v'];
            i++;
            if (!strcmp(val, "token")) *k = FLASHATTN_SCALE_PER_TOKEN;
            else if (!strcmp(val, "channel")) *k = FLASHATTN_SCALE_PER_CHANNEL;
            else if (!strcmp(val, "head")) *k = FLASHATTN_SCALE_PER_HEAD;
            else bad = 1;
        } else if (!strcmp(a, "--kv-dtype")) {
            i++;
            if (!strcmp(val, "f32")) o->kv_dtype = FLASHATTN_F32;
            else if (!strcmp(val, "f16")) o->kv_dtype = FLASHATTN_F16;
            else if (!strcmp(val, "bf16")) o->kv_dtype = FLASHATTN_BF16;
            else bad = 1;
        } else {
            fprintf(stderr, "flashattn bench --decode: unknown option '%s'\n\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "flashattn bench --decode: bad or missing value for %s\n", a);
            return 2;
        }
    }
    if (!is_quant(o->cache)) o->cache = o->kv_dtype;
    if (o->heads % o->heads_kv) {
        fprintf(stderr, "flashattn bench --decode: --heads must be a multiple of --heads-kv\n");
        return 2;
    }
    return 0;
}

/* Random rows repeated over the whole buffer: the values do not change
 * the time, and filling gigabytes with fresh normals would. */
static void fill_cache(flashattn_tensor *t, uint64_t *seed, int outliers) {
    const size_t es = flashattn_dtype_size(t->dtype);
    const size_t total = (size_t)(t->batch * t->seqlen * t->heads * t->head_dim) * es;
    flashattn_tensor tile = *t;
    tile.batch = 1;
    tile.seqlen = t->seqlen < 256 ? t->seqlen : 256;
    fa_fill_normal(&tile, seed, 1.0);
    /* outliers: channels 3 and 11 of every 16 drawn again with sigma 8,
     * each through a one-channel view of the tile */
    for (int64_t e = 0; outliers && e < t->head_dim; e++)
        if (e % 16 == 3 || e % 16 == 11) {
            flashattn_tensor ch = tile;
            ch.data = (char *)t->data + (size_t)e * es;
            ch.head_dim = 1;
            fa_fill_normal(&ch, seed, 8.0);
        }
    const size_t tile_bytes = (size_t)(tile.seqlen * t->heads * t->head_dim) * es;
    for (size_t off = tile_bytes; off < total; off += tile_bytes)
        memcpy((char *)t->data + off, t->data, total - off < tile_bytes ? total - off : tile_bytes);
}

static int run_decode(void *c) {
    dec_ctx *x = c;
    return flashattn_decode(&x->q, &x->cache, NULL, NULL, &x->o, NULL, &x->p, x->ws,
                            x->ws_bytes) != FLASHATTN_OK;
}

typedef struct {
    double ms;             /* median decode time */
    double bw, bw_best;    /* median and best GB/s of the reads beside the calls; < 0: none */
    size_t ws;
    /* --cache: the quantised step's median, its bytes (scales included),
     * and its O against the float step's */
    double qms, qbytes, err, cosine;
} dec_result;

/* The quantised copy of x's cache: y shares q, its own cache, o and
 * workspace. Returns 0, or 1 after printing why. */
static int quantise_cache(const dec_opts *o, const dec_ctx *x, dec_ctx *y, void **mem) {
    *y = *x;
    y->ws = NULL;
    const flashattn_tensor *kv[2] = {&x->cache.k, &x->cache.v};
    for (int t = 0; t < 2; t++) {
        const flashattn_tensor *f = kv[t];
        const flashattn_scale_kind kind = o->scale_kind[t];
        const int64_t rows = f->batch * f->seqlen * f->heads;
        const int64_t ns = kind == FLASHATTN_SCALE_PER_TOKEN ? rows
                           : f->heads * (kind == FLASHATTN_SCALE_PER_CHANNEL ? f->head_dim : 1);
        mem[2 * t] = malloc((size_t)(rows * f->head_dim));
        mem[2 * t + 1] = malloc((size_t)ns * sizeof(float));
        if (!mem[2 * t] || !mem[2 * t + 1]) {
            fprintf(stderr, "flashattn bench --decode: no memory for the quantised cache\n");
            return 1;
        }
        flashattn_tensor q = flashattn_tensor_bshd(mem[2 * t], o->cache, f->batch, f->seqlen, f->heads, f->head_dim);
        flashattn_tensor sc = kind == FLASHATTN_SCALE_PER_TOKEN
                                  ? flashattn_tensor_bshd(mem[2 * t + 1], FLASHATTN_F32, f->batch, f->seqlen, f->heads, 1)
                                  : flashattn_tensor_bshd(mem[2 * t + 1], FLASHATTN_F32, 1, 1, f->heads,
                                                          kind == FLASHATTN_SCALE_PER_CHANNEL ? f->head_dim : 1);
        if (flashattn_quantize(f, &q, &sc, kind, 1, o->threads)) {
            fprintf(stderr, "flashattn bench --decode: flashattn_quantize: %s\n", flashattn_last_error());
            return 1;
        }
        if (t) y->cache.v = q, y->cache.v_scale = sc, y->cache.v_scale_kind = kind;
        else y->cache.k = q, y->cache.k_scale = sc, y->cache.k_scale_kind = kind;
    }
    const size_t ob = (size_t)(x->o.batch * x->o.seqlen * x->o.heads * x->o.head_dim) * flashattn_dtype_size(x->o.dtype);
    mem[4] = malloc(ob);
    y->o.data = mem[4];
    if (!mem[4] || flashattn_decode_workspace_size(&y->q, &y->cache, NULL, NULL, &y->o, NULL, &y->p, &y->ws_bytes) ||
        !(y->ws = malloc(y->ws_bytes ? y->ws_bytes : 1))) {
        fprintf(stderr, "flashattn bench --decode: %s\n", mem[4] && !y->ws ? flashattn_last_error() : "no memory");
        return 1;
    }
    return 0;
}

/* O of the quantised step against the float one's: max |diff| / max |O|
 * and the cosine similarity, over every element. */
static void compare_outputs(const flashattn_tensor *a, const flashattn_tensor *b, double *err, double *cosine) {
    const int64_t n = a->batch * a->seqlen * a->heads * a->head_dim;
    double big = 0.0, diff = 0.0, ab = 0.0, aa = 0.0, bb = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = i % a->head_dim, r = i / a->head_dim, h = r % a->heads, s = r / a->heads % a->seqlen;
        const int64_t e = r / a->heads / a->seqlen;
        const double x = fa_tensor_get(a, e, s, h, c), y = fa_tensor_get(b, e, s, h, c);
        big = fabs(y) > big ? fabs(y) : big;
        diff = fabs(x - y) > diff ? fabs(x - y) : diff;
        ab += x * y, aa += x * x, bb += y * y;
    }
    *err = big > 0 ? diff / big : diff;
    *cosine = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 1.0;
}

/* Time one cache length, each call after one read of arr (when it has
 * memory); with --cache, the quantised step after the float one, each
 * after its own read. Returns 0, or 1 after printing why. */
static int measure(const dec_opts *o, int64_t len, const fa_peak_array *arr, dec_result *res) {
    dec_ctx x, y;
    void *qmem[5] = {NULL, NULL, NULL, NULL, NULL};
    uint64_t seed = 0x5eed;
    int rc = 1;
    const int quant = o->cache != o->kv_dtype;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    const size_t es = flashattn_dtype_size(o->kv_dtype);
    const int64_t page = o->page, pages = page ? (len + page - 1) / page : 0;
    const int64_t pool_rows = page ? o->batch * pages * page : o->batch * len;
    const size_t cbytes = (size_t)(pool_rows * o->heads_kv * o->head_dim) * es;
    const size_t qbytes = (size_t)(o->batch * o->seq_q * o->heads * o->head_dim) * es;
    int64_t *lens = malloc((size_t)o->batch * sizeof *lens);
    int32_t *table = page ? malloc((size_t)(o->batch * pages) * sizeof *table) : NULL;
    void *kd = malloc(cbytes), *vd = malloc(cbytes), *qd = malloc(qbytes), *od = malloc(qbytes);
    if (!lens || (page && !table) || !kd || !vd || !qd || !od) {
        fprintf(stderr, "flashattn bench --decode: no memory for a %.2f GiB cache\n",
                2.0 * (double)cbytes / (1 << 30));
        goto done;
    }
    for (int64_t b = 0; b < o->batch; b++) lens[b] = len;
    flashattn_kv_cache_init(&x.cache);
    if (page) {
        x.cache.k = flashattn_tensor_bshd(kd, o->kv_dtype, o->batch * pages, page, o->heads_kv, o->head_dim);
        x.cache.v = flashattn_tensor_bshd(vd, o->kv_dtype, o->batch * pages, page, o->heads_kv, o->head_dim);
        /* page i of sequence b: the sequences grew together, so their pages interleave */
        for (int64_t b = 0; b < o->batch; b++)
            for (int64_t i = 0; i < pages; i++) table[b * pages + i] = (int32_t)(i * o->batch + b);
        x.cache.block_table = table;
        x.cache.max_pages_per_seq = pages;
    } else {
        x.cache.k = flashattn_tensor_bshd(kd, o->kv_dtype, o->batch, len, o->heads_kv, o->head_dim);
        x.cache.v = flashattn_tensor_bshd(vd, o->kv_dtype, o->batch, len, o->heads_kv, o->head_dim);
    }
    x.cache.seqlens_i64 = lens;
    fill_cache(&x.cache.k, &seed, o->outliers);
    fill_cache(&x.cache.v, &seed, 0);
    x.q = flashattn_tensor_bshd(qd, o->kv_dtype, o->batch, o->seq_q, o->heads, o->head_dim);
    x.o = flashattn_tensor_bshd(od, o->kv_dtype, o->batch, o->seq_q, o->heads, o->head_dim);
    fa_fill_normal(&x.q, &seed, 1.0);
    x.p = flashattn_params_default();
    x.p.num_threads = o->threads;
    x.p.num_splits = o->splits;
    if (flashattn_decode_workspace_size(&x.q, &x.cache, NULL, NULL, &x.o, NULL, &x.p, &x.ws_bytes) ||
        !(x.ws = malloc(x.ws_bytes ? x.ws_bytes : 1))) {
        fprintf(stderr, "flashattn bench --decode: %s\n",
                x.ws ? flashattn_last_error() : "no memory for the workspace");
        goto done;
    }
    if (quant && quantise_cache(o, &x, &y, qmem)) goto done;
    res->ws = quant ? y.ws_bytes : x.ws_bytes;
    double t[1000], tq[1000], bw[2000];
    res->bw = res->bw_best = -1.0;
    int nbw = 0;
    for (int r = -1; r < o->reps; r++) { /* r = -1: warm-up */
        for (int which = 0; which <= quant; which++) {
            dec_ctx *c = which ? &y : &x;
            if (arr->x) {
                const double b = fa_peak_bandwidth_once(fa_peak_widest(), arr, o->threads);
                if (r >= 0) bw[nbw++] = b;
            }
            const double t0 = fa_cli_seconds();
            if (run_decode(c)) {
                fprintf(stderr, "flashattn bench --decode: flashattn_decode failed: %s\n",
                        flashattn_last_error());
                goto done;
            }
            (which ? tq : t)[r < 0 ? 0 : r] = 1e3 * (fa_cli_seconds() - t0);
        }
    }
    if (arr->x) {
        res->bw_best = 0.0;
        for (int r = 0; r < nbw; r++) res->bw_best = bw[r] > res->bw_best ? bw[r] : res->bw_best;
        res->bw = fa_cli_median(bw, nbw);
    }
    res->ms = fa_cli_median(t, o->reps);
    res->qms = quant ? fa_cli_median(tq, o->reps) : res->ms;
    res->qbytes = 0.0;
    res->err = 0.0, res->cosine = 1.0;
    if (quant) {
        for (int k = 0; k < 2; k++) /* fixed scales: a few KiB, not counted */
            res->qbytes += (double)(o->batch * len * o->heads_kv) *
                           (double)(o->head_dim + (o->scale_kind[k] == FLASHATTN_SCALE_PER_TOKEN ? 4 : 0));
        compare_outputs(&y.o, &x.o, &res->err, &res->cosine);
    }
    rc = 0;
done:
    free(lens), free(table), free(kd), free(vd), free(qd), free(od), free(x.ws), free(y.ws);
    for (int i = 0; i < 5; i++) free(qmem[i]);
    return rc;
}

int bench_decode_cmd(int argc, char **argv) {
    dec_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc == 1) usage(stdout);
    if (rc) return rc == 1 ? 0 : 2;
    fa_cli_place_threads(argc, argv);
#ifdef _OPENMP
    if (o.threads == 0) o.threads = omp_get_max_threads();
#else
    o.threads = 1;
#endif
    fa_peak_array arr;
    if (fa_peak_array_alloc(&arr, (size_t)o.bw_mib << 20, o.threads) != 0) {
        arr.x = NULL;
        fprintf(stderr, "flashattn bench --decode: no memory for the bandwidth array\n");
    }
    if (!o.json) {
        printf("flashattn bench (decode): batch %lld, heads %lld (kv %lld), head_dim %lld, seq_q %lld, "
               "%s cache, %s, threads %d, kernels %s, %d reps (median)\n",
               (long long)o.batch, (long long)o.heads, (long long)o.heads_kv, (long long)o.head_dim,
               (long long)o.seq_q, dtype_name(o.kv_dtype), o.page ? "paged" : "contiguous",
               o.threads, flashattn_isa(), o.reps);
        printf("read bandwidth: a read of %d MiB on %d threads before every timed call; BW GB/s is\n"
               "their median (best in the JSON rows); threads: %s\n\n",
               o.bw_mib, o.threads, fa_cli_placement());
        if (o.cache != o.kv_dtype) {
            printf("%s cache: K scales per %s, V per %s%s; ratio = %s ms / %s ms, GB/s counts its bytes\n"
                   "(scales included); err: max |O - O_%s| / max |O_%s|\n\n",
                   dtype_name(o.cache), kind_name(o.scale_kind[0]), kind_name(o.scale_kind[1]),
                   o.outliers ? ", K with outlier channels" : "", dtype_name(o.cache), dtype_name(o.kv_dtype),
                   dtype_name(o.kv_dtype), dtype_name(o.kv_dtype));
            printf("%-9s | %9s | %8s | %8s | %6s | %9s | %9s | %11s | %8s | %8s\n", "kv_len", "page",
                   dtype_name(o.kv_dtype), dtype_name(o.cache), "ratio", "GB/s", "BW GB/s", "% bandwidth", "err",
                   "cosine");
        } else {
            printf("%-9s | %9s | %10s | %9s | %9s | %11s | %9s\n", "kv_len", "page", "decode ms",
                   "KV GB/s", "BW GB/s", "% bandwidth", "workspace");
        }
    }
    int rc_all = 0;
    for (int i = 0; i < o.nlens; i++) {
        dec_result res;
        if (measure(&o, o.lens[i], &arr, &res)) {
            rc_all = 1;
            break;
        }
        const double ms = res.ms, bw = res.bw;
        const size_t ws = res.ws;
        const double bytes = 2.0 * (double)(o.batch * o.lens[i] * o.heads_kv * o.head_dim) *
                             flashattn_dtype_size(o.kv_dtype);
        const double gbs = bytes / (ms * 1e6);
        if (o.json) {
            printf("{\"mode\": \"decode\", \"kv_len\": %lld, \"kv_dtype\": \"%s\", \"batch\": %lld, "
                   "\"heads\": %lld, \"heads_kv\": %lld, \"head_dim\": %lld, \"seq_q\": %lld, "
                   "\"page_size\": %lld, \"num_splits\": %d, \"threads\": %d, \"isa\": \"%s\", "
                   "\"reps\": %d",
                   (long long)o.lens[i], dtype_name(o.kv_dtype), (long long)o.batch,
                   (long long)o.heads, (long long)o.heads_kv, (long long)o.head_dim,
                   (long long)o.seq_q, (long long)o.page, o.splits, o.threads, flashattn_isa(),
                   o.reps);
            fa_json_num("decode_ms", ms, 1);
            fa_json_num("kv_bytes", bytes, 1);
            fa_json_num("kv_gbs", gbs, 1);
            fa_json_num("bandwidth_gbs", bw, bw > 0);
            fa_json_num("bandwidth_best_gbs", res.bw_best, res.bw_best > 0);
            fa_json_num("pct_bandwidth", 100.0 * gbs / bw, bw > 0);
            fa_json_size("workspace_bytes", ws, 1);
            if (o.cache != o.kv_dtype) {
                const double qgbs = res.qbytes / (res.qms * 1e6);
                fa_json_str("cache", dtype_name(o.cache));
                fa_json_str("k_scale", kind_name(o.scale_kind[0]));
                fa_json_str("v_scale", kind_name(o.scale_kind[1]));
                fa_json_num("outliers", o.outliers, 1);
                fa_json_num("cache_ms", res.qms, 1);
                fa_json_num("ratio", res.qms / ms, 1);
                fa_json_num("cache_bytes", res.qbytes, 1);
                fa_json_num("cache_gbs", qgbs, 1);
                fa_json_num("cache_pct_bandwidth", 100.0 * qgbs / bw, bw > 0);
                fa_json_num("err_vs_float", res.err, 1);
                fa_json_num("cosine_vs_float", res.cosine, 1);
            }
            fa_json_str("placement", fa_cli_placement());
            printf("}\n");
        } else if (o.cache != o.kv_dtype) {
            const double qgbs = res.qbytes / (res.qms * 1e6);
            printf("%-9lld | %9lld | %8.3f | %8.3f | %6.3f | %9.2f | %9.2f | %10.1f%% | %8.2e | %8.6f\n",
                   (long long)o.lens[i], (long long)o.page, ms, res.qms, res.qms / ms, qgbs, bw,
                   bw > 0 ? 100.0 * qgbs / bw : 0.0, res.err, res.cosine);
        } else {
            printf("%-9lld | %9lld | %10.3f | %9.2f | %9.2f | %10.1f%% | %7.1f KiB\n",
                   (long long)o.lens[i], (long long)o.page, ms, gbs, bw, bw > 0 ? 100.0 * gbs / bw : 0.0,
                   (double)ws / 1024);
        }
        fflush(stdout);
    }
    fa_peak_array_free(&arr);
    return rc_all;
}
