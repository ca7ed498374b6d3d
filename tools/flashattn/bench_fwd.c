/*
 * The forward mode of `flashattn bench`: flashattn_fwd (two-phase, with a
 * preallocated workspace) against standard attention on the library's own
 * kernels, and on cblas_sgemm where the build has it, on the same inputs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "baseline/standard.h"
#include "bench.h"
#include "dispatch/isa.h"
#include "reference/attn_f64.h"
#include "reference/random.h"
#include "timing.h"

typedef struct {
    flashattn_tensor q, k, v, o;
    flashattn_params p;
    void *ws;
    size_t ws_bytes;
} fwd_ctx;

static int run_flash(void *c) {
    fwd_ctx *x = c;
    return flashattn_fwd(&x->q, &x->k, &x->v, &x->o, NULL, &x->p, x->ws, x->ws_bytes) != FLASHATTN_OK;
}

/* Median times of the causal call and the same call without the mask,
 * alternating (one warm-up of each first), so both see the same moments
 * of a shared machine: the ratio is what --causal reports. The causal
 * call goes last, so x->o ends with its result. 0, or -1 when a call
 * failed. */
static int time_causal_pair(fwd_ctx *x, int reps, double *causal_ms, double *plain_ms) {
    double tc[1000], tn[1000];
    for (int r = -1; r < reps; r++)
        for (int causal = 0; causal <= 1; causal++) {
            x->p.causal = causal;
            const double t0 = fa_cli_seconds();
            if (run_flash(x)) {
                x->p.causal = 1;
                return -1;
            }
            const double ms = 1e3 * (fa_cli_seconds() - t0);
            if (r >= 0) (causal ? tc : tn)[r] = ms;
        }
    x->p.causal = 1;
    *causal_ms = fa_cli_median(tc, reps);
    *plain_ms = fa_cli_median(tn, reps);
    return 0;
}

static int run_standard(void *c) {
    fwd_ctx *x = c;
    return fa_standard_fwd(&x->q, &x->k, &x->v, &x->o, &x->p, fa_active_kernels(), x->ws,
                           x->ws_bytes) != FLASHATTN_OK;
}

static int run_cblas(void *c) {
    fwd_ctx *x = c;
    return fa_standard_cblas_fwd(&x->q, &x->k, &x->v, &x->o, &x->p, fa_active_kernels(), x->ws,
                                 x->ws_bytes) != FLASHATTN_OK;
}

static flashattn_tensor alloc_bshd(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d) {
    size_t n = (size_t)(b * s * h * d) * (dt == FLASHATTN_F32 ? 4 : 2);
    return flashattn_tensor_bshd(malloc(n ? n : 1), dt, b, s, h, d);
}

/* (q, k) pairs the mask lets through, by the library's own mask rules. */
static double visible_pairs(fwd_ctx *x) {
    fa_problem pb;
    if (fa_validate_fwd(&x->q, &x->k, &x->v, &x->o, NULL, &x->p, &pb) != FLASHATTN_OK) return 0.0;
    double n = 0.0;
    for (int64_t i = 0; i < pb.seq_q; i++) {
        int64_t lo = fa_key_lo(&pb, i), end = fa_key_end(&pb, i);
        if (end > lo) n += (double)(end - lo);
    }
    return n;
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

/* Why a baseline did not run, appended to the row's note. */
static void add_note(bench_row *row, const char *name, const char *why) {
    size_t n = strlen(row->note);
    snprintf(row->note + n, sizeof row->note - n, "%s%s: %s", n ? "; " : "", name, why);
}

/* Time one baseline into its own output; its time stays < 0 when it is
 * not run, with the reason in row->note. */
static double time_baseline(fwd_ctx *x, int (*run)(void *), size_t bytes, const bench_opts *o,
                            const char *name, bench_row *row) {
    char why[64];
    if (bytes > BENCH_STANDARD_LIMIT) {
        snprintf(why, sizeof why, "needs %.1f GiB", (double)bytes / (1 << 30));
        add_note(row, name, why);
        return -1.0;
    }
    x->ws_bytes = bytes;
    x->ws = malloc(bytes);
    if (!x->ws) {
        snprintf(why, sizeof why, "no memory for %zu bytes", bytes);
        add_note(row, name, why);
        return -1.0;
    }
    double ms = bench_time_ms(run, x, o->reps);
    if (ms < 0) add_note(row, name, flashattn_last_error());
    free(x->ws);
    x->ws = NULL;
    return ms;
}

int bench_fwd(const bench_opts *o, int64_t seq_q, int64_t seq_k, bench_row *row) {
    fwd_ctx x;
    int rc = 0;
    uint64_t seed = 0x5eed;
    memset(&x, 0, sizeof x);
    memset(row, 0, sizeof *row);
    row->seq_q = seq_q, row->seq_k = seq_k;
    row->standard_ms = row->cblas_ms = row->max_abs_diff = row->noncausal_ms = -1.0;
    x.q = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    x.k = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.v = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.o = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    flashattn_tensor o_std = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    fa_fill_normal(&x.q, &seed, 1.0);
    fa_fill_normal(&x.k, &seed, 1.0);
    fa_fill_normal(&x.v, &seed, 1.0);
    x.p = flashattn_params_default();
    x.p.causal = o->causal;
    x.p.num_threads = o->threads;
    row->flops = 4.0 * (double)o->batch * (double)o->heads * visible_pairs(&x) * (double)o->head_dim;

    flashattn_status s = flashattn_fwd_workspace_size(&x.q, &x.k, &x.v, &x.o, NULL, &x.p, &x.ws_bytes);
    size_t plain_bytes = 0;
    if (s == FLASHATTN_OK && o->causal) {
        /* the unmasked call may plan other tiles: room for both */
        x.p.causal = 0;
        s = flashattn_fwd_workspace_size(&x.q, &x.k, &x.v, &x.o, NULL, &x.p, &plain_bytes);
        x.p.causal = 1;
    }
    if (s == FLASHATTN_OK) row->workspace_bytes = x.ws_bytes;
    if (plain_bytes > x.ws_bytes) x.ws_bytes = plain_bytes;
    if (s != FLASHATTN_OK || !(x.ws = malloc(x.ws_bytes ? x.ws_bytes : 1))) {
        fprintf(stderr, "flashattn bench: %s\n",
                s ? flashattn_last_error() : "no memory for the flash workspace");
        rc = 1;
        goto done;
    }
    if (o->causal) {
        if (time_causal_pair(&x, o->reps, &row->flash_ms, &row->noncausal_ms)) row->flash_ms = -1.0;
    } else {
        row->flash_ms = bench_time_ms(run_flash, &x, o->reps);
    }
    free(x.ws);
    x.ws = NULL;
    if (row->flash_ms < 0) {
        fprintf(stderr, "flashattn bench: flashattn_fwd failed: %s\n", flashattn_last_error());
        rc = 1;
        goto done;
    }
    if (row->noncausal_ms > 0)
        snprintf(row->note, sizeof row->note, "non-causal %.3f ms, causal/non-causal %.2f",
                 row->noncausal_ms, row->flash_ms / row->noncausal_ms);

    if (o->standard) {
        flashattn_tensor o_flash = x.o;
        x.o = o_std;
        if (fa_standard_workspace_size(&x.q, &x.k, &x.v, &x.o, &x.p, fa_active_kernels(),
                                       &row->standard_bytes) == FLASHATTN_OK)
            row->standard_ms = time_baseline(&x, run_standard, row->standard_bytes, o, "standard", row);
        else
            add_note(row, "standard", flashattn_last_error());
        if (row->standard_ms >= 0) row->max_abs_diff = max_abs_diff(&o_flash, &o_std);
        if (fa_standard_cblas_name()) {
            if (fa_standard_cblas_workspace_size(&x.q, &x.k, &x.v, &x.o, &x.p, &row->cblas_bytes) ==
                FLASHATTN_OK)
                row->cblas_ms = time_baseline(&x, run_cblas, row->cblas_bytes, o, "cblas", row);
            else
                add_note(row, "cblas", flashattn_last_error());
        }
        x.o = o_flash;
    }
done:
    free(x.q.data);
    free(x.k.data);
    free(x.v.data);
    free(x.o.data);
    free(o_std.data);
    return rc;
}
