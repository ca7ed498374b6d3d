/*
 * The forward mode of `flashattn bench`: flashattn_fwd (two-phase, with a
 * preallocated workspace) against standard attention on the library's own
 * kernels, and on cblas_sgemm where the build has it, on the same inputs.
 * The calls of a row are timed in turn, one of each per round, so the
 * speed-up is a ratio of calls made at the same moments (on a shared VM
 * the same binary moves 20-40% from one minute to the next).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline/standard.h"
#include "bench.h"
#include "reference/attn_f64.h"
#include "reference/random.h"
#include "tool/tool.h"

typedef struct {
    flashattn_tensor q, k, v, o;
    flashattn_params p;
    void *ws;
    size_t ws_bytes;
    char err[256]; /* why the call failed, kept before later calls run */
} fwd_ctx;

static int failed(fwd_ctx *x, flashattn_status s) {
    if (s != FLASHATTN_OK) snprintf(x->err, sizeof x->err, "%s", flashattn_last_error());
    return s != FLASHATTN_OK;
}

static int run_flash(void *c) {
    fwd_ctx *x = c;
    return failed(x, flashattn_fwd(&x->q, &x->k, &x->v, &x->o, NULL, &x->p, x->ws, x->ws_bytes));
}

static int run_standard(void *c) {
    fwd_ctx *x = c;
    return failed(x, fa_standard_fwd(&x->q, &x->k, &x->v, &x->o, &x->p, fa_active_kernels(), x->ws,
                                     x->ws_bytes));
}

static int run_cblas(void *c) {
    fwd_ctx *x = c;
    return failed(x, fa_standard_cblas_fwd(&x->q, &x->k, &x->v, &x->o, &x->p, fa_active_kernels(),
                                           x->ws, x->ws_bytes));
}

static flashattn_tensor alloc_bshd(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d) {
    size_t n = (size_t)(b * s * h * d) * flashattn_dtype_size(dt);
    return flashattn_tensor_bshd(malloc(n ? n : 1), dt, b, s, h, d);
}

/* (q, k) pairs the mask lets through, by the library's own mask rules. */
static double visible_pairs(fwd_ctx *x) {
    const double n = fa_tool_visible_pairs(&x->q, &x->k, &x->v, &x->o, &x->p);
    return n > 0.0 ? n : 0.0;
}

static double max_abs_diff(const flashattn_tensor *a, const flashattn_tensor *b) {
    double m = 0.0;
    for (int64_t bb = 0; bb < a->batch; bb++)
        for (int64_t s = 0; s < a->seqlen; s++)
            for (int64_t h = 0; h < a->heads; h++)
                for (int64_t c = 0; c < a->head_dim; c++) {
                    double e = fabs(fa_tensor_get(a, bb, s, h, c) - fa_tensor_get(b, bb, s, h, c));
                    if (!(e <= m)) m = e;
                }
    return m;
}

/* An f32 copy of t (widening f16 and bf16 is exact). */
static flashattn_tensor f32_copy(const flashattn_tensor *t) {
    flashattn_tensor c = alloc_bshd(FLASHATTN_F32, t->batch, t->seqlen, t->heads, t->head_dim);
    float *x = c.data;
    if (!x) return c;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t d = 0; d < t->head_dim; d++) *x++ = (float)fa_tensor_get(t, b, s, h, d);
    return c;
}

/* Why a baseline did not run, appended to the row's note. */
static void add_note(bench_row *row, const char *name, const char *why) {
    size_t n = strlen(row->note);
    snprintf(row->note + n, sizeof row->note - n, "%s%s: %s", n ? "; " : "", name, why);
}

/* A baseline's workspace and output, allocated for the timed rounds: 0,
 * or -1 when it is not run, with the reason in row->note. The baselines'
 * workspaces are held at the same time (their calls alternate), so
 * together they stay within BENCH_STANDARD_LIMIT: *budget is what is left. */
static int prepare_baseline(fwd_ctx *x, size_t bytes, size_t *budget, const char *name,
                            bench_row *row) {
    char why[96];
    x->ws = NULL;
    if (bytes > *budget) {
        if (*budget < BENCH_STANDARD_LIMIT)
            snprintf(why, sizeof why, "needs %.1f GiB beside standard's %.1f GiB",
                     (double)bytes / (1 << 30), (double)(BENCH_STANDARD_LIMIT - *budget) / (1 << 30));
        else
            snprintf(why, sizeof why, "needs %.1f GiB", (double)bytes / (1 << 30));
        add_note(row, name, why);
        return -1;
    }
    x->ws_bytes = bytes;
    x->o = alloc_bshd(x->o.dtype, x->o.batch, x->o.seqlen, x->o.heads, x->o.head_dim);
    if (!x->o.data || !(x->ws = malloc(bytes ? bytes : 1))) {
        snprintf(why, sizeof why, "no memory for %zu bytes", bytes);
        add_note(row, name, why);
        free(x->o.data);
        x->o.data = NULL;
        return -1;
    }
    *budget -= bytes;
    return 0;
}

int bench_fwd(const bench_opts *o, int64_t seq_q, int64_t seq_k, bench_row *row) {
    fwd_ctx x, plain, std_x, cblas_x, f32_x, one;
    int rc = 0;
    uint64_t seed = 0x5eed;
    memset(&x, 0, sizeof x);
    bench_row_start(row, seq_q, seq_k);
    x.q = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    x.k = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.v = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.o = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    fa_fill_normal(&x.q, &seed, 1.0);
    fa_fill_normal(&x.k, &seed, 1.0);
    fa_fill_normal(&x.v, &seed, 1.0);
    x.p = flashattn_params_default();
    x.p.causal = o->causal;
    x.p.num_threads = o->threads;
    row->flops = 4.0 * (double)o->batch * (double)o->heads * visible_pairs(&x) * (double)o->head_dim;
    /* every call compared writes its own output, allocated when it runs */
    plain = std_x = cblas_x = f32_x = one = x;
    plain.o.data = std_x.o.data = cblas_x.o.data = f32_x.o.data = one.o.data = NULL;
    std_x.ws = cblas_x.ws = f32_x.ws = NULL;
    plain.p.causal = 0;
    if (o->causal) plain.o = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    /* On several threads the same call on one thread is timed too: the
     * threads' speed-up, from the same rounds. */
    const int multi = o->threads > 1;
    if (multi) {
        one.p.num_threads = 1;
        one.o = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    }
    const int half = o->dtype != FLASHATTN_F32;
    if (half) {
        f32_x.q = f32_copy(&x.q), f32_x.k = f32_copy(&x.k), f32_x.v = f32_copy(&x.v);
        f32_x.o = alloc_bshd(FLASHATTN_F32, o->batch, seq_q, o->heads, o->head_dim);
    }

    flashattn_status s = flashattn_fwd_workspace_size(&x.q, &x.k, &x.v, &x.o, NULL, &x.p, &x.ws_bytes);
    size_t plain_bytes = 0;
    if (s == FLASHATTN_OK && o->causal)
        /* the unmasked call may plan other tiles: room for both */
        s = flashattn_fwd_workspace_size(&plain.q, &plain.k, &plain.v, &plain.o, NULL, &plain.p,
                                         &plain_bytes);
    if (s == FLASHATTN_OK) row->workspace_bytes = x.ws_bytes;
    size_t one_bytes = 0;
    if (s == FLASHATTN_OK && multi)
        s = flashattn_fwd_workspace_size(&one.q, &one.k, &one.v, &one.o, NULL, &one.p, &one_bytes);
    if (plain_bytes > x.ws_bytes) x.ws_bytes = plain_bytes;
    if (one_bytes > x.ws_bytes) x.ws_bytes = one_bytes;
    if (s != FLASHATTN_OK || !(x.ws = malloc(x.ws_bytes ? x.ws_bytes : 1))) {
        fprintf(stderr, "flashattn bench: %s\n",
                s ? flashattn_last_error() : "no memory for the flash workspace");
        rc = 1;
        goto done;
    }
    plain.ws = one.ws = x.ws, plain.ws_bytes = one.ws_bytes = x.ws_bytes;
    if (multi && !one.o.data) {
        fprintf(stderr, "flashattn bench: no memory for the 1-thread call's output\n");
        rc = 1;
        goto done;
    }
    if (half && (!f32_x.q.data || !f32_x.k.data || !f32_x.v.data || !f32_x.o.data)) {
        fprintf(stderr, "flashattn bench: no memory for the f32 copies of the inputs\n");
        rc = 1;
        goto done;
    }
    if (half && (flashattn_fwd_workspace_size(&f32_x.q, &f32_x.k, &f32_x.v, &f32_x.o, NULL, &f32_x.p,
                                              &f32_x.ws_bytes) != FLASHATTN_OK ||
                 !(f32_x.ws = malloc(f32_x.ws_bytes ? f32_x.ws_bytes : 1)))) {
        fprintf(stderr, "flashattn bench: the f32 comparison: %s\n",
                f32_x.ws_bytes ? "no memory for its workspace" : flashattn_last_error());
        rc = 1;
        goto done;
    }

    /* Flash, the unmasked flash call under --causal, the f32 and 1-thread
     * calls, and the baselines, timed in turn round by round: the ratios
     * the row reports compare calls made at the same moments. */
    bench_call calls[7];
    bench_peak_probe probe = {o->peak_kernels, o->peak_loop, o->threads, &calls[0].ms, 0, 0};
    int n = 0, at_probe = -1, at_plain = -1, at_f32 = -1, at_one = -1, at_std = -1, at_cblas = -1;
    calls[n++] = (bench_call){run_flash, &x, -1.0};
    if (o->causal) at_plain = n, calls[n++] = (bench_call){run_flash, &plain, -1.0};
    if (half) at_f32 = n, calls[n++] = (bench_call){run_flash, &f32_x, -1.0};
    if (multi) at_one = n, calls[n++] = (bench_call){run_flash, &one, -1.0};
    if (o->standard) {
        size_t bytes = 0, budget = BENCH_STANDARD_LIMIT;
        if (fa_standard_workspace_size(&x.q, &x.k, &x.v, &x.o, &x.p, fa_active_kernels(), &bytes) !=
            FLASHATTN_OK)
            add_note(row, "standard", flashattn_last_error());
        else if (row->standard_bytes = bytes, !prepare_baseline(&std_x, bytes, &budget, "standard", row))
            at_std = n, calls[n++] = (bench_call){run_standard, &std_x, -1.0};
        if (fa_standard_cblas_name()) {
            if (fa_standard_cblas_workspace_size(&x.q, &x.k, &x.v, &x.o, &x.p, &bytes) != FLASHATTN_OK)
                add_note(row, "cblas", flashattn_last_error());
            else if (row->cblas_bytes = bytes, !prepare_baseline(&cblas_x, bytes, &budget, "cblas", row))
                at_cblas = n, calls[n++] = (bench_call){run_cblas, &cblas_x, -1.0};
        }
    }
    if (o->peak_kernels) at_probe = n, calls[n++] = (bench_call){bench_peak_probe_run, &probe, -1.0};
    bench_time_together(calls, n, o->reps);
    row->flash_ms = calls[0].ms;
    if (at_probe >= 0) row->peak_gflops = bench_peak_probe_gflops(&probe, calls[at_probe].ms);
    if (row->flash_ms < 0 || (at_plain >= 0 && calls[at_plain].ms < 0) ||
        (at_f32 >= 0 && calls[at_f32].ms < 0) || (at_one >= 0 && calls[at_one].ms < 0)) {
        fprintf(stderr, "flashattn bench: flashattn_fwd failed: %s\n",
                row->flash_ms < 0                           ? x.err
                : at_plain >= 0 && calls[at_plain].ms < 0 ? plain.err
                : at_f32 >= 0 && calls[at_f32].ms < 0     ? f32_x.err
                                                            : one.err);
        row->flash_ms = -1.0;
        rc = 1;
        goto done;
    }
    char buf[96];
    if (at_plain >= 0) {
        row->noncausal_ms = calls[at_plain].ms;
        snprintf(buf, sizeof buf, "%.3f ms, causal/non-causal %.2f", row->noncausal_ms,
                 row->flash_ms / row->noncausal_ms);
        add_note(row, "non-causal", buf);
    }
    if (at_f32 >= 0) {
        row->f32_ms = calls[at_f32].ms;
        snprintf(buf, sizeof buf, "%.3f ms, speed vs f32 %.2fx", row->f32_ms, row->f32_ms / row->flash_ms);
        add_note(row, "f32 inputs", buf);
    }
    if (at_one >= 0) {
        row->one_thread_ms = calls[at_one].ms;
        snprintf(buf, sizeof buf, "%.3f ms, %d threads %.2fx", row->one_thread_ms, o->threads,
                 row->one_thread_ms / row->flash_ms);
        add_note(row, "1 thread", buf);
    }
    if (at_std >= 0) {
        row->standard_ms = calls[at_std].ms;
        if (row->standard_ms < 0) add_note(row, "standard", std_x.err);
        else row->max_abs_diff = max_abs_diff(&x.o, &std_x.o);
    }
    if (at_cblas >= 0) {
        row->cblas_ms = calls[at_cblas].ms;
        if (row->cblas_ms < 0) add_note(row, "cblas", cblas_x.err);
    }
done:
    free(x.ws);
    free(std_x.ws);
    free(cblas_x.ws);
    free(f32_x.ws);
    if (half) {
        free(f32_x.q.data);
        free(f32_x.k.data);
        free(f32_x.v.data);
        free(f32_x.o.data);
    }
    free(x.q.data);
    free(x.k.data);
    free(x.v.data);
    free(x.o.data);
    free(std_x.o.data);
    free(plain.o.data);
    free(one.o.data);
    free(cblas_x.o.data);
    return rc;
}
