/*
 * The ring backward. With the forward's O and LSE (the whole sequence's),
 * the gradient of one block, rows of this rank against keys of another's
 * shard, is exactly the block's share of the sums (P = exp(S - LSE) and
 * D = rowsum(dO * O) are the whole row's): dQ collects the blocks of every
 * step on its rank, dK and dV those of every rank their shard visits. So
 * the shard travels with an f32 dK/dV sum: at step t rank r adds its
 * blocks against shard r - t to the sum that arrives from rank r - 1 and
 * passes it on; after the last step each sum reaches its shard's owner.
 * K/V for step t + 1 travel during step t, as in the forward; the sum can
 * only leave once its step is done, so a rank computes its blocks into
 * its own buffer first and waits for the arriving sum last.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi/ring.h"

typedef struct {
    void *kv[2];
    float *step[2]; /* this rank's blocks against the visiting shard (dK then dV), two steps in flight */
    float *in;      /* the visiting shard's sum, arriving */
    float *dq;      /* [batch, rows, heads_q, head_dim] */
    float *lse;     /* slice-major copy of the forward's */
    float *dq_part, *dk_part, *dv_part, *zeros;
    void *ws;
    size_t ws_bytes;
} bwd_bufs;

static flashattn_status check_local(const flashattn_tensor *q, const flashattn_tensor *k,
                                    const flashattn_tensor *v, const flashattn_tensor *o,
                                    const flashattn_tensor *dout, const float *lse, const flashattn_tensor *dq,
                                    const flashattn_tensor *dk, const flashattn_tensor *dv,
                                    const flashattn_params *core) {
    size_t ws;
    if (!q || !k || !v || !o || !dout || !dq || !dk || !dv)
        return ring_fail(FLASHATTN_ERR_NULL_POINTER, "a tensor is NULL");
    const int64_t r = q->seqlen;
    if (k->seqlen != r || v->seqlen != r || o->seqlen != r || dout->seqlen != r || dq->seqlen != r ||
        dk->seqlen != r || dv->seqlen != r)
        return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "every tensor must hold this rank's %lld rows", (long long)r);
    flashattn_status s = flashattn_bwd_workspace_size(q, k, v, o, dout, lse, dq, dk, dv, core, &ws);
    return s ? ring_fail(s, "%s", flashattn_last_error()) : FLASHATTN_OK;
}

static size_t dkv_floats(const ring_ctx *c, int64_t rows) {
    return (size_t)(c->batch * rows * c->heads_kv * (c->head_dim + c->head_dim_v));
}

/* A shard's dK and dV sums in f32: dK [batch, rows, heads_kv, head_dim], then dV. */
static void dkv_views(const ring_ctx *c, float *buf, int64_t rows, flashattn_tensor *dk, flashattn_tensor *dv) {
    *dk = ring_dense(buf, FLASHATTN_F32, c->batch, rows, c->heads_kv, c->head_dim);
    *dv = ring_dense(buf + (size_t)(c->batch * rows * c->heads_kv * c->head_dim), FLASHATTN_F32, c->batch, rows,
                     c->heads_kv, c->head_dim_v);
}

/* The block views of slice x against n keys: every tensor the core call takes. */
typedef struct {
    flashattn_tensor q, k, v, o, dout, dq, dk, dv;
    flashattn_params p;
} block_views;

static void views_of(const ring_ctx *c, const flashattn_tensor *q, const flashattn_tensor *o,
                     const flashattn_tensor *dout, const ring_slice *x, const flashattn_tensor *kb,
                     const flashattn_tensor *vb, const ring_run *kr, int64_t n, int causal, const bwd_bufs *b,
                     block_views *w) {
    w->q = ring_rows_of(q, x->row, x->len);
    w->o = ring_rows_of(o, x->row, x->len);
    w->dout = ring_rows_of(dout, x->row, x->len);
    w->k = ring_rows_of(kb, kr->row, n);
    w->v = ring_rows_of(vb, kr->row, n);
    w->dq = ring_dense(b->dq_part, FLASHATTN_F32, c->batch, x->len, c->heads_q, c->head_dim);
    w->dk = ring_dense(b->dk_part, FLASHATTN_F32, c->batch, n, c->heads_kv, c->head_dim);
    w->dv = ring_dense(b->dv_part, FLASHATTN_F32, c->batch, n, c->heads_kv, c->head_dim_v);
    w->p = c->core;
    w->p.causal = causal;
}

static flashattn_status size_workspace(const ring_ctx *c, const flashattn_tensor *q, const flashattn_tensor *o,
                                       const flashattn_tensor *dout, const bwd_bufs *b, size_t *bytes) {
    *bytes = 0;
    for (int sl = 0; sl < c->nslices; sl++)
        for (int src = 0; src < c->ranks; src++)
            for (int i = 0; i < c->nruns[src]; i++) {
                const ring_run *kr = &c->runs[2 * src + i];
                int64_t n;
                int causal;
                if (!ring_keys(c, &c->slices[sl], kr, &n, &causal)) continue;
                flashattn_tensor kb, vb;
                ring_kv_views(c, b->kv[0], kr->row + n, &kb, &vb);
                block_views w;
                size_t ws;
                views_of(c, q, o, dout, &c->slices[sl], &kb, &vb, kr, n, causal, b, &w);
                flashattn_status s = flashattn_bwd_workspace_size(&w.q, &w.k, &w.v, &w.o, &w.dout, b->lse, &w.dq,
                                                                  &w.dk, &w.dv, &w.p, &ws);
                if (s) return s;
                if (ws > *bytes) *bytes = ws;
            }
    return FLASHATTN_OK;
}

static int alloc_bufs(ring_ctx *c, const flashattn_tensor *q, const flashattn_tensor *o,
                      const flashattn_tensor *dout, const float *lse, bwd_bufs *b) {
    const int64_t rows = c->rows[c->rank];
    const size_t kvb = ring_kv_bytes(c, c->max_rows), dkv = dkv_floats(c, c->max_rows) + 1;
    const size_t qrow = (size_t)(c->batch * c->heads_q * c->head_dim), lrow = (size_t)(c->batch * c->heads_q);
    const size_t kvrow = (size_t)(c->batch * c->heads_kv);
    size_t nz = lrow * (size_t)c->max_slice;
    if (kvrow * (size_t)rows > nz) nz = kvrow * (size_t)rows;
    b->kv[0] = malloc(kvb ? kvb : 1);
    b->kv[1] = malloc(kvb ? kvb : 1);
    b->step[0] = malloc(sizeof(float) * dkv);
    b->step[1] = malloc(sizeof(float) * dkv);
    b->in = malloc(sizeof(float) * dkv);
    b->dq = malloc(sizeof(float) * ((size_t)rows * qrow + 1));
    b->lse = malloc(sizeof(float) * ((size_t)rows * lrow + 1));
    b->dq_part = malloc(sizeof(float) * ((size_t)c->max_slice * qrow + 1));
    b->dk_part = malloc(sizeof(float) * ((size_t)c->max_rows * kvrow * (size_t)c->head_dim + 1));
    b->dv_part = malloc(sizeof(float) * ((size_t)c->max_rows * kvrow * (size_t)c->head_dim_v + 1));
    b->zeros = calloc(nz + 1, sizeof(float));
    if (!b->kv[0] || !b->kv[1] || !b->step[0] || !b->step[1] || !b->in || !b->dq || !b->lse || !b->dq_part ||
        !b->dk_part || !b->dv_part || !b->zeros)
        return 0;
    if (size_workspace(c, q, o, dout, b, &b->ws_bytes)) return 0;
    b->ws = b->ws_bytes ? malloc(b->ws_bytes) : NULL;
    if (b->ws_bytes && !b->ws) return 0;
    memset(b->dq, 0, sizeof(float) * (size_t)rows * qrow);
    c->st.buffer_bytes =
        (int64_t)(2 * kvb + sizeof(float) * (3 * dkv + (size_t)rows * (qrow + lrow) + (size_t)c->max_slice * qrow +
                                             (size_t)c->max_rows * kvrow * (size_t)(c->head_dim + c->head_dim_v) + nz) +
                  b->ws_bytes);
    for (int sl = 0; sl < c->nslices; sl++) { /* the forward's LSE, slice-major */
        const ring_slice *x = &c->slices[sl];
        for (int64_t bh = 0; bh < c->batch * c->heads_q; bh++)
            memcpy(b->lse + x->lse_at + bh * x->len, lse + bh * rows + x->row, sizeof(float) * (size_t)x->len);
    }
    return 1;
}

static void free_bufs(bwd_bufs *b) {
    void *all[] = {b->kv[0], b->kv[1], b->step[0], b->step[1], b->in, b->dq, b->lse,
                   b->dq_part, b->dk_part, b->dv_part, b->zeros, b->ws};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

static void add_rows(const flashattn_tensor *x, const flashattn_tensor *acc) {
    /* both f32, contiguous in their last three dimensions */
    const int64_t n = x->seqlen * x->heads * x->head_dim;
    for (int64_t b = 0; b < x->batch; b++) {
        const float *s = (const float *)x->data + b * x->stride_batch;
        float *d = (float *)acc->data + b * acc->stride_batch;
        for (int64_t i = 0; i < n; i++) d[i] += s[i];
    }
}

/* One block: slice x against the first n keys of run kr; its dQ into the
 * rank's, its dK and dV into the step's sums of the shard (sum). */
static flashattn_status block(ring_ctx *c, const flashattn_tensor *q, const flashattn_tensor *o,
                              const flashattn_tensor *dout, const ring_slice *x, const flashattn_tensor *kb,
                              const flashattn_tensor *vb, const ring_run *kr, int64_t n, int causal,
                              const flashattn_tensor *sum_k, const flashattn_tensor *sum_v, bwd_bufs *b) {
    const double t = MPI_Wtime();
    block_views w;
    views_of(c, q, o, dout, x, kb, vb, kr, n, causal, b, &w);
    flashattn_status s = flashattn_bwd(&w.q, &w.k, &w.v, &w.o, &w.dout, b->lse + x->lse_at, &w.dq, &w.dk, &w.dv,
                                       &w.p, b->ws, b->ws_bytes);
    if (!s) {
        const flashattn_tensor dq = ring_dense(b->dq, FLASHATTN_F32, c->batch, c->rows[c->rank], c->heads_q,
                                               c->head_dim);
        const flashattn_tensor dq_rows = ring_rows_of(&dq, x->row, x->len);
        const flashattn_tensor sk = ring_rows_of(sum_k, kr->row, n), sv = ring_rows_of(sum_v, kr->row, n);
        add_rows(&w.dq, &dq_rows);
        add_rows(&w.dk, &sk);
        add_rows(&w.dv, &sv);
    }
    c->st.compute_seconds += MPI_Wtime() - t;
    return s ? ring_fail(s, "a block of the ring failed: %s", flashattn_last_error()) : FLASHATTN_OK;
}

static flashattn_status run_ring(ring_ctx *c, const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 const flashattn_tensor *dout, bwd_bufs *b, float **home) {
    flashattn_status failed = FLASHATTN_OK;
    MPI_Request kvreq[2 * RING_MAX_PARTS], inreq[RING_MAX_PARTS], outreq[2][RING_MAX_PARTS];
    int nout[2] = {0, 0}, cur = 0;
    flashattn_tensor kb, vb, sk, sv;
    ring_kv_views(c, b->kv[0], c->rows[c->rank], &kb, &vb);
    ring_copy_rows(k, 0, &kb, 0, c->rows[c->rank]);
    ring_copy_rows(v, 0, &vb, 0, c->rows[c->rank]);
    for (int t = 0; t < c->ranks; t++) {
        const int src = ring_src(c, t), st = t & 1;
        const int64_t rows = c->rows[src];
        int nkv = 0, nin = 0;
        if (t + 1 < c->ranks) {
            nkv += ring_irecv(c, b->kv[cur ^ 1], ring_kv_bytes(c, c->rows[ring_src(c, t + 1)]), ring_prev(c),
                              RING_TAG_KV, kvreq + nkv);
            nkv += ring_isend(c, b->kv[cur], ring_kv_bytes(c, rows), ring_next(c), RING_TAG_KV, kvreq + nkv);
        }
        if (t > 0) nin = ring_irecv(c, b->in, sizeof(float) * dkv_floats(c, rows), ring_prev(c), RING_TAG_DKV, inreq);
        ring_wait(c, nout[st], outreq[st]); /* the step buffer's last send, two steps ago */
        nout[st] = 0;
        memset(b->step[st], 0, sizeof(float) * dkv_floats(c, rows));
        dkv_views(c, b->step[st], rows, &sk, &sv);
        ring_kv_views(c, b->kv[cur], rows, &kb, &vb);
        for (int sl = 0; sl < c->nslices && !failed; sl++)
            for (int i = 0; i < c->nruns[src] && !failed; i++) {
                const ring_run *kr = &c->runs[2 * src + i];
                int64_t n;
                int causal;
                if (!ring_keys(c, &c->slices[sl], kr, &n, &causal)) continue;
                failed = block(c, q, o, dout, &c->slices[sl], &kb, &vb, kr, n, causal, &sk, &sv, b);
                ring_progress(nkv, kvreq);
                ring_progress(nin, inreq);
            }
        if (t > 0) { /* the sum so far, from the ranks this shard visited before */
            ring_wait(c, nin, inreq);
            float *s = b->step[st];
            const size_t nf = dkv_floats(c, rows);
            for (size_t i = 0; i < nf; i++) s[i] += b->in[i];
        }
        if (c->ranks > 1)
            nout[st] = ring_isend(c, b->step[st], sizeof(float) * dkv_floats(c, rows), ring_next(c), RING_TAG_DKV,
                                  outreq[st]);
        ring_wait(c, nkv, kvreq);
        cur ^= 1;
    }
    if (c->ranks > 1) { /* this rank's own shard, back from its last visit */
        int nin = ring_irecv(c, b->in, sizeof(float) * dkv_floats(c, c->rows[c->rank]), ring_prev(c), RING_TAG_DKV,
                             inreq);
        ring_wait(c, nin, inreq);
        *home = b->in;
    } else {
        *home = b->step[0];
    }
    ring_wait(c, nout[0], outreq[0]);
    ring_wait(c, nout[1], outreq[1]);
    return failed;
}

static flashattn_status write_out(const ring_ctx *c, const bwd_bufs *b, const float *home,
                                  const flashattn_tensor *dq, const flashattn_tensor *dk,
                                  const flashattn_tensor *dv) {
    const int64_t rows = c->rows[c->rank];
    const int th = c->core.num_threads;
    flashattn_tensor sk, sv;
    const flashattn_tensor acc = ring_dense(b->dq, FLASHATTN_F32, c->batch, rows, c->heads_q, c->head_dim);
    dkv_views(c, (float *)home, rows, &sk, &sv);
    flashattn_status s = FLASHATTN_OK;
    for (int sl = 0; sl < c->nslices && !s; sl++) {
        const ring_slice *x = &c->slices[sl];
        const flashattn_tensor from = ring_rows_of(&acc, x->row, x->len), to = ring_rows_of(dq, x->row, x->len);
        s = ring_store(&from, &to, b->zeros, th);
    }
    if (!s) s = ring_store(&sk, dk, b->zeros, th);
    if (!s) s = ring_store(&sv, dv, b->zeros, th);
    return s ? ring_fail(s, "writing the gradients: %s", flashattn_last_error()) : FLASHATTN_OK;
}

flashattn_status flashattn_ring_bwd(const flashattn_ring *ring, const flashattn_tensor *q,
                                    const flashattn_tensor *k, const flashattn_tensor *v,
                                    const flashattn_tensor *o, const flashattn_tensor *dout, const float *lse,
                                    const flashattn_tensor *dq, const flashattn_tensor *dk,
                                    const flashattn_tensor *dv, const flashattn_params *p) {
    flashattn_params core;
    ring_ctx c;
    bwd_bufs b = {0};
    float *home = NULL;
    ring_clear_error();
    flashattn_status s = ring_check_struct(ring);
    if (s) return s;
    ring_offer mine = {RING_BWD, FLASHATTN_OK, NULL, q, k, v};
    mine.status = ring_read_params(p, &core);
    if (!mine.status) mine.status = check_local(q, k, v, o, dout, lse, dq, dk, dv, &core);
    mine.why = flashattn_ring_last_error();
    if ((s = ring_agree(ring, &mine, &core, &c))) return s;
    if ((s = ring_agree_alloc(&c, alloc_bufs(&c, q, o, dout, lse, &b)))) {
        free_bufs(&b);
        return s;
    }
    s = run_ring(&c, q, k, v, o, dout, &b, &home);
    s = ring_all_ran(&c, s); /* nothing is written unless every rank's blocks ran */
    if (!s) s = write_out(&c, &b, home, dq, dk, dv);
    ring_report(&c, ring);
    free_bufs(&b);
    ring_ctx_free(&c);
    return s;
}
