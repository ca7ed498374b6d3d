/*
 * `flashattn bench --varlen`: a packed batch of sequences of mixed lengths
 * (params.varlen, one call) against the two ways to do without it: one
 * dense call padded to the longest sequence, and one dense call per
 * sequence. Forward, or the backward with --bwd.
 *
 * The lengths are drawn log-uniform in min..max from a seed (splitmix64,
 * src/reference/random.c), so every machine benchmarks the same batch. All
 * calls of one mask (the three variants on every thread count) are timed
 * in the same rounds (bench_time_spread), each with its own workspace,
 * outputs allocated beforehand; every ratio compares the same moments of
 * the machine. Before any timing, each (mask, threads) checks varlen
 * against the per-sequence calls: with the same explicit tiles they must
 * be bit-identical (header: flashattn_varlen); with automatic tiles the
 * max difference is printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_varlen.h"
#include "peak.h"
#include "placement.h"
#include "reference/random.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn bench --varlen [--bwd] [--seqs N] [--min-len L] [--max-len L]\n"
            "                       [--seed S] [--heads H] [--heads-kv HK] [--head-dim D]\n"
            "                       [--dtype f32|f16|bf16] [--causal|--no-causal]\n"
            "                       [--threads 1,2] [--reps R] [--block-m M] [--block-n N]\n"
            "                       [--deterministic] [--json]\n\n"
            "A packed batch of N sequences (lengths log-uniform in min..max, drawn from the\n"
            "seed: the same on every machine) in one call with params.varlen, against one\n"
            "dense call padded to the longest sequence and one dense call per sequence.\n"
            "Forward, or the backward with --bwd (each variant's forward runs once first).\n"
            "Defaults: 32 sequences, 64..4096, seed 1, heads 8 (kv = heads), head_dim 128,\n"
            "f32, non-causal and causal, threads 1,2, 3 reps (medians, after a warm-up round).\n"
            "The calls of a mask (every variant on every thread count) are timed in turn, one\n"
            "of each per round, odd rounds reversed. (x%%) after a time: the rounds' spread,\n"
            "(max - min) / median. Targets: varlen over padded >= %.2f x the padded/useful\n"
            "FLOPs; varlen on 2 threads over 1 >= %.3fx (%.3f per thread). A missed target\n"
            "is reported, never an error.\n"
            "Check, before timing, for every mask and thread count: varlen against the\n"
            "per-sequence calls with the same explicit tiles (--block-m/--block-n, else\n"
            "those varlen's own plan picks; backward: deterministic) must be bit-identical;\n"
            "the timed calls' automatic tiles may differ by rounding (max |diff| printed).\n"
            "--deterministic: the timed backward calls use params.deterministic.\n",
            VL_TARGET_PADDED, 2 * VL_TARGET_SCALING, VL_TARGET_SCALING);
}

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_threads(const char *s, vl_opts *o) {
    o->nthreads = 0;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || v > FA_PEAK_MAX_THREADS || o->nthreads == VL_MAX_THREADS ||
            (*end && *end != ','))
            return -1;
        o->threads[o->nthreads++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return o->nthreads > 0 ? 0 : -1;
}

/* 0 ok, 1 --help, 2 error (printed). */
static int parse_args(int argc, char **argv, vl_opts *o) {
    int64_t v = 0;
    int causal = 0, noncausal = 0;
    memset(o, 0, sizeof *o);
    o->seqs = 32, o->min_len = 64, o->max_len = 4096, o->seed = 1;
    o->heads = 8, o->head_dim = 128, o->dtype = FLASHATTN_F32, o->reps = 3;
    o->threads[0] = 1, o->threads[1] = 2, o->nthreads = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!strcmp(a, "--varlen") || !strcmp(a, "--fwd")) continue;
        else if (!strcmp(a, "--bwd")) o->bwd = 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--causal")) causal = 1;
        else if (!strcmp(a, "--no-causal")) noncausal = 1;
        else if (!strcmp(a, "--deterministic")) o->deterministic = 1;
        else if (!val) bad = 1;
        else if (!strcmp(a, "--seqs")) bad = parse_int(val, 1, VL_MAX_SEQS, &o->seqs), i++;
        else if (!strcmp(a, "--min-len")) bad = parse_int(val, 1, 1 << 20, &o->min_len), i++;
        else if (!strcmp(a, "--max-len")) bad = parse_int(val, 1, 1 << 20, &o->max_len), i++;
        else if (!strcmp(a, "--seed")) bad = parse_int(val, 0, INT64_MAX, &v), o->seed = (uint64_t)v, i++;
        else if (!strcmp(a, "--heads")) bad = parse_int(val, 1, 1 << 12, &o->heads), i++;
        else if (!strcmp(a, "--heads-kv")) bad = parse_int(val, 1, 1 << 12, &o->heads_kv), i++;
        else if (!strcmp(a, "--head-dim")) bad = parse_int(val, 1, FLASHATTN_MAX_HEAD_DIM, &o->head_dim), i++;
        else if (!strcmp(a, "--threads")) bad = parse_threads(val, o), i++;
        else if (!strcmp(a, "--reps")) bad = parse_int(val, 1, 1000, &v), o->reps = (int)v, i++;
        else if (!strcmp(a, "--block-m")) bad = parse_int(val, 1, 1 << 16, &v), o->block_m = (int)v, i++;
        else if (!strcmp(a, "--block-n")) bad = parse_int(val, 1, 1 << 16, &v), o->block_n = (int)v, i++;
        else if (!strcmp(a, "--dtype")) {
            i++;
            if (!strcmp(val, "f32")) o->dtype = FLASHATTN_F32;
            else if (!strcmp(val, "f16")) o->dtype = FLASHATTN_F16;
            else if (!strcmp(val, "bf16")) o->dtype = FLASHATTN_BF16;
            else bad = 1;
        } else {
            fprintf(stderr, "flashattn bench --varlen: unknown option '%s'\n\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "flashattn bench --varlen: bad or missing value for %s\n", a);
            return 2;
        }
    }
    if (o->heads_kv == 0) o->heads_kv = o->heads;
    if (o->heads % o->heads_kv) {
        fprintf(stderr, "flashattn bench --varlen: --heads must be a multiple of --heads-kv\n");
        return 2;
    }
    if (o->min_len > o->max_len) {
        fprintf(stderr, "flashattn bench --varlen: --min-len is above --max-len\n");
        return 2;
    }
    if (o->seqs * o->max_len > INT32_MAX) {
        fprintf(stderr, "flashattn bench --varlen: --seqs x --max-len must fit cu_seqlens (int32)\n");
        return 2;
    }
    if (causal == noncausal) o->masks[0] = 0, o->masks[1] = 1, o->nmasks = 2;
    else o->masks[0] = causal, o->nmasks = 1;
    return 0;
}

/* Log-uniform in min..max: exp of a uniform draw between log(min) and
 * log(max + 1), rounded down. */
static void draw_lengths(const vl_opts *o, vl_batch *b) {
    uint64_t state = o->seed;
    const double lo = log((double)o->min_len), hi = log((double)o->max_len + 1.0);
    b->total = b->longest = 0;
    b->cu[0] = 0;
    for (int64_t i = 0; i < b->n; i++) {
        const double u = (double)(fa_rand_u64(&state) >> 11) * 0x1p-53;
        int64_t len = (int64_t)floor(exp(lo + u * (hi - lo)));
        len = len < o->min_len ? o->min_len : len > o->max_len ? o->max_len : len;
        b->len[i] = len;
        b->total += len;
        b->cu[i + 1] = (int32_t)b->total;
        if (len > b->longest) b->longest = len;
    }
}

static flashattn_tensor alloc_bshd(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d) {
    size_t n = (size_t)(b * s * h * d) * flashattn_dtype_size(dt);
    return flashattn_tensor_bshd(calloc(n ? n : 1, 1), dt, b, s, h, d);
}

/* Rows r0 .. r0 + n - 1 of a packed tensor, as a dense batch of one. */
/* The packed rows of t copied into sequence slots of the padded p. */
static void pad_copy(const vl_batch *b, const flashattn_tensor *t, const flashattn_tensor *p) {
    const size_t row = (size_t)(t->stride_seq) * flashattn_dtype_size(t->dtype);
    for (int64_t i = 0; i < b->n; i++)
        memcpy((char *)p->data + (size_t)i * (size_t)p->seqlen * row,
               (char *)t->data + (size_t)b->cu[i] * row, (size_t)b->len[i] * row);
}

/* ---- the command --------------------------------------------------------- */

typedef struct {
    vl_batch b;
    flashattn_tensor q, k, v, dout; /* packed inputs */
    vl_out x[VL_VARIANTS];
    vl_call calls[VL_MAX_THREADS][VL_VARIANTS];
} vl_state;

static void free_state(vl_state *s) {
    free(s->b.len), free(s->b.cu);
    free(s->q.data), free(s->k.data), free(s->v.data), free(s->dout.data);
    for (int v = 0; v < VL_VARIANTS; v++) {
        vl_out *x = &s->x[v];
        if (v == VL_PADDED) free(x->q.data), free(x->k.data), free(x->v.data), free(x->dout.data);
        free(x->o.data), free(x->dq.data), free(x->dk.data), free(x->dv.data), free(x->lse);
    }
    for (int t = 0; t < VL_MAX_THREADS; t++)
        for (int v = 0; v < VL_VARIANTS; v++) free(s->calls[t][v].ws), free(s->calls[t][v].bws);
}

/* Outputs of one variant with n sequences of seq rows (packed: 1 x total). */
static int alloc_out(const vl_opts *o, vl_out *x, int64_t n, int64_t seq) {
    x->o = alloc_bshd(o->dtype, n, seq, o->heads, o->head_dim);
    x->lse = malloc((size_t)(n * seq * o->heads) * sizeof(float));
    if (o->bwd) {
        x->dq = alloc_bshd(o->dtype, n, seq, o->heads, o->head_dim);
        x->dk = alloc_bshd(o->dtype, n, seq, o->heads_kv, o->head_dim);
        x->dv = alloc_bshd(o->dtype, n, seq, o->heads_kv, o->head_dim);
    }
    return x->o.data && x->lse && (!o->bwd || (x->dq.data && x->dk.data && x->dv.data)) ? 0 : -1;
}

static int setup(const vl_opts *o, vl_state *s) {
    vl_batch *b = &s->b;
    uint64_t seed = 0x5eed;
    b->n = o->seqs;
    b->len = malloc((size_t)b->n * sizeof *b->len);
    b->cu = malloc((size_t)(b->n + 1) * sizeof *b->cu);
    if (!b->len || !b->cu) return -1;
    draw_lengths(o, b);
    flashattn_varlen_init(&b->varlen);
    b->varlen.batch = b->n;
    b->varlen.cu_seqlens_q = b->varlen.cu_seqlens_k = b->cu;
    s->q = alloc_bshd(o->dtype, 1, b->total, o->heads, o->head_dim);
    s->k = alloc_bshd(o->dtype, 1, b->total, o->heads_kv, o->head_dim);
    s->v = alloc_bshd(o->dtype, 1, b->total, o->heads_kv, o->head_dim);
    if (o->bwd) s->dout = alloc_bshd(o->dtype, 1, b->total, o->heads, o->head_dim);
    if (!s->q.data || !s->k.data || !s->v.data || (o->bwd && !s->dout.data)) return -1;
    fa_fill_normal(&s->q, &seed, 1.0);
    fa_fill_normal(&s->k, &seed, 1.0);
    fa_fill_normal(&s->v, &seed, 1.0);
    if (o->bwd) fa_fill_normal(&s->dout, &seed, 1.0);
    for (int v = 0; v < VL_VARIANTS; v++) {
        vl_out *x = &s->x[v];
        if (v != VL_PADDED) {
            x->q = s->q, x->k = s->k, x->v = s->v, x->dout = s->dout;
            if (alloc_out(o, x, 1, b->total)) return -1;
            continue;
        }
        /* inputs and outputs: (q, k, v, o, dq, dk, dv, dout; lse) */
        const size_t es = flashattn_dtype_size(o->dtype);
        const size_t rows = (size_t)(b->n * b->longest);
        b->padded_bytes = rows * es * (size_t)o->head_dim * (size_t)(o->heads + o->heads_kv) *
                              (o->bwd ? 4 : 2) + rows * (size_t)o->heads * sizeof(float);
        if (b->padded_bytes > BENCH_STANDARD_LIMIT) continue;
        b->padded = 1;
        x->q = alloc_bshd(o->dtype, b->n, b->longest, o->heads, o->head_dim);
        x->k = alloc_bshd(o->dtype, b->n, b->longest, o->heads_kv, o->head_dim);
        x->v = alloc_bshd(o->dtype, b->n, b->longest, o->heads_kv, o->head_dim);
        if (o->bwd) x->dout = alloc_bshd(o->dtype, b->n, b->longest, o->heads, o->head_dim);
        if (!x->q.data || !x->k.data || !x->v.data || (o->bwd && !x->dout.data) ||
            alloc_out(o, x, b->n, b->longest))
            return -1;
        pad_copy(b, &s->q, &x->q), pad_copy(b, &s->k, &x->k), pad_copy(b, &s->v, &x->v);
        if (o->bwd) pad_copy(b, &s->dout, &x->dout);
    }
    for (int t = 0; t < o->nthreads; t++)
        for (int v = 0; v < VL_VARIANTS; v++) {
            vl_call *c = &s->calls[t][v];
            c->variant = v, c->b = b, c->x = &s->x[v];
            c->p = flashattn_params_default();
            c->p.varlen = v == VL_VARLEN ? &b->varlen : NULL;
        }
    return 0;
}

/* The timed params of one (mask, threads). */
static flashattn_params timed_params(const vl_opts *o, int causal, int threads) {
    flashattn_params p = flashattn_params_default();
    p.causal = causal;
    p.num_threads = threads;
    p.block_m = o->block_m, p.block_n = o->block_n;
    p.deterministic = o->deterministic;
    return p;
}

/* Check every thread count of one mask (before any timing). 0, or 1
 * after printing why. */
static int check_mask(const vl_opts *o, vl_state *s, int causal, vl_row *rows) {
    for (int t = 0; t < o->nthreads; t++) {
        vl_row *r = &rows[t];
        memset(r, 0, sizeof *r);
        r->causal = causal, r->threads = o->threads[t];
        const flashattn_params p = timed_params(o, causal, o->threads[t]);
        if (vl_check_config(o, &s->calls[t][VL_VARLEN], &s->calls[t][VL_PERSEQ], &p, r)) return 1;
        if (!o->json) vl_print_check(o, r), fflush(stdout);
    }
    return 0;
}

/* Time every variant on every thread count of one mask, in the same
 * rounds. 0, or 1 after printing why. */
static int time_mask(const vl_opts *o, vl_state *s, int causal, vl_row *rows) {
    bench_call calls[VL_MAX_THREADS * VL_VARIANTS];
    double lo[VL_MAX_THREADS * VL_VARIANTS], hi[VL_MAX_THREADS * VL_VARIANTS];
    int at[VL_MAX_THREADS][VL_VARIANTS], n = 0;
    for (int t = 0; t < o->nthreads; t++)
        for (int v = 0; v < VL_VARIANTS; v++) {
            vl_call *c = &s->calls[t][v];
            at[t][v] = -1;
            if (v == VL_PADDED && !s->b.padded) continue;
            c->p = timed_params(o, causal, o->threads[t]);
            c->p.varlen = v == VL_VARLEN ? &s->b.varlen : NULL;
            /* the backward's inputs: this variant's forward, run once */
            if (vl_prepare(c, o->bwd) || (o->bwd && vl_run_fwd(c))) {
                fprintf(stderr, "flashattn bench --varlen: %s call failed: %s\n", vl_variant_name(v), c->err);
                return 1;
            }
            at[t][v] = n;
            calls[n++] = (bench_call){o->bwd ? vl_run_bwd : vl_run_fwd, c, -1.0};
        }
    bench_time_spread(calls, n, o->reps, lo, hi);
    for (int t = 0; t < o->nthreads; t++)
        for (int v = 0; v < VL_VARIANTS; v++) {
            vl_row *r = &rows[t];
            const int i = at[t][v];
            const bench_call *c = i >= 0 ? &calls[i] : NULL;
            r->ms[v] = c ? c->ms : -1.0;
            r->lo[v] = c ? lo[i] : -1.0, r->hi[v] = c ? hi[i] : -1.0;
            if (c && c->ms < 0) {
                fprintf(stderr, "flashattn bench --varlen: %s call failed: %s\n", vl_variant_name(v),
                        s->calls[t][v].err);
                return 1;
            }
        }
    return 0;
}

int bench_varlen_cmd(int argc, char **argv) {
    vl_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc == 1) usage(stdout);
    if (rc) return rc == 1 ? 0 : 2;
    fa_cli_place_threads(argc, argv);
#ifndef _OPENMP
    o.nthreads = 1, o.threads[0] = 1;
#endif
    vl_state s;
    memset(&s, 0, sizeof s);
    if (setup(&o, &s)) {
        fprintf(stderr, "flashattn bench --varlen: no memory for the batch's tensors\n");
        free_state(&s);
        return 1;
    }
    if (!o.json) {
        printf("flashattn bench --varlen (%s): %lld sequences, lengths log-uniform in %lld..%lld "
               "(seed %llu), heads %lld (kv %lld), head_dim %lld, %s, kernels %s, %d reps (median)\n",
               o.bwd ? "backward" : "forward", (long long)o.seqs, (long long)o.min_len,
               (long long)o.max_len, (unsigned long long)o.seed, (long long)o.heads,
               (long long)o.heads_kv, (long long)o.head_dim, vl_dtype_name(o.dtype), flashattn_isa(),
               o.reps);
        vl_print_lengths(&o, &s.b);
        printf("threads: %s\n", fa_cli_placement());
        if (!s.b.padded)
            printf("padded: n/a (its tensors would take %.1f GiB, over %.0f GiB)\n",
                   (double)s.b.padded_bytes / (1 << 30), (double)BENCH_STANDARD_LIMIT / (1 << 30));
        printf("\ncheck, before timing: varlen against the %lld per-sequence calls\n", (long long)o.seqs);
    }
    vl_row rows[2][VL_MAX_THREADS];
    for (int m = 0; m < o.nmasks && !rc; m++) rc = check_mask(&o, &s, o.masks[m], rows[m]);
    int bits = 1;
    for (int m = 0; m < o.nmasks && !rc; m++)
        for (int t = 0; t < o.nthreads; t++) bits &= rows[m][t].bits;
    if (!rc && !o.json) {
        vl_print_table_header();
        printf("(x%%): spread of the rounds, (max - min) / median. FLOP ratio: padded over useful;\n"
               "targets: vs padded >= %.2f x FLOP ratio, scaling (1 thread's time over this row's) "
               ">= %.3f x threads\n",
               VL_TARGET_PADDED, VL_TARGET_SCALING);
    }
    for (int m = 0; m < o.nmasks && !rc; m++) {
        if ((rc = time_mask(&o, &s, o.masks[m], rows[m]))) break;
        const vl_row *one = NULL;
        for (int t = 0; t < o.nthreads; t++)
            if (rows[m][t].threads == 1) one = &rows[m][t];
        for (int t = 0; t < o.nthreads; t++) {
            const vl_ratios x = vl_ratios_of(&o, &s.b, &rows[m][t], one);
            if (o.json) vl_print_json(&o, &s.b, &rows[m][t], &x);
            else vl_print_row(&rows[m][t], &x);
        }
        fflush(stdout);
    }
    if (!rc && !bits)
        fprintf(stderr, "flashattn bench --varlen: WARNING: varlen and the per-sequence calls "
                        "differ with the same tiles (see the check lines)\n");
    free_state(&s);
    return rc;
}
