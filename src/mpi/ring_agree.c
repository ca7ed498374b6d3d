/*
 * The agreement every ring call starts with: one MPI_Allgather of each
 * rank's offer (its call, its local check, its shapes, params and rows),
 * after which every rank knows the same verdict, so either all go on into
 * the ring or all return the same status. A rank whose input is bad never
 * leaves the others waiting in a transfer it will not make.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/ring.h"

enum {
    F_KIND, F_STATUS, F_BATCH, F_HEADS_Q, F_HEADS_KV, F_HEAD_DIM, F_HEAD_DIM_V, F_QDT, F_KDT, F_VDT,
    F_CAUSAL, F_LAYOUT, F_SEQ_TOTAL, F_SCALE, F_SOFTCAP, F_DETERMINISTIC, F_ROWS, F_COUNT
};
static const char *const field_name[F_COUNT] = {
    "call", "status", "batch", "heads_q", "heads_kv", "head_dim", "head_dim_v", "q dtype",
    "k dtype", "v dtype", "causal", "layout", "seq_total", "scale", "softcap", "deterministic", "rows",
};

typedef struct {
    int64_t f[F_COUNT];
    char why[192];
} offer_wire;

/* The slices of one run: about 8 a step on this rank's rows, of 256 rows
 * or more (a core call on fewer rows pays its K/V packing on too little
 * work), each inside its run. */
#define RING_SLICES 8
#define RING_MIN_SLICE 256

static int64_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (int64_t)u;
}

static void fill_wire(const flashattn_ring *ring, const ring_offer *mine, const flashattn_params *core,
                      offer_wire *w) {
    memset(w, 0, sizeof *w);
    w->f[F_KIND] = mine->kind;
    w->f[F_STATUS] = mine->status;
    if (mine->status) snprintf(w->why, sizeof w->why, "%s", mine->why ? mine->why : "");
    if (mine->q && mine->k && mine->v) {
        w->f[F_BATCH] = mine->q->batch;
        w->f[F_HEADS_Q] = mine->q->heads;
        w->f[F_HEADS_KV] = mine->k->heads;
        w->f[F_HEAD_DIM] = mine->q->head_dim;
        w->f[F_HEAD_DIM_V] = mine->v->head_dim;
        w->f[F_QDT] = mine->q->dtype;
        w->f[F_KDT] = mine->k->dtype;
        w->f[F_VDT] = mine->v->dtype;
        w->f[F_ROWS] = mine->q->seqlen;
    }
    w->f[F_CAUSAL] = core->causal;
    w->f[F_LAYOUT] = ring->layout;
    w->f[F_SEQ_TOTAL] = ring->seq_total;
    w->f[F_SCALE] = bits_of(core->scale);
    w->f[F_SOFTCAP] = bits_of(core->softcap);
    w->f[F_DETERMINISTIC] = core->deterministic;
}

/* The verdict from every rank's offer, the same on every rank. */
static flashattn_status judge(const offer_wire *all, int ranks) {
    for (int r = 0; r < ranks; r++)
        if (all[r].f[F_STATUS])
            return ring_fail((flashattn_status)all[r].f[F_STATUS], "rank %d: %s", r, all[r].why);
    for (int r = 1; r < ranks; r++)
        for (int f = 0; f < F_COUNT; f++)
            if (f != F_STATUS && f != F_ROWS && all[r].f[f] != all[0].f[f])
                return ring_fail(f == F_KIND ? FLASHATTN_ERR_BAD_PARAM : FLASHATTN_ERR_BAD_SHAPE,
                                 "rank %d's %s (%lld) differs from rank 0's (%lld)", r, field_name[f],
                                 (long long)all[r].f[f], (long long)all[0].f[f]);
    const int64_t layout = all[0].f[F_LAYOUT], total = all[0].f[F_SEQ_TOTAL];
    if (layout != FLASHATTN_RING_CONTIGUOUS && layout != FLASHATTN_RING_ZIGZAG)
        return ring_fail(FLASHATTN_ERR_BAD_PARAM, "ring.layout %lld is not a layout", (long long)layout);
    if (total < 0) return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "ring.seq_total %lld < 0", (long long)total);
    int64_t sum = 0;
    for (int r = 0; r < ranks; r++) {
        if (__builtin_add_overflow(sum, all[r].f[F_ROWS], &sum))
            return ring_fail(FLASHATTN_ERR_OVERFLOW, "the ranks' rows overflow int64");
        if (layout == FLASHATTN_RING_ZIGZAG) {
            ring_run run[2];
            int n;
            ring_layout_runs(FLASHATTN_RING_ZIGZAG, total, ranks, r, run, &n);
            if (all[r].f[F_ROWS] != run[0].len + run[1].len)
                return ring_fail(FLASHATTN_ERR_BAD_SHAPE,
                                 "rank %d holds %lld rows; the zigzag layout of %lld rows gives it %lld", r,
                                 (long long)all[r].f[F_ROWS], (long long)total,
                                 (long long)(run[0].len + run[1].len));
        }
    }
    if (total != 0 && sum != total)
        return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "the ranks hold %lld rows, ring.seq_total is %lld",
                         (long long)sum, (long long)total);
    return FLASHATTN_OK;
}

static void make_slices(ring_ctx *c) {
    const ring_run *mine = c->runs + 2 * c->rank;
    int64_t target = (c->rows[c->rank] + RING_SLICES - 1) / RING_SLICES;
    if (target < RING_MIN_SLICE) target = RING_MIN_SLICE;
    int64_t lse_at = 0;
    c->nslices = 0;
    c->max_slice = 0;
    for (int i = 0; i < c->nruns[c->rank]; i++)
        for (int64_t at = 0; at < mine[i].len; at += target) {
            const int64_t len = mine[i].len - at < target ? mine[i].len - at : target;
            c->slices[c->nslices++] = (ring_slice){mine[i].row + at, mine[i].start + at, len, lse_at};
            lse_at += c->batch * c->heads_q * len;
            if (len > c->max_slice) c->max_slice = len;
        }
}

flashattn_status ring_agree(const flashattn_ring *ring, const ring_offer *mine,
                            const flashattn_params *core, ring_ctx *c) {
    memset(c, 0, sizeof *c);
    c->t0 = MPI_Wtime();
    c->comm = ring->comm;
    MPI_Comm_size(c->comm, &c->ranks);
    MPI_Comm_rank(c->comm, &c->rank);
    offer_wire w, *all = malloc(sizeof *all * (size_t)c->ranks);
    /* The one way out before the agreement: 256 bytes a rank not to be had. */
    if (!all) return ring_fail(FLASHATTN_ERR_OUT_OF_MEMORY, "out of memory for the agreement");
    fill_wire(ring, mine, core, &w);
    MPI_Allgather(&w, (int)sizeof w, MPI_BYTE, all, (int)sizeof w, MPI_BYTE, c->comm);
    flashattn_status s = judge(all, c->ranks);
    if (s) {
        free(all);
        return s;
    }
    c->batch = all[0].f[F_BATCH];
    c->heads_q = all[0].f[F_HEADS_Q];
    c->heads_kv = all[0].f[F_HEADS_KV];
    c->head_dim = all[0].f[F_HEAD_DIM];
    c->head_dim_v = all[0].f[F_HEAD_DIM_V];
    c->kdt = (flashattn_dtype)all[0].f[F_KDT];
    c->vdt = (flashattn_dtype)all[0].f[F_VDT];
    c->causal = core->causal;
    c->core = *core;
    c->runs = calloc((size_t)c->ranks * 2, sizeof *c->runs);
    c->nruns = calloc((size_t)c->ranks, sizeof *c->nruns);
    c->rows = calloc((size_t)c->ranks, sizeof *c->rows);
    /* each run has at most len / target + 1 slices, and target >= rows / RING_SLICES */
    c->slices = calloc(2 + RING_SLICES, sizeof *c->slices);
    int ok = c->runs && c->nruns && c->rows && c->slices;
    if (ok) {
        int64_t start = 0;
        for (int r = 0; r < c->ranks; r++) {
            c->rows[r] = all[r].f[F_ROWS];
            if (c->rows[r] > c->max_rows) c->max_rows = c->rows[r];
            if (ring->layout == FLASHATTN_RING_ZIGZAG) {
                ring_layout_runs(FLASHATTN_RING_ZIGZAG, all[0].f[F_SEQ_TOTAL], c->ranks, r, c->runs + 2 * r,
                                 &c->nruns[r]);
            } else {
                c->runs[2 * r] = (ring_run){start, c->rows[r], 0};
                c->nruns[r] = 1;
            }
            start += c->rows[r];
        }
        make_slices(c);
    }
    free(all);
    return ring_agree_alloc(c, ok);
}

flashattn_status ring_agree_alloc(ring_ctx *c, int ok) {
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm);
    if (all_ok) return FLASHATTN_OK;
    ring_ctx_free(c);
    return ring_fail(FLASHATTN_ERR_OUT_OF_MEMORY, "%s could not allocate the ring's buffers",
                     ok ? "another rank" : "this rank");
}

void ring_ctx_free(ring_ctx *c) {
    free(c->runs);
    free(c->nruns);
    free(c->rows);
    free(c->slices);
    c->runs = NULL;
    c->nruns = NULL;
    c->rows = NULL;
    c->slices = NULL;
}
