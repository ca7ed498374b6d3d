/*
 * The backward mode of `flashattn bench` (--bwd): flashattn_bwd, two-phase
 * with a preallocated workspace, on the O and LSE of the forward of the same
 * inputs. The forward is timed too, on the same threads, its calls
 * alternating with the backward's, so that bwd / fwd is a ratio of calls
 * made at the same moments (issue 4's target: at most 3).
 * FLOPs are 2.5x the forward's, FlashAttention's convention (five products
 * the size of the forward's two). There is no standard-attention backward
 * to compare with: the standard columns are n/a.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "reference/random.h"
#include "tool/tool.h"

typedef struct {
    flashattn_tensor q, k, v, o, dout, dq, dk, dv;
    float *lse;
    flashattn_params p;
    void *ws_fwd, *ws_bwd;
    size_t fwd_bytes, bwd_bytes;
    int have_o;    /* the forward has written O and LSE */
    char err[256]; /* the first failure's message */
} bwd_ctx;

static int failed(bwd_ctx *x, flashattn_status s) {
    if (s != FLASHATTN_OK && !x->err[0]) snprintf(x->err, sizeof x->err, "%s", flashattn_last_error());
    return s != FLASHATTN_OK;
}

static int run_fwd(void *c) {
    bwd_ctx *x = c;
    if (failed(x, flashattn_fwd(&x->q, &x->k, &x->v, &x->o, x->lse, &x->p, x->ws_fwd, x->fwd_bytes)))
        return 1;
    x->have_o = 1;
    return 0;
}

/* Never on inputs the forward did not write. */
static int run_bwd(void *c) {
    bwd_ctx *x = c;
    return !x->have_o || failed(x, flashattn_bwd(&x->q, &x->k, &x->v, &x->o, &x->dout, x->lse, &x->dq,
                                                 &x->dk, &x->dv, &x->p, x->ws_bwd, x->bwd_bytes));
}

static flashattn_tensor alloc_bshd(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d) {
    size_t n = (size_t)(b * s * h * d) * flashattn_dtype_size(dt);
    return flashattn_tensor_bshd(malloc(n ? n : 1), dt, b, s, h, d);
}

/* (q, k) pairs the mask lets through, by the library's own mask rules. */
static double visible_pairs(const bwd_ctx *x) {
    const double n = fa_tool_visible_pairs(&x->q, &x->k, &x->v, &x->o, &x->p);
    return n > 0.0 ? n : 0.0;
}

int bench_bwd(const bench_opts *o, int64_t seq_q, int64_t seq_k, bench_row *row) {
    bwd_ctx x;
    int rc = 1;
    uint64_t seed = 0x5eed;
    memset(&x, 0, sizeof x);
    bench_row_start(row, seq_q, seq_k);
    x.q = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    x.k = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.v = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.o = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    x.dout = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    x.dq = alloc_bshd(o->dtype, o->batch, seq_q, o->heads, o->head_dim);
    x.dk = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.dv = alloc_bshd(o->dtype, o->batch, seq_k, o->heads_kv, o->head_dim);
    x.lse = calloc((size_t)(o->batch * o->heads * seq_q + 1), sizeof(float));
    fa_fill_normal(&x.q, &seed, 1.0);
    fa_fill_normal(&x.k, &seed, 1.0);
    fa_fill_normal(&x.v, &seed, 1.0);
    fa_fill_normal(&x.dout, &seed, 1.0);
    x.p = flashattn_params_default();
    x.p.causal = o->causal;
    x.p.num_threads = o->threads;
    row->flops = 2.5 * 4.0 * (double)o->batch * (double)o->heads * visible_pairs(&x) *
                 (double)o->head_dim;
    snprintf(row->note, sizeof row->note, "standard: no backward baseline");

    flashattn_status s = flashattn_fwd_workspace_size(&x.q, &x.k, &x.v, &x.o, x.lse, &x.p, &x.fwd_bytes);
    if (!s)
        s = flashattn_bwd_workspace_size(&x.q, &x.k, &x.v, &x.o, &x.dout, x.lse, &x.dq, &x.dk, &x.dv,
                                         &x.p, &x.bwd_bytes);
    if (s || !(x.ws_fwd = malloc(x.fwd_bytes ? x.fwd_bytes : 1)) ||
        !(x.ws_bwd = malloc(x.bwd_bytes ? x.bwd_bytes : 1))) {
        fprintf(stderr, "flashattn bench: %s\n", s ? flashattn_last_error() : "no memory for the workspaces");
        goto done;
    }
    row->workspace_bytes = x.bwd_bytes;
    /* Forward and backward in turn (the forward first: its O and LSE are
     * the backward's inputs, the same every time), so bwd / fwd compares
     * calls made at the same moments. */
    bench_call calls[3] = {{run_fwd, &x, -1.0}, {run_bwd, &x, -1.0}};
    bench_peak_probe probe = {o->peak_kernels, o->peak_loop, o->threads, &calls[1].ms, 0, 0};
    int ncalls = 2;
    if (o->peak_kernels) calls[ncalls++] = (bench_call){bench_peak_probe_run, &probe, -1.0};
    bench_time_together(calls, ncalls, o->reps);
    row->fwd_ms = calls[0].ms;
    if (ncalls > 2) row->peak_gflops = bench_peak_probe_gflops(&probe, calls[2].ms);
    row->flash_ms = row->fwd_ms < 0 ? -1.0 : calls[1].ms;
    if (row->flash_ms < 0) {
        fprintf(stderr, "flashattn bench: %s failed: %s\n", row->fwd_ms < 0 ? "flashattn_fwd" : "flashattn_bwd",
                x.err);
        goto done;
    }
    size_t n = strlen(row->note);
    snprintf(row->note + n, sizeof row->note - n, "; forward %.3f ms, bwd/fwd %.2f", row->fwd_ms,
             row->flash_ms / row->fwd_ms);
    rc = 0;
done:
    free(x.ws_fwd), free(x.ws_bwd), free(x.lse);
    free(x.q.data), free(x.k.data), free(x.v.data), free(x.o.data);
    free(x.dout.data), free(x.dq.data), free(x.dk.data), free(x.dv.data);
    return rc;
}
