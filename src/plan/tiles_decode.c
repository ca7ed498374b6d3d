/*
 * Decode planning. Decode is bound by reading the cache, so the plan is
 * about keeping every thread streaming: work items are (sequence, kv-head,
 * row tile, split), and keys are split only when the other three leave
 * threads without work (split-KV, "flash-decoding").
 *
 * Footprint of one work item (f32, d = head_dim, dp = d rounded up to 16,
 * bm = block_m, bn = block_n):
 *     Q        bm * d     the rows' queries
 *     S/P      bm * bn
 *     acc      bm * dp
 *     K/V rows bn * dp    one step of cache rows widened to f32, K then V
 *     addresses 3 * bn    of this step's K and V rows and the next K rows
 * With bn = 64 and d = 128 the K/V rows are 32 KiB: they stay in L1/L2
 * between the conversion and the kernel that consumes them.
 *
 * The workspace never depends on the seqlens values (only on capacity),
 * so one workspace serves a whole generation.
 */
#include "plan/tiles_decode.h"

#include <stdint.h>

#include "api/status.h"
#include "api/validate.h"
#include "plan/tiles.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define FA_ALIGN_FLOATS 16
#define FA_DECODE_ROWS 64        /* most query rows per work item by default */
#define FA_DECODE_KEYS 64        /* keys per step by default */
#define FA_DECODE_SPLIT_KEYS 512 /* fewest keys of capacity per split */

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Even row tiles of at most FA_DECODE_ROWS rows. */
static int auto_block_m(int64_t rows) {
    if (rows < 1) return 1;
    int64_t tiles = (rows + FA_DECODE_ROWS - 1) / FA_DECODE_ROWS;
    return (int)((rows + tiles - 1) / tiles);
}

/* Split only when the other dimensions leave threads idle; then give each
 * thread about two items so unequal sequence lengths even out. Never cut
 * the capacity into parts too short to amortise a merge. */
static int auto_splits(int64_t items, int threads, int64_t capacity) {
    if (items >= threads) return 1;
    int64_t s = (2 * (int64_t)threads + items - 1) / items;
    int64_t most = capacity / FA_DECODE_SPLIT_KEYS;
    if (s > most) s = most;
    if (s > FLASHATTN_MAX_SPLITS) s = FLASHATTN_MAX_SPLITS;
    return s < 1 ? 1 : (int)s;
}

flashattn_status fa_plan_decode(const fa_decode_problem *dp, const flashattn_params *p,
                                const fa_kernels *kern, fa_decode_plan *plan) {
    const fa_problem *pb = &dp->base;
    plan->threads = p->num_threads > 0 ? p->num_threads : default_threads();
    /* Keys are gemm_nt's n (S = Q K^T) and the GEMM's k (P V) here, so any
     * step size works, unlike the forward's NR multiples. */
    if (p->block_n > FA_MAX_BLOCK)
        return fa_fail(FLASHATTN_ERR_BAD_TILE, "block_n=%d: must be <= %d", p->block_n,
                       FA_MAX_BLOCK);
    plan->block_n = p->block_n > 0 ? p->block_n : FA_DECODE_KEYS;
    const int64_t rows = pb->group * pb->seq_q;
    if (p->block_m > 0) {
        if (p->block_m > FA_MAX_BLOCK)
            return fa_fail(FLASHATTN_ERR_BAD_TILE, "block_m=%d: must be <= %d", p->block_m,
                           FA_MAX_BLOCK);
        plan->block_m = p->block_m;
    } else {
        plan->block_m = auto_block_m(rows);
    }
    plan->row_tiles = (rows + plan->block_m - 1) / plan->block_m;

    const int64_t items = pb->batch * pb->heads_kv * plan->row_tiles;
    plan->num_splits = p->num_splits > 0 ? p->num_splits
                                         : auto_splits(items, plan->threads, pb->seq_k);

    const size_t d = (size_t)pb->head_dim, dpad = (size_t)pb->head_dim_pad;
    const size_t bm = (size_t)plan->block_m, bn = (size_t)plan->block_n;
    /* block_m, block_n <= FA_MAX_BLOCK and d <= 256: no overflow here. */
    plan->thread_floats = round_up(bm * d, FA_ALIGN_FLOATS) + round_up(bm * bn, FA_ALIGN_FLOATS) +
                          round_up(bm * dpad, FA_ALIGN_FLOATS) + round_up(bn * dpad, FA_ALIGN_FLOATS) +
                          2 * round_up(bm, FA_ALIGN_FLOATS) +
                          round_up(3 * bn * sizeof(const char *) / sizeof(float), FA_ALIGN_FLOATS);

    plan->part_floats = plan->part_lse_floats = 0;
    if (plan->num_splits > 1) {
        size_t heads_rows, o;
        /* heads_rows <= o <= SIZE_MAX / 2: rounding up cannot overflow. */
        if (!fa_mul_size((size_t)pb->batch, (size_t)pb->heads_q, &heads_rows) ||
            !fa_mul_size(heads_rows, (size_t)pb->seq_q, &heads_rows) ||
            !fa_mul_size(heads_rows, dpad, &o) || o > SIZE_MAX / 2)
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "decode partial results overflow size_t");
        plan->part_floats = round_up(o, FA_ALIGN_FLOATS);
        plan->part_lse_floats = round_up(heads_rows, FA_ALIGN_FLOATS);
    }

    size_t total, per_split, parts;
    if (!fa_mul_size(plan->thread_floats * sizeof(float), (size_t)plan->threads, &total) ||
        !fa_add_size(plan->part_floats, plan->part_lse_floats, &per_split) ||
        !fa_mul_size(per_split, (size_t)plan->num_splits, &parts) ||
        !fa_mul_size(parts, sizeof(float), &parts) || !fa_add_size(total, parts, &total) ||
        !fa_add_size(total, 64, &total))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "workspace size overflows size_t");
    plan->workspace_bytes = total;
    return FLASHATTN_OK;
}
