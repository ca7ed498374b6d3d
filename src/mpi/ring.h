/*
 * The ring's internals (include/flashattn_mpi.h): who holds which rows,
 * the collective agreement that every call starts with, views into
 * shards and the buffers that travel. Only the public API of the core
 * library is used: libflashattn_mpi is a client of libflashattn.
 */
#ifndef FA_MPI_RING_H
#define FA_MPI_RING_H

#include <stdint.h>

#include "flashattn_mpi.h"

/* A run of rows: rows start .. start + len - 1 of the sequence, held at
 * row `row` of its rank's shard. */
typedef struct {
    int64_t start, len, row;
} ring_run;

/* A slice of this rank's rows, inside one of its runs: the unit of work
 * between two looks at the transfers (MPI moves large messages only while
 * a rank is inside MPI, so a step computes in slices and lets MPI
 * progress after each). Its LSE block, [batch][heads_q][len], lies at
 * lse_at in the slice-major LSE buffers. */
typedef struct {
    int64_t row, start, len, lse_at;
} ring_slice;

enum { RING_FWD = 1, RING_BWD = 2 };

typedef struct {
    MPI_Comm comm;
    int ranks, rank;
    int64_t batch, heads_q, heads_kv, head_dim, head_dim_v;
    flashattn_dtype kdt, vdt;
    int causal;
    flashattn_params core; /* the core calls' params; causal set per block */
    ring_run *runs;        /* [ranks][2] */
    int *nruns;            /* [ranks] */
    int64_t *rows;         /* [ranks] */
    int64_t max_rows;
    ring_slice *slices;
    int nslices;
    int64_t max_slice;
    flashattn_ring_stats st;
    double t0;
} ring_ctx;

/* What a rank brings to the agreement: its call, its local check's
 * status and message, and the shapes every rank must share. */
typedef struct {
    int kind;
    flashattn_status status;
    const char *why; /* the local check's message, when status is not OK */
    const flashattn_tensor *q, *k, *v;
} ring_offer;

/* Set this thread's message (flashattn_ring_last_error) and return s. */
flashattn_status ring_fail(flashattn_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ring_clear_error(void);

/* The ring's own struct: not NULL, a size this library knows. Checked
 * before anything collective (a NULL ring has no communicator). */
flashattn_status ring_check_struct(const flashattn_ring *ring);
/* After the ring: s, or a failure on every rank if any rank's blocks
 * failed (one collective), so that no rank writes its outputs alone. */
flashattn_status ring_all_ran(ring_ctx *c, flashattn_status s);
/* The call's stats into ring->stats, when the caller has the field. */
void ring_report(ring_ctx *c, const flashattn_ring *ring);

/* The user's params (NULL: defaults) as a current-size struct in *out,
 * checked for what the ring supports. */
flashattn_status ring_read_params(const flashattn_params *p, flashattn_params *out);

/* The collective agreement: every rank's offer is gathered; returns OK on
 * every rank or the same failure on every rank. On OK, c holds the
 * ranks' rows and runs and this rank's slices (free with ring_ctx_free). */
flashattn_status ring_agree(const flashattn_ring *ring, const ring_offer *mine,
                            const flashattn_params *core, ring_ctx *c);
/* Every rank's allocations: OK everywhere, or OUT_OF_MEMORY everywhere. */
flashattn_status ring_agree_alloc(ring_ctx *c, int ok);
void ring_ctx_free(ring_ctx *c);

/* Rows rule (flashattn_ring_rows) into runs r[0..*n). */
flashattn_status ring_layout_runs(flashattn_ring_layout layout, int64_t seq_total, int ranks,
                                  int rank, ring_run r[2], int *n);

/* t's rows row .. row + len - 1 (the same tensor otherwise). */
flashattn_tensor ring_rows_of(const flashattn_tensor *t, int64_t row, int64_t len);
/* n rows of from, starting at its row fr, into to's rows from tr. */
void ring_copy_rows(const flashattn_tensor *from, int64_t fr, const flashattn_tensor *to, int64_t tr,
                    int64_t n);
/* A contiguous [batch, rows, heads, dim] tensor at data. */
flashattn_tensor ring_dense(void *data, flashattn_dtype dt, int64_t batch, int64_t rows,
                            int64_t heads, int64_t dim);

/* A shard's K and V as they travel: K [batch, rows, heads_kv, head_dim],
 * then V [batch, rows, heads_kv, head_dim_v], each contiguous in its
 * dtype. */
size_t ring_kv_bytes(const ring_ctx *c, int64_t rows);
void ring_kv_views(const ring_ctx *c, void *buf, int64_t rows, flashattn_tensor *k,
                   flashattn_tensor *v);

/* The keys of run kr that slice sl sees: the run's first *n rows, under
 * a causal mask within them (*causal, bottom-right: the slice's last row
 * sees the last of them) or all of them. 0 when it sees none. */
int ring_keys(const ring_ctx *c, const ring_slice *sl, const ring_run *kr, int64_t *n, int *causal);

/* The shard the rank holds at step t (t = 0: its own), and its runs. */
static inline int ring_src(const ring_ctx *c, int t) { return (c->rank - t % c->ranks + c->ranks) % c->ranks; }
static inline int ring_next(const ring_ctx *c) { return (c->rank + 1) % c->ranks; }
static inline int ring_prev(const ring_ctx *c) { return (c->rank + c->ranks - 1) % c->ranks; }

/* Wait for n requests, counting the time as not hidden; let MPI move
 * them along without waiting (ring_progress). */
int ring_wait(ring_ctx *c, int n, MPI_Request *reqs);
void ring_progress(int n, MPI_Request *reqs);
/* Isend / Irecv of a byte buffer that may pass INT_MAX bytes, tag one
 * of RING_TAG_*. Returns the number of requests it posted (at most
 * RING_MAX_PARTS). Messages of one tag between two ranks arrive in the
 * order they were sent, so no step number is needed. */
#define RING_MAX_PARTS 2
enum { RING_TAG_KV = 1, RING_TAG_DKV = 2 };
int ring_isend(ring_ctx *c, const void *buf, size_t bytes, int to, int tag, MPI_Request *reqs);
int ring_irecv(ring_ctx *c, void *buf, size_t bytes, int from, int tag, MPI_Request *reqs);

/* o = x, rounded once to o's dtype (x f32, o's shape; heads and seq as o's):
 * flashattn_merge of one part whose LSE is 0, which weighs it by exactly 1.
 * zeros holds batch * heads * seqlen zeros. */
flashattn_status ring_store(const flashattn_tensor *x, const flashattn_tensor *o, const float *zeros,
                            int threads);

#endif
