/*
 * The calls of `flashattn bench --varlen`, and the check of varlen against
 * the per-sequence dense calls (bench_varlen.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_varlen.h"
#include "reference/attn_f64.h"
#include "tool/tool.h"

flashattn_tensor vl_rows_of(const flashattn_tensor *t, int64_t r0, int64_t n) {
    flashattn_tensor v = *t;
    v.data = (char *)t->data + (size_t)(r0 * t->stride_seq) * flashattn_dtype_size(t->dtype);
    v.seqlen = n;
    return v;
}

/* ---- the calls ----------------------------------------------------------- */

static int failed(vl_call *c, flashattn_status s) {
    if (s != FLASHATTN_OK && !c->err[0])
        snprintf(c->err, sizeof c->err, "%s (%s)", flashattn_last_error(), flashattn_strerror(s));
    return s != FLASHATTN_OK;
}

/* The variant's forward; with need != NULL only its workspace size (the
 * most any of its calls needs). */
static flashattn_status fwd_of(vl_call *c, size_t *need) {
    const vl_out *x = c->x;
    if (c->variant != VL_PERSEQ)
        return need ? flashattn_fwd_workspace_size(&x->q, &x->k, &x->v, &x->o, x->lse, &c->p, need)
                    : flashattn_fwd(&x->q, &x->k, &x->v, &x->o, x->lse, &c->p, c->ws, c->ws_bytes);
    size_t most = 0, n = 0;
    for (int64_t i = 0; i < c->b->n; i++) {
        const int64_t r0 = c->b->cu[i], len = c->b->len[i];
        const flashattn_tensor q = vl_rows_of(&x->q, r0, len), k = vl_rows_of(&x->k, r0, len),
                               v = vl_rows_of(&x->v, r0, len), o = vl_rows_of(&x->o, r0, len);
        float *lse = x->lse + r0 * x->q.heads; /* this sequence's [heads, len] */
        flashattn_status s = need ? flashattn_fwd_workspace_size(&q, &k, &v, &o, lse, &c->p, &n)
                                  : flashattn_fwd(&q, &k, &v, &o, lse, &c->p, c->ws, c->ws_bytes);
        if (s) return s;
        if (n > most) most = n;
    }
    if (need) *need = most;
    return FLASHATTN_OK;
}

static flashattn_status bwd_of(vl_call *c, size_t *need) {
    const vl_out *x = c->x;
    if (c->variant != VL_PERSEQ)
        return need ? flashattn_bwd_workspace_size(&x->q, &x->k, &x->v, &x->o, &x->dout, x->lse,
                                                   &x->dq, &x->dk, &x->dv, &c->p, need)
                    : flashattn_bwd(&x->q, &x->k, &x->v, &x->o, &x->dout, x->lse, &x->dq, &x->dk,
                                    &x->dv, &c->p, c->bws, c->bws_bytes);
    size_t most = 0, n = 0;
    for (int64_t i = 0; i < c->b->n; i++) {
        const int64_t r0 = c->b->cu[i], len = c->b->len[i];
        const flashattn_tensor q = vl_rows_of(&x->q, r0, len), k = vl_rows_of(&x->k, r0, len),
                               v = vl_rows_of(&x->v, r0, len), o = vl_rows_of(&x->o, r0, len),
                               dout = vl_rows_of(&x->dout, r0, len), dq = vl_rows_of(&x->dq, r0, len),
                               dk = vl_rows_of(&x->dk, r0, len), dv = vl_rows_of(&x->dv, r0, len);
        const float *lse = x->lse + r0 * x->q.heads;
        flashattn_status s =
            need ? flashattn_bwd_workspace_size(&q, &k, &v, &o, &dout, lse, &dq, &dk, &dv, &c->p, &n)
                 : flashattn_bwd(&q, &k, &v, &o, &dout, lse, &dq, &dk, &dv, &c->p, c->bws, c->bws_bytes);
        if (s) return s;
        if (n > most) most = n;
    }
    if (need) *need = most;
    return FLASHATTN_OK;
}

/* Grow the call's workspaces to what its current params need (outside
 * the timed rounds). 0, or -1 with the reason in c->err. */
int vl_prepare(vl_call *c, int bwd) {
    size_t need = 0;
    if (failed(c, fwd_of(c, &need))) return -1;
    if (need > c->ws_bytes || !c->ws) {
        free(c->ws);
        if (!(c->ws = malloc(need ? need : 1)))
            return snprintf(c->err, sizeof c->err, "no memory for a %zu-byte workspace", need), -1;
        c->ws_bytes = need;
    }
    if (!bwd) return 0;
    if (failed(c, bwd_of(c, &need))) return -1;
    if (need > c->bws_bytes || !c->bws) {
        free(c->bws);
        if (!(c->bws = malloc(need ? need : 1)))
            return snprintf(c->err, sizeof c->err, "no memory for a %zu-byte workspace", need), -1;
        c->bws_bytes = need;
    }
    return 0;
}

int vl_run_fwd(void *c) { return failed(c, fwd_of(c, NULL)); }
int vl_run_bwd(void *c) { return failed(c, bwd_of(c, NULL)); }

/* ---- the check: varlen against the per-sequence calls -------------------- */

/* max |a - b| over two tensors of one shape; *same cleared unless the
 * bytes are equal. */
static double tensor_diff(const flashattn_tensor *a, const flashattn_tensor *b, int *same) {
    const size_t n = (size_t)(a->batch * a->seqlen * a->heads * a->head_dim);
    if (memcmp(a->data, b->data, n * flashattn_dtype_size(a->dtype))) *same = 0;
    double m = 0.0;
    for (int64_t s = 0; s < a->seqlen; s++)
        for (int64_t h = 0; h < a->heads; h++)
            for (int64_t c = 0; c < a->head_dim; c++) {
                const double e = fabs(fa_tensor_get(a, 0, s, h, c) - fa_tensor_get(b, 0, s, h, c));
                if (!(e <= m)) m = e; /* NaN sticks */
            }
    return m;
}

/* varlen's LSE [heads, total] against the per-sequence [heads, len] blocks. */
static double lse_diff(const vl_batch *b, int64_t heads, const float *var, const float *seq, int *same) {
    double m = 0.0;
    for (int64_t i = 0; i < b->n; i++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t r = 0; r < b->len[i]; r++) {
                const float x = var[h * b->total + b->cu[i] + r], y = seq[heads * b->cu[i] + h * b->len[i] + r];
                if (memcmp(&x, &y, sizeof x)) *same = 0;
                const double e = x == y ? 0.0 : fabs((double)x - (double)y);
                if (!(e <= m)) m = e;
            }
    return m;
}

/* Run varlen and per-seq with p (forward, then the backward under --bwd)
 * and compare their outputs: O, LSE or dQ, dK, dV. 1 when bit-identical,
 * 0 when not, -1 when a call failed (printed). */
static int check_once(const vl_opts *o, vl_call *var, vl_call *seq, const flashattn_params *p,
                      double diff[3]) {
    vl_call *both[2] = {var, seq};
    for (int i = 0; i < 2; i++) {
        const flashattn_varlen *vl = both[i]->p.varlen;
        both[i]->p = *p;
        both[i]->p.varlen = vl;
        if (vl_prepare(both[i], o->bwd) || vl_run_fwd(both[i]) || (o->bwd && vl_run_bwd(both[i]))) {
            fprintf(stderr, "flashattn bench --varlen: %s call failed: %s\n",
                    vl_variant_name(both[i]->variant), both[i]->err);
            return -1;
        }
    }
    int same = 1;
    if (o->bwd) {
        diff[0] = tensor_diff(&var->x->dq, &seq->x->dq, &same);
        diff[1] = tensor_diff(&var->x->dk, &seq->x->dk, &same);
        diff[2] = tensor_diff(&var->x->dv, &seq->x->dv, &same);
    } else {
        diff[0] = tensor_diff(&var->x->o, &seq->x->o, &same);
        diff[1] = lse_diff(var->b, o->heads, var->x->lse, seq->x->lse, &same);
        diff[2] = 0.0;
    }
    return same;
}

/* The check of one (mask, threads): tiles given in full, or those
 * varlen's plan picks, on both calls (the backward deterministic: the
 * order of dq's sums is then fixed), must give the same bits; then, when
 * the timed calls leave a tile automatic, those params too (max |diff|). */
int vl_check_config(const vl_opts *o, vl_call *var, vl_call *seq, const flashattn_params *timed,
                        vl_row *row) {
    fa_tool_fwd_plan plan;
    flashattn_params p = *timed;
    p.varlen = &var->b->varlen;
    if (fa_tool_plan_fwd(&var->x->q, &var->x->k, &var->x->v, &var->x->o, &p, fa_active_kernels(),
                         &plan) != FLASHATTN_OK) {
        fprintf(stderr, "flashattn bench --varlen: planning the varlen call: %s\n", flashattn_last_error());
        return -1;
    }
    p.block_m = row->bm = plan.block_m;
    p.block_n = row->bn = plan.block_n;
    p.deterministic = 1;
    if ((row->bits = check_once(o, var, seq, &p, row->bits_diff)) < 0) return -1;
    row->have_auto = !timed->block_m || !timed->block_n;
    if (row->have_auto && check_once(o, var, seq, timed, row->auto_diff) < 0) return -1;
    return 0;
}
