/* Which rows each rank holds, and copying them in and out of a whole tensor. */
#include <string.h>

#include "mpi/ring.h"

void flashattn_ring_init_size(flashattn_ring *r, size_t size) {
    flashattn_ring d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.comm = MPI_COMM_WORLD;
    d.layout = FLASHATTN_RING_CONTIGUOUS;
    if (!r) return;
    if (size > sizeof d) size = sizeof d;
    memcpy(r, &d, size);
    r->struct_size = size;
}

/* Chunk c of n equal chunks of total rows, the first total % n one longer. */
static ring_run chunk(int64_t total, int64_t n, int64_t c) {
    const int64_t base = total / n, extra = total % n;
    return (ring_run){c * base + (c < extra ? c : extra), base + (c < extra), 0};
}

flashattn_status ring_layout_runs(flashattn_ring_layout layout, int64_t seq_total, int ranks,
                                  int rank, ring_run r[2], int *n) {
    if (seq_total < 0) return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "seq_total %lld < 0", (long long)seq_total);
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return ring_fail(FLASHATTN_ERR_BAD_PARAM, "rank %d of %d ranks", rank, ranks);
    r[1] = (ring_run){0, 0, 0};
    if (layout == FLASHATTN_RING_CONTIGUOUS) {
        r[0] = chunk(seq_total, ranks, rank);
        *n = 1;
    } else if (layout == FLASHATTN_RING_ZIGZAG) {
        r[0] = chunk(seq_total, 2 * (int64_t)ranks, rank);
        r[1] = chunk(seq_total, 2 * (int64_t)ranks, 2 * (int64_t)ranks - 1 - rank);
        r[1].row = r[0].len;
        *n = 2;
    } else {
        return ring_fail(FLASHATTN_ERR_BAD_PARAM, "layout %d is not a ring layout", (int)layout);
    }
    return FLASHATTN_OK;
}

flashattn_status flashattn_ring_rows(flashattn_ring_layout layout, int64_t seq_total, int ranks,
                                     int rank, int64_t start[2], int64_t len[2], int *runs) {
    ring_run r[2] = {{0, 0, 0}, {0, 0, 0}};
    int n = 0;
    ring_clear_error();
    if (!start || !len || !runs) return ring_fail(FLASHATTN_ERR_NULL_POINTER, "start, len or runs is NULL");
    flashattn_status s = ring_layout_runs(layout, seq_total, ranks, rank, r, &n);
    if (s) return s;
    for (int i = 0; i < 2; i++) {
        start[i] = r[i].start;
        len[i] = r[i].len;
    }
    *runs = n;
    return FLASHATTN_OK;
}

/* Both tensors described, of one dtype and shape but for the rows. */
static flashattn_status check_pair(const flashattn_ring *ring, const flashattn_tensor *whole,
                                   const flashattn_tensor *shard, ring_run r[2], int *n) {
    int ranks, rank;
    if (!ring || !whole || !shard) return ring_fail(FLASHATTN_ERR_NULL_POINTER, "ring, whole or shard is NULL");
    if (whole->dtype != shard->dtype || flashattn_dtype_size(whole->dtype) == 0)
        return ring_fail(FLASHATTN_ERR_BAD_DTYPE, "whole and shard must share one dtype");
    if (whole->batch != shard->batch || whole->heads != shard->heads || whole->head_dim != shard->head_dim ||
        whole->batch < 0 || whole->heads < 0 || whole->head_dim < 0 || whole->seqlen < 0)
        return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "whole and shard differ in batch, heads or head_dim");
    if (whole->stride_dim != 1 || shard->stride_dim != 1 || whole->stride_batch < 0 ||
        whole->stride_seq < 0 || whole->stride_head < 0 || shard->stride_batch < 0 ||
        shard->stride_seq < 0 || shard->stride_head < 0)
        return ring_fail(FLASHATTN_ERR_BAD_STRIDE, "strides must be >= 0, stride_dim 1");
    MPI_Comm_size(ring->comm, &ranks);
    MPI_Comm_rank(ring->comm, &rank);
    flashattn_status s = ring_layout_runs(ring->layout, whole->seqlen, ranks, rank, r, n);
    if (s) return s;
    if (shard->seqlen != r[0].len + r[1].len)
        return ring_fail(FLASHATTN_ERR_BAD_SHAPE, "shard has %lld rows; rank %d holds %lld of %lld",
                         (long long)shard->seqlen, rank, (long long)(r[0].len + r[1].len),
                         (long long)whole->seqlen);
    const int empty = !whole->batch || !whole->seqlen || !whole->heads || !whole->head_dim;
    if (!empty && (!whole->data || !shard->data))
        return ring_fail(FLASHATTN_ERR_NULL_POINTER, "tensor data is NULL");
    return FLASHATTN_OK;
}

flashattn_status flashattn_ring_shard(const flashattn_ring *ring, const flashattn_tensor *whole,
                                      const flashattn_tensor *shard) {
    ring_run r[2] = {{0, 0, 0}, {0, 0, 0}};
    int n = 0;
    ring_clear_error();
    flashattn_status s = check_pair(ring, whole, shard, r, &n);
    if (s) return s;
    for (int i = 0; i < n; i++) ring_copy_rows(whole, r[i].start, shard, r[i].row, r[i].len);
    return FLASHATTN_OK;
}

flashattn_status flashattn_ring_unshard(const flashattn_ring *ring, const flashattn_tensor *shard,
                                        const flashattn_tensor *whole) {
    ring_run r[2] = {{0, 0, 0}, {0, 0, 0}};
    int n = 0;
    ring_clear_error();
    flashattn_status s = check_pair(ring, whole, shard, r, &n);
    if (s) return s;
    for (int i = 0; i < n; i++) ring_copy_rows(shard, r[i].row, whole, r[i].start, r[i].len);
    return FLASHATTN_OK;
}
