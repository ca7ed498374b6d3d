/*
 * flashattn_mpi: attention over a sequence sharded across the ranks of an
 * MPI communicator (ring attention, Liu et al. 2023), forward and backward.
 * An optional component: libflashattn_mpi, built when CMake finds MPI; the
 * core library has no MPI dependency.
 *
 * Self-attention over one sequence of seq_total rows (queries and keys are
 * the same rows), split into shards by a layout. Each rank passes its own
 * shard of every tensor, in the core's shapes (flashattn.h), with seqlen =
 * the rows it holds:
 *
 *   Q, O, dO, dQ  [batch, rows, heads_q,  head_dim (O, dO: head_dim_v)]
 *   K, V, dK, dV  [batch, rows, heads_kv, head_dim (V, dV: head_dim_v)]
 *   LSE           [batch, heads_q, rows]  float32, contiguous
 *
 * a shard's rows in the order the layout lists them. K and V pass from rank
 * r to rank r + 1 around the ring, one shard per step, with non-blocking
 * sends and receives that run while the step computes (the next shard
 * arrives into a second buffer); the backward's dK and dV sums travel with
 * their shard and come home at the end. Each step's partial result is
 * merged into the rank's rows by its LSE (as flashattn_merge), so no rank
 * ever holds more than its own shard and two shards in flight: memory per
 * rank O(rows * head_dim), never a gather of the sequence.
 *
 * Layouts (flashattn_ring_rows gives a rank's rows):
 *   CONTIGUOUS  rank r holds one run of rows, the runs in rank order; each
 *               rank's rows may be any count (seq_total is their sum).
 *   ZIGZAG      the sequence in 2P chunks (P ranks; the first seq_total %
 *               2P chunks one row longer), rank r holding chunks r and
 *               2P - 1 - r: under a causal mask every rank then computes
 *               the same share, where CONTIGUOUS leaves the last rank P
 *               times the first's (Megatron's context parallelism,
 *               ring-flash-attention's zigzag).
 *
 * Results: O, LSE and the gradients of every rank's rows are those of the
 * single-process flashattn_fwd / flashattn_bwd on the whole sequence to
 * within the f32 rounding of the merges (docs/numerics.md); the same ranks,
 * layout, threads and params give the same bits on every run (the merges
 * and sums run in ring order).
 *
 * params: scale, causal, softcap, block_m, block_n, num_threads and
 * deterministic as in flashattn.h. A sliding window, ALiBi, bias, mask,
 * sinks, dropout and varlen need the rows' global positions inside a
 * block, which the core calls do not take: FLASHATTN_ERR_UNSUPPORTED.
 *
 * Errors: every call is collective. Each rank checks its own tensors, then
 * one collective exchange compares every rank's shapes, dtypes, params
 * and rows with the layout's; if any rank's check failed or any two
 * disagree, every rank returns the same status (flashattn_ring_last_error
 * names the rank and what differs) and writes nothing. Nothing past that
 * exchange can fail but for a lost rank, which MPI itself reports.
 */
#ifndef FLASHATTN_MPI_H
#define FLASHATTN_MPI_H

#include <mpi.h>

#include "flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum flashattn_ring_layout {
    FLASHATTN_RING_CONTIGUOUS = 0,
    FLASHATTN_RING_ZIGZAG = 1
} flashattn_ring_layout;

/* What one call did, per rank (optional: flashattn_ring.stats). */
typedef struct flashattn_ring_stats {
    double seconds;         /* the whole call */
    double compute_seconds; /* in the core calls: attention and merges */
    double wait_seconds;    /* blocked on the ring's transfers (communication not hidden) */
    int64_t bytes_sent;     /* by this rank */
    int64_t buffer_bytes;   /* what the call allocated on this rank: the shards in flight,
                             * the f32 sums, the core calls' workspace */
    int steps;              /* ring steps (the ranks) */
} flashattn_ring_stats;

typedef struct flashattn_ring {
    size_t struct_size;            /* sizeof(flashattn_ring), set by _init */
    MPI_Comm comm;                 /* the ranks the sequence is sharded over (MPI_COMM_WORLD) */
    flashattn_ring_layout layout;  /* CONTIGUOUS */
    int64_t seq_total;             /* rows of the whole sequence: required for ZIGZAG;
                                    * CONTIGUOUS: 0 (the sum of the ranks' rows) or that sum */
    flashattn_ring_stats *stats;   /* NULL, or filled by each call */
} flashattn_ring;

FLASHATTN_API void flashattn_ring_init_size(flashattn_ring *r, size_t size);
#define flashattn_ring_init(r) flashattn_ring_init_size((r), sizeof(flashattn_ring))

/* The rows of the whole sequence that rank `rank` of `ranks` holds under
 * layout: *runs runs (1 or 2), run i being rows start[i] .. start[i] +
 * len[i] - 1, in shard order. CONTIGUOUS here is the even split (the
 * first seq_total % ranks ranks one row longer); the ring calls take any
 * split (see above). Pure arithmetic, no communication. */
FLASHATTN_API flashattn_status flashattn_ring_rows(flashattn_ring_layout layout, int64_t seq_total,
                                                   int ranks, int rank, int64_t start[2],
                                                   int64_t len[2], int *runs);

/* Copy this rank's rows (flashattn_ring_rows, with the ring's comm size
 * and rank) of whole, [batch, seq_total, heads, head_dim], into shard,
 * [batch, rows, heads, head_dim] (flashattn_ring_shard), or back into
 * whole's rows (flashattn_ring_unshard, which writes no other row). Same
 * dtype, any strides. Local: no communication. */
FLASHATTN_API flashattn_status flashattn_ring_shard(const flashattn_ring *ring,
                                                    const flashattn_tensor *whole,
                                                    const flashattn_tensor *shard);
FLASHATTN_API flashattn_status flashattn_ring_unshard(const flashattn_ring *ring,
                                                      const flashattn_tensor *shard,
                                                      const flashattn_tensor *whole);

/* The forward over the ring: o (and lse, when not NULL) for this rank's
 * rows. lse is required by flashattn_ring_bwd. Collective. */
FLASHATTN_API flashattn_status flashattn_ring_fwd(const flashattn_ring *ring,
                                                  const flashattn_tensor *q,
                                                  const flashattn_tensor *k,
                                                  const flashattn_tensor *v,
                                                  const flashattn_tensor *o, float *lse,
                                                  const flashattn_params *p);

/* The backward over the ring: dq, dk, dv for this rank's rows, from the
 * ring forward's o and lse (as flashattn_bwd, whose dtypes and rules it
 * keeps; under GQA dk and dv sum their group). Collective. */
FLASHATTN_API flashattn_status flashattn_ring_bwd(const flashattn_ring *ring,
                                                  const flashattn_tensor *q,
                                                  const flashattn_tensor *k,
                                                  const flashattn_tensor *v,
                                                  const flashattn_tensor *o,
                                                  const flashattn_tensor *dout, const float *lse,
                                                  const flashattn_tensor *dq,
                                                  const flashattn_tensor *dk,
                                                  const flashattn_tensor *dv,
                                                  const flashattn_params *p);

/* Details of this thread's last ring error ("" if none). */
FLASHATTN_API const char *flashattn_ring_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* FLASHATTN_MPI_H */
