/*
 * The ring forward (Liu et al. 2023): at step t each rank holds the K/V
 * shard of rank r - t and computes its slices of rows against the runs of
 * that shard they see, merging each block's O and LSE into its rows
 * (flashattn_merge: exact up to f32 rounding, in step order); the shard
 * for step t + 1 travels from rank r - 1 meanwhile, into the other buffer.
 */
#include <math.h>
#include <stdlib.h>

#include "mpi/ring.h"

typedef struct {
    void *kv[2];
    float *acc_o, *acc_lse; /* [batch, rows, heads_q, head_dim_v]; slice-major LSE */
    float *part_o, *part_lse;
    void *ws;
    size_t ws_bytes;
} fwd_bufs;

static flashattn_status check_local(const flashattn_tensor *q, const flashattn_tensor *k,
                                    const flashattn_tensor *v, const flashattn_tensor *o, const float *lse,
                                    const flashattn_params *core) {
    size_t ws;
    if (!q || !k || !v || !o) return ring_fail(FLASHATTN_ERR_NULL_POINTER, "q, k, v or o is NULL");
    if (k->seqlen != q->seqlen || v->seqlen != q->seqlen || o->seqlen != q->seqlen)
        return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "q, k, v and o must hold the same rows (%lld, %lld, %lld, %lld)",
                         (long long)q->seqlen, (long long)k->seqlen, (long long)v->seqlen, (long long)o->seqlen);
    flashattn_status s = flashattn_fwd_workspace_size(q, k, v, o, lse, core, &ws);
    return s ? ring_fail(s, "%s", flashattn_last_error()) : FLASHATTN_OK;
}

/* The largest workspace any block of the ring asks for. */
static flashattn_status size_workspace(const ring_ctx *c, const flashattn_tensor *q, const fwd_bufs *b,
                                       size_t *bytes) {
    *bytes = 0;
    for (int sl = 0; sl < c->nslices; sl++)
        for (int src = 0; src < c->ranks; src++)
            for (int i = 0; i < c->nruns[src]; i++) {
                const ring_slice *x = &c->slices[sl];
                int64_t n;
                int causal;
                if (!ring_keys(c, x, &c->runs[2 * src + i], &n, &causal)) continue;
                flashattn_tensor kb, vb, qv = ring_rows_of(q, x->row, x->len);
                ring_kv_views(c, b->kv[0], n, &kb, &vb);
                flashattn_tensor po = ring_dense(b->part_o, FLASHATTN_F32, c->batch, x->len, c->heads_q, c->head_dim_v);
                flashattn_params p = c->core;
                p.causal = causal;
                size_t w;
                flashattn_status s = flashattn_fwd_workspace_size(&qv, &kb, &vb, &po, b->part_lse, &p, &w);
                if (s) return s;
                if (w > *bytes) *bytes = w;
            }
    return FLASHATTN_OK;
}

static int alloc_bufs(ring_ctx *c, const flashattn_tensor *q, fwd_bufs *b) {
    const size_t rows = (size_t)c->rows[c->rank], kvb = ring_kv_bytes(c, c->max_rows);
    const size_t orow = (size_t)(c->batch * c->heads_q * c->head_dim_v), lrow = (size_t)(c->batch * c->heads_q);
    b->kv[0] = malloc(kvb ? kvb : 1);
    b->kv[1] = malloc(kvb ? kvb : 1);
    b->acc_o = malloc(sizeof(float) * (rows * orow + 1));
    b->acc_lse = malloc(sizeof(float) * (rows * lrow + 1));
    b->part_o = malloc(sizeof(float) * ((size_t)c->max_slice * orow + 1));
    b->part_lse = malloc(sizeof(float) * ((size_t)c->max_slice * lrow + 1));
    if (!b->kv[0] || !b->kv[1] || !b->acc_o || !b->acc_lse || !b->part_o || !b->part_lse) return 0;
    if (size_workspace(c, q, b, &b->ws_bytes)) return 0;
    b->ws = b->ws_bytes ? malloc(b->ws_bytes) : NULL;
    if (b->ws_bytes && !b->ws) return 0;
    for (size_t i = 0; i < rows * lrow; i++) b->acc_lse[i] = -INFINITY; /* no key seen yet */
    c->st.buffer_bytes = (int64_t)(2 * kvb + sizeof(float) * (rows + (size_t)c->max_slice) * (orow + lrow) +
                                   b->ws_bytes);
    return 1;
}

static void free_bufs(fwd_bufs *b) {
    free(b->kv[0]);
    free(b->kv[1]);
    free(b->acc_o);
    free(b->acc_lse);
    free(b->part_o);
    free(b->part_lse);
    free(b->ws);
}

/* One block: slice x against the first n keys of the shard's run kr,
 * merged into the slice's rows. */
static flashattn_status block(ring_ctx *c, const flashattn_tensor *q, const ring_slice *x,
                              const flashattn_tensor *kb, const flashattn_tensor *vb, const ring_run *kr,
                              int64_t n, int causal, fwd_bufs *b) {
    const double t = MPI_Wtime();
    flashattn_params p = c->core;
    p.causal = causal;
    const flashattn_tensor qv = ring_rows_of(q, x->row, x->len);
    const flashattn_tensor kv = ring_rows_of(kb, kr->row, n), vv = ring_rows_of(vb, kr->row, n);
    const flashattn_tensor acc = ring_dense(b->acc_o, FLASHATTN_F32, c->batch, c->rows[c->rank], c->heads_q,
                                            c->head_dim_v);
    const flashattn_tensor parts[2] = {
        ring_rows_of(&acc, x->row, x->len),
        ring_dense(b->part_o, FLASHATTN_F32, c->batch, x->len, c->heads_q, c->head_dim_v)};
    float *al = b->acc_lse + x->lse_at;
    const float *lses[2] = {al, b->part_lse};
    flashattn_status s = flashattn_fwd(&qv, &kv, &vv, &parts[1], b->part_lse, &p, b->ws, b->ws_bytes);
    if (!s) s = flashattn_merge(2, parts, lses, &parts[0], al, &p);
    c->st.compute_seconds += MPI_Wtime() - t;
    return s ? ring_fail(s, "a block of the ring failed: %s", flashattn_last_error()) : FLASHATTN_OK;
}

static flashattn_status run_ring(ring_ctx *c, const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, fwd_bufs *b) {
    flashattn_status failed = FLASHATTN_OK;
    MPI_Request req[4 * RING_MAX_PARTS];
    flashattn_tensor kb, vb;
    int cur = 0;
    ring_kv_views(c, b->kv[0], c->rows[c->rank], &kb, &vb);
    ring_copy_rows(k, 0, &kb, 0, c->rows[c->rank]);
    ring_copy_rows(v, 0, &vb, 0, c->rows[c->rank]);
    for (int t = 0; t < c->ranks; t++) {
        const int src = ring_src(c, t);
        int nreq = 0;
        if (t + 1 < c->ranks) {
            nreq += ring_irecv(c, b->kv[cur ^ 1], ring_kv_bytes(c, c->rows[ring_src(c, t + 1)]), ring_prev(c),
                               RING_TAG_KV, req + nreq);
            nreq += ring_isend(c, b->kv[cur], ring_kv_bytes(c, c->rows[src]), ring_next(c), RING_TAG_KV,
                               req + nreq);
        }
        ring_kv_views(c, b->kv[cur], c->rows[src], &kb, &vb);
        for (int sl = 0; sl < c->nslices && !failed; sl++)
            for (int i = 0; i < c->nruns[src] && !failed; i++) {
                const ring_run *kr = &c->runs[2 * src + i];
                int64_t n;
                int causal;
                if (!ring_keys(c, &c->slices[sl], kr, &n, &causal)) continue;
                failed = block(c, q, &c->slices[sl], &kb, &vb, kr, n, causal, b);
                ring_progress(nreq, req);
            }
        ring_wait(c, nreq, req);
        cur ^= 1;
    }
    return failed;
}

/* The merged rows into o (rounded once to its dtype) and lse. */
static flashattn_status write_out(const ring_ctx *c, const fwd_bufs *b, const flashattn_tensor *o, float *lse) {
    const int64_t rows = c->rows[c->rank], hq = c->heads_q;
    const flashattn_tensor acc = ring_dense(b->acc_o, FLASHATTN_F32, c->batch, rows, hq, c->head_dim_v);
    flashattn_params p = c->core;
    for (int sl = 0; sl < c->nslices; sl++) {
        const ring_slice *x = &c->slices[sl];
        const flashattn_tensor from = ring_rows_of(&acc, x->row, x->len), to = ring_rows_of(o, x->row, x->len);
        const float *al = b->acc_lse + x->lse_at;
        /* one part by its own LSE: weight exactly 1, O = 0 where it is -inf */
        flashattn_status s = flashattn_merge(1, &from, &al, &to, NULL, &p);
        if (s) return ring_fail(s, "writing o: %s", flashattn_last_error());
        if (lse)
            for (int64_t bh = 0; bh < c->batch * hq; bh++)
                for (int64_t i = 0; i < x->len; i++) lse[bh * rows + x->row + i] = al[bh * x->len + i];
    }
    return FLASHATTN_OK;
}

flashattn_status flashattn_ring_fwd(const flashattn_ring *ring, const flashattn_tensor *q,
                                    const flashattn_tensor *k, const flashattn_tensor *v,
                                    const flashattn_tensor *o, float *lse, const flashattn_params *p) {
    flashattn_params core;
    ring_ctx c;
    fwd_bufs b = {0};
    ring_clear_error();
    flashattn_status s = ring_check_struct(ring);
    if (s) return s;
    ring_offer mine = {RING_FWD, FLASHATTN_OK, NULL, q, k, v};
    mine.status = ring_read_params(p, &core);
    if (!mine.status) mine.status = check_local(q, k, v, o, lse, &core);
    mine.why = flashattn_ring_last_error();
    if ((s = ring_agree(ring, &mine, &core, &c))) return s;
    if ((s = ring_agree_alloc(&c, alloc_bufs(&c, q, &b)))) {
        free_bufs(&b);
        return s;
    }
    s = run_ring(&c, q, k, v, &b);
    s = ring_all_ran(&c, s); /* nothing is written unless every rank's blocks ran */
    if (!s) s = write_out(&c, &b, o, lse);
    ring_report(&c, ring);
    free_bufs(&b);
    ring_ctx_free(&c);
    return s;
}
