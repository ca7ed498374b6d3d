/*
 * Decode planning. Decode is bound by reading the cache, so the plan is
 * about reading it in address order on every thread:
 *
 *   - A work item takes a block of adjacent kv-heads: in a [seq, heads_kv,
 *     dim] cache (contiguous or a page) their rows of one key are adjacent,
 *     and reading them together streams memory in order; one kv-head alone
 *     reads head_dim elements every heads_kv * head_dim, a strided read
 *     that reaches a fraction of the bandwidth.
 *   - Keys are split (split-KV, "flash-decoding") only when sequences x
 *     head blocks x query tiles leave threads without work.
 *
 *   - With at least FA_DECODE_WIDE_ROWS rows per kv-head (group * query
 *     positions of an item) the item is compute-bound: the wide path
 *     (driver/decode_block.c) widens pieces of NR keys for the GEMM
 *     kernel. Then rows per kv-head come first (up to the rows whose
 *     tiles fill FA_DECODE_WIDE_BYTES:
 *     every query tile reads its kv-heads' cache again), kv-heads fill
 *     the rest.
 *
 * Footprint of one work item (f32, d = head_dim, dp = head_dim_v rounded
 * up to 16, dk = head_dim rounded up to 16,
 * rows = heads_per_item * group * queries_per_item, bn = block_n,
 * sld = bn, or bn rounded up to 16 plus 16 on the wide path):
 *     Q          rows * d
 *     S/P        rows * sld
 *     acc        rows * dp
 *     piece      max(NR * dk, pv * dp)   (wide path only; pv = P V keys)
 * K and V are read by the kernels straight from the cache (no f32 copy of
 * a step; the wide path widens one piece of one kv-head at a time); one
 * step of an item reads heads_per_item * bn rows of K and of V.
 *
 * The workspace never depends on the seqlens values (only on capacity),
 * so one workspace serves a whole generation.
 */
#include "plan/tiles_decode.h"

#include <stdint.h>

#include "core/size.h"
#include "core/status.h"
#include "core/threads.h"
#include "plan/tiles.h"

#define FA_DECODE_KEYS 64                /* keys per step by default */
#define FA_DECODE_KV_BYTES (256u << 10)  /* one step's K/V rows of an item, as f32 */
#define FA_DECODE_ROWS 128               /* most rows per item by default */
#define FA_DECODE_SPLIT_KEYS 512         /* fewest keys of capacity per split */
#define FA_DECODE_UNITS 8                /* work units a thread, when splitting */
#define FA_DECODE_PART_BYTES (8u << 20)  /* partial results of all splits, at most */
/* Floating-point work a call needs for each thread it wakes: a few
 * microseconds of one core, about what starting the parallel region and
 * sharing out its items cost (docs/performance.md, "One token from
 * Python"). */
#define FA_DECODE_FLOP_PER_THREAD (256.0 * 1024.0)
/* Rows per kv-head from which items take the wide path: below it reading
 * the cache bounds the item, above it the FMAs do (the crossover measured:
 * docs/performance.md). */
#define FA_DECODE_WIDE_ROWS 20
/* Wide items' Q, S and acc tiles: 585 rows at d = 128, most of a 1.25 MiB
 * L2; every query tile reads its kv-heads' cache again, so wide items take
 * as many rows as stay in L2. */
#define FA_DECODE_WIDE_BYTES (768u << 10)

/* Keys per P V call on the wide path (at most block_n). Each call loads and
 * stores its acc tiles once, so calls of NR keys paid that several times a
 * step (docs/performance.md, "The measurements behind the code's
 * constants"); 64 rows of V widened to f32 are 32 KiB at d 128. */
#define FA_DECODE_PV_KEYS 64

/* n items of at most `most` each, as even as possible: the item size. */
static int64_t even(int64_t n, int64_t most) {
    if (n < 1) return 1;
    int64_t parts = (n + most - 1) / most;
    return (n + parts - 1) / parts;
}

/* Split until each thread has about FA_DECODE_UNITS work units, scheduled
 * dynamically: a thread slowed by other work (a busy host, unequal
 * sequence lengths) then leaves its units to the others; with two units a
 * thread one slowed thread held up the call. Never cut the capacity into parts too
 * short to amortise a merge, and never let the partial results
 * (part_bytes a split) pass FA_DECODE_PART_BYTES, unless two units a
 * thread need it. */
static int auto_splits(int64_t items, int threads, int64_t capacity, size_t part_bytes) {
    /* no work items (seq_q or batch 0: an append-only step) need no split */
    if (items < 1 || items >= FA_DECODE_UNITS * (int64_t)threads) return 1;
    int64_t s = (FA_DECODE_UNITS * (int64_t)threads + items - 1) / items;
    const int64_t by_bytes = (int64_t)(FA_DECODE_PART_BYTES / (part_bytes ? part_bytes : 1));
    const int64_t two_each = (2 * (int64_t)threads + items - 1) / items;
    if (s > by_bytes) s = by_bytes > two_each ? by_bytes : two_each;
    const int64_t most = capacity / FA_DECODE_SPLIT_KEYS;
    if (s > most) s = most;
    if (s > FLASHATTN_MAX_SPLITS) s = FLASHATTN_MAX_SPLITS;
    return s < 1 ? 1 : (int)s;
}

/* Splits and kv-head blocks for about `units` work units, whatever the
 * thread count: splits first (they keep an item's adjacent kv-heads
 * streaming together), within FA_DECODE_SPLIT_KEYS keys a split; then, when
 * that leaves fewer than half the units (keys too few to split), smaller
 * kv-head blocks (not down to every unit: smaller blocks stream the cache
 * worse than the few units they add are worth). */
static int fixed_units(const fa_problem *pb, int units, fa_decode_plan *plan) {
    const int64_t tiles = pb->batch * plan->query_tiles;
    if (tiles < 1) return 1;
    int64_t most = pb->seq_k / FA_DECODE_SPLIT_KEYS;
    if (most > FLASHATTN_MAX_SPLITS) most = FLASHATTN_MAX_SPLITS;
    if (most < 1) most = 1;
    const int64_t items = tiles * plan->head_blocks;
    int64_t s = (units + items - 1) / items;
    if (s > most) s = most;
    if (s < 1) s = 1;
    if (2 * items * s < units && plan->heads_per_item > 1 && plan->threads > 1) {
        const int64_t blocks = (units + tiles * s - 1) / (tiles * s);
        const int64_t h = pb->heads_kv / blocks;
        plan->heads_per_item = (int)even(pb->heads_kv, h < 1 ? 1 : h);
        plan->head_blocks = (pb->heads_kv + plan->heads_per_item - 1) / plan->heads_per_item;
    }
    return (int)s;
}

flashattn_status fa_plan_decode(const fa_decode_problem *dp, const flashattn_params *p,
                                const fa_kernels *kern, int units, int wide,
                                fa_decode_plan *plan) {
    const fa_problem *pb = &dp->base;
    /* d: Q's and K's; dpad: V's and O's, padded (acc's rows); kvpad: the
     * wider of K's and V's padded rows */
    const size_t d = (size_t)pb->head_dim, dpad = (size_t)pb->head_dim_v_pad;
    const size_t kvpad = (size_t)(pb->head_dim_pad > pb->head_dim_v_pad ? pb->head_dim_pad : pb->head_dim_v_pad);
    const int64_t group = pb->group;
    plan->threads = fa_threads_or_default(p->num_threads);
    /* Every query row against every key of the capacity: a bound on the
     * work (the lengths may be shorter), in double, as sizes may be near
     * the int64 limits. Threads never change results, only the time. */
    const double flop = 2.0 * (double)pb->batch_q * (double)pb->heads_q * (double)pb->rows_q *
                        (double)pb->seq_k * (double)(pb->head_dim + pb->head_dim_v);
    if (flop < FA_DECODE_FLOP_PER_THREAD * plan->threads)
        plan->threads = flop < 2.0 * FA_DECODE_FLOP_PER_THREAD ? 1
                                                              : (int)(flop / FA_DECODE_FLOP_PER_THREAD);
    /* Keys are gemm_nt's n (S = Q K^T) and the GEMM's k (P V) here, so any
     * step size works, unlike the forward's NR multiples. */
    if (p->block_n > FA_MAX_BLOCK || p->block_m > FA_MAX_BLOCK)
        return fa_fail(FLASHATTN_ERR_BAD_TILE, "block_m=%d, block_n=%d: each must be <= %d",
                       p->block_m, p->block_n, FA_MAX_BLOCK);
    plan->block_n = p->block_n > 0 ? p->block_n : FA_DECODE_KEYS;
    const size_t bn = (size_t)plan->block_n;

    /* As many adjacent kv-heads as keep one step's rows near 256 KiB and
     * an item's rows near FA_DECODE_ROWS; the blocks evened out. */
    int64_t heads = (int64_t)(FA_DECODE_KV_BYTES / (bn * kvpad * sizeof(float)));
    if (heads * group > FA_DECODE_ROWS) heads = FA_DECODE_ROWS / group;
    if (heads > pb->heads_kv) heads = pb->heads_kv;
    if (heads < 1) heads = 1;
    plan->heads_per_item = (int)even(pb->heads_kv, heads);
    plan->head_blocks = (pb->heads_kv + plan->heads_per_item - 1) / plan->heads_per_item;

    /* block_m counts rows per kv-head (group per query position). */
    int64_t queries = p->block_m > 0 ? p->block_m / group
                                     : FA_DECODE_ROWS / (plan->heads_per_item * group);
    plan->queries_per_item = (int)even(pb->seq_q, queries < 1 ? 1 : queries);

    /* Enough rows per kv-head make the item compute-bound: the wide path.
     * Then, unless block_m says otherwise, rows per kv-head come first
     * (every query tile reads its kv-heads' whole cache again), and the
     * kv-heads per item fill the rest of FA_DECODE_ROWS. */
    const int64_t wide_q = p->block_m > 0 ? plan->queries_per_item
                                          : even(pb->seq_q, FA_DECODE_ROWS / group < 1
                                                                ? 1
                                                                : FA_DECODE_ROWS / group);
    plan->wide_piece = wide || group * wide_q >= FA_DECODE_WIDE_ROWS ? kern->nr : 0;
    if (plan->wide_piece && p->block_m <= 0) {
        /* Every query tile widens its kv-heads' cache again, so wide items
         * take as many rows as keep their Q, S and acc tiles within
         * FA_DECODE_WIDE_BYTES (but at least FA_DECODE_ROWS). */
        const size_t sld = fa_round_up(bn, FA_COL_ALIGN) + FA_COL_ALIGN;
        int64_t cap = (int64_t)(FA_DECODE_WIDE_BYTES / ((d + sld + dpad) * sizeof(float)));
        if (cap < FA_DECODE_ROWS) cap = FA_DECODE_ROWS;
        plan->queries_per_item = (int)even(pb->seq_q, cap / group < 1 ? 1 : cap / group);
        int64_t h = cap / (group * plan->queries_per_item);
        if (h > heads) h = heads;
        plan->heads_per_item = (int)even(pb->heads_kv, h < 1 ? 1 : h);
        plan->head_blocks = (pb->heads_kv + plan->heads_per_item - 1) / plan->heads_per_item;
    }
    plan->query_tiles = (pb->seq_q + plan->queries_per_item - 1) / plan->queries_per_item;
    const int fixed_splits = units > 0 ? fixed_units(pb, units, plan) : 0;
    plan->rows = (int64_t)plan->heads_per_item * group * plan->queries_per_item;

    const int64_t items = pb->batch * plan->head_blocks * plan->query_tiles;
    /* one split's partial O and LSE (f32), as sized below (SIZE_MAX when
     * that overflows, which the sizing below then reports) */
    size_t part_bytes;
    if (!fa_mul_size((size_t)pb->batch_q, (size_t)pb->heads_q, &part_bytes) ||
        !fa_mul_size(part_bytes, (size_t)pb->rows_q, &part_bytes) ||
        !fa_mul_size(part_bytes, (dpad + 1) * sizeof(float), &part_bytes))
        part_bytes = SIZE_MAX;
    plan->num_splits = p->num_splits > 0 ? p->num_splits
                       : fixed_splits    ? fixed_splits
                                         : auto_splits(items, plan->threads, pb->seq_k, part_bytes);

    /* rows <= max(FA_DECODE_ROWS, FA_DECODE_WIDE_BYTES / 16, group) *
     * FA_MAX_BLOCK, heads <= 2^16: no overflow in 64-bit size_t here. */
    const size_t rows = (size_t)plan->rows;
    /* The wide path's GEMM writes whole multiples of 16 columns of S from
     * any key of a step: up to 15 columns past block_n. */
    plan->s_stride = plan->wide_piece ? (int)fa_round_up(bn, FA_COL_ALIGN) + FA_COL_ALIGN
                                      : (int)bn;
    const size_t piece = (size_t)plan->wide_piece, f = sizeof(float);
    plan->pv_piece = plan->wide_piece ? (int)(bn < FA_DECODE_PV_KEYS ? bn : FA_DECODE_PV_KEYS) : 0;
    size_t widened = piece * kvpad; /* K panel [d][NR] */
    if ((size_t)plan->pv_piece * dpad > widened) /* V rows [pv_piece][dp] */
        widened = (size_t)plan->pv_piece * dpad;
    fa_layout_init(&plan->thread, "decode thread");
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_Q, "q", 1, rows * d * f);
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_S, "s", 1, rows * (size_t)plan->s_stride * f);
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_ACC, "acc", 1, rows * dpad * f);
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_MAX, "row max", 1, rows * f);
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_SUM, "row sum", 1, rows * f);
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_WIDE, "widened piece", 1, widened * f);
    const size_t long_rows = pb->seq_k > FA_SUM_CHUNK ? rows : 0;
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_TOTAL_ACC, "total acc", 1, long_rows * dpad * sizeof(double));
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_TOTAL_SUM, "total row sum", 1, long_rows * sizeof(double));
    fa_layout_array(&plan->thread, FA_DECODE_THREAD_TOTAL_MAX, "total row max", 1, long_rows * f);

    size_t heads_rows = 0, o = 0;
    if (plan->num_splits > 1 &&
        (!fa_mul_size((size_t)pb->batch_q, (size_t)pb->heads_q, &heads_rows) ||
         !fa_mul_size(heads_rows, (size_t)pb->rows_q, &heads_rows) ||
         !fa_mul_size(heads_rows, dpad * f, &o) || !fa_mul_size(heads_rows, f, &heads_rows)))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "decode partial results overflow size_t");
    fa_layout_init(&plan->part, "decode split");
    fa_layout_array(&plan->part, FA_DECODE_PART_O, "partial o", 1, o);
    fa_layout_array(&plan->part, FA_DECODE_PART_LSE, "partial lse", 1, heads_rows);

    fa_layout_init(&plan->ws, "decode workspace");
    fa_layout_array(&plan->ws, FA_DECODE_WS_THREADS, "threads", (size_t)plan->threads, plan->thread.size);
    fa_layout_array(&plan->ws, FA_DECODE_WS_PARTS, "splits",
                    plan->num_splits > 1 ? (size_t)plan->num_splits : 0, plan->part.size);
    if (plan->thread.overflow || plan->part.overflow || plan->ws.overflow)
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "workspace size overflows size_t");
    plan->workspace_bytes = fa_layout_workspace_bytes(&plan->ws);
    return FLASHATTN_OK;
}
