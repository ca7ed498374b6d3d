/* The ring's shared pieces: its error message, params, views, transfers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mpi/ring.h"

static _Thread_local char ring_msg[512];

flashattn_status ring_fail(flashattn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ring_msg, sizeof ring_msg, fmt, ap);
    va_end(ap);
    return s;
}

void ring_clear_error(void) { ring_msg[0] = 0; }

const char *flashattn_ring_last_error(void) { return ring_msg; }

flashattn_status ring_check_struct(const flashattn_ring *ring) {
    if (!ring) return ring_fail(FLASHATTN_ERR_NULL_POINTER, "ring is NULL");
    if (ring->struct_size < offsetof(flashattn_ring, stats) || ring->struct_size > sizeof *ring)
        return ring_fail(FLASHATTN_ERR_BAD_PARAM, "ring.struct_size %zu is not one this library knows",
                         ring->struct_size);
    return FLASHATTN_OK;
}

flashattn_status ring_all_ran(ring_ctx *c, flashattn_status s) {
    int ok = s == FLASHATTN_OK, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm);
    if (!s && !all_ok) s = ring_fail(FLASHATTN_ERR_UNSUPPORTED, "a block failed on another rank");
    return s;
}

void ring_report(ring_ctx *c, const flashattn_ring *ring) {
    c->st.steps = c->ranks;
    c->st.seconds = MPI_Wtime() - c->t0;
    if (ring->struct_size > offsetof(flashattn_ring, stats) && ring->stats) *ring->stats = c->st;
}

flashattn_status ring_read_params(const flashattn_params *p, flashattn_params *out) {
    flashattn_params_init(out);
    if (p) {
        if (p->struct_size < offsetof(flashattn_params, num_splits) || p->struct_size > sizeof *out)
            return ring_fail(FLASHATTN_ERR_BAD_PARAM, "params.struct_size %zu is not one this library knows",
                             p->struct_size);
        memcpy(out, p, p->struct_size);
        out->struct_size = sizeof *out;
    }
    if (out->causal != 0 && out->causal != 1)
        return ring_fail(FLASHATTN_ERR_BAD_PARAM, "params.causal must be 0 or 1");
    const char *what = (out->window_left != -1 || out->window_right != -1) ? "a sliding window"
                       : out->alibi_slopes                                ? "ALiBi"
                       : out->bias || out->dbias                          ? "a bias"
                       : out->mask                                        ? "a mask"
                       : out->sinks || out->dsinks                        ? "sinks"
                       : out->dropout_p != 0.0f                           ? "dropout"
                       : out->varlen                                      ? "varlen"
                                                                          : NULL;
    if (what)
        return ring_fail(FLASHATTN_ERR_UNSUPPORTED,
                         "ring attention does not take %s (it needs global positions inside a block)", what);
    return FLASHATTN_OK;
}

flashattn_tensor ring_rows_of(const flashattn_tensor *t, int64_t row, int64_t len) {
    flashattn_tensor r = *t;
    r.data = (char *)t->data + (size_t)(row * t->stride_seq) * flashattn_dtype_size(t->dtype);
    r.seqlen = len;
    return r;
}

void ring_copy_rows(const flashattn_tensor *from, int64_t fr, const flashattn_tensor *to, int64_t tr,
                    int64_t n) {
    const size_t es = flashattn_dtype_size(from->dtype), row = (size_t)from->head_dim * es;
    for (int64_t b = 0; b < from->batch; b++)
        for (int64_t s = 0; s < n; s++)
            for (int64_t h = 0; h < from->heads; h++) {
                const char *src = (const char *)from->data +
                                  (size_t)(b * from->stride_batch + (fr + s) * from->stride_seq +
                                           h * from->stride_head) * es;
                char *dst = (char *)to->data +
                            (size_t)(b * to->stride_batch + (tr + s) * to->stride_seq + h * to->stride_head) * es;
                memcpy(dst, src, row);
            }
}

flashattn_tensor ring_dense(void *data, flashattn_dtype dt, int64_t batch, int64_t rows,
                            int64_t heads, int64_t dim) {
    return flashattn_tensor_bshd(data, dt, batch, rows, heads, dim);
}

size_t ring_kv_bytes(const ring_ctx *c, int64_t rows) {
    const size_t n = (size_t)(c->batch * rows * c->heads_kv);
    return n * ((size_t)c->head_dim * flashattn_dtype_size(c->kdt) +
                (size_t)c->head_dim_v * flashattn_dtype_size(c->vdt));
}

void ring_kv_views(const ring_ctx *c, void *buf, int64_t rows, flashattn_tensor *k,
                   flashattn_tensor *v) {
    *k = ring_dense(buf, c->kdt, c->batch, rows, c->heads_kv, c->head_dim);
    const size_t kb = (size_t)(c->batch * rows * c->heads_kv * c->head_dim) * flashattn_dtype_size(c->kdt);
    *v = ring_dense((char *)buf + kb, c->vdt, c->batch, rows, c->heads_kv, c->head_dim_v);
}

int ring_keys(const ring_ctx *c, const ring_slice *sl, const ring_run *kr, int64_t *n, int *causal) {
    if (sl->len == 0 || kr->len == 0) return 0;
    *n = kr->len;
    *causal = 0;
    if (!c->causal) return 1;
    const int64_t first = sl->start, last = sl->start + sl->len - 1;
    if (kr->start > last) return 0;                 /* every key after every row */
    if (kr->start + kr->len - 1 <= first) return 1; /* every key before every row */
    /* The runs of one layout are disjoint and queries and keys share it,
     * so a run that meets the slice's rows is the slice's own run: its
     * keys up to the slice's last row, the diagonal aligned bottom-right. */
    *n = last + 1 - kr->start;
    *causal = 1;
    return 1;
}

void ring_progress(int n, MPI_Request *reqs) {
    int done;
    if (n > 0) MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
}

int ring_wait(ring_ctx *c, int n, MPI_Request *reqs) {
    if (n <= 0) return MPI_SUCCESS;
    const double t = MPI_Wtime();
    const int e = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    c->st.wait_seconds += MPI_Wtime() - t;
    return e;
}

/* MPI counts are int: a message goes as whole MiB in a contiguous type,
 * then the rest in bytes (two requests at most). */
#define RING_MIB ((size_t)1 << 20)

static int ring_post(ring_ctx *c, void *buf, size_t bytes, int peer, int tag, MPI_Request *reqs,
                     int send) {
    MPI_Datatype mib;
    int n = 0;
    const size_t whole = bytes / RING_MIB, rest = bytes % RING_MIB;
    if (whole) {
        MPI_Type_contiguous((int)RING_MIB, MPI_BYTE, &mib);
        MPI_Type_commit(&mib);
        if (send)
            MPI_Isend(buf, (int)whole, mib, peer, tag * RING_MAX_PARTS, c->comm, &reqs[n++]);
        else
            MPI_Irecv(buf, (int)whole, mib, peer, tag * RING_MAX_PARTS, c->comm, &reqs[n++]);
        MPI_Type_free(&mib); /* freed when the request no longer needs it */
    }
    if (rest || !whole) {
        char *at = (char *)buf + whole * RING_MIB;
        if (send)
            MPI_Isend(at, (int)rest, MPI_BYTE, peer, tag * RING_MAX_PARTS + 1, c->comm, &reqs[n++]);
        else
            MPI_Irecv(at, (int)rest, MPI_BYTE, peer, tag * RING_MAX_PARTS + 1, c->comm, &reqs[n++]);
    }
    return n;
}

int ring_isend(ring_ctx *c, const void *buf, size_t bytes, int to, int tag, MPI_Request *reqs) {
    c->st.bytes_sent += (int64_t)bytes;
    return ring_post(c, (void *)buf, bytes, to, tag, reqs, 1);
}

int ring_irecv(ring_ctx *c, void *buf, size_t bytes, int from, int tag, MPI_Request *reqs) {
    return ring_post(c, buf, bytes, from, tag, reqs, 0);
}

flashattn_status ring_store(const flashattn_tensor *x, const flashattn_tensor *o, const float *zeros,
                            int threads) {
    flashattn_params p;
    flashattn_params_init(&p);
    p.num_threads = threads;
    return flashattn_merge(1, x, &zeros, o, NULL, &p);
}
