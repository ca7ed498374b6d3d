/*
 * Tile choice for the forward pass.
 *
 * Footprint of one work item (f32, d = head_dim, dp = d rounded up to 16):
 *     Q tile   block_m * d            read by every Q.K^T step
 *     S/P tile block_m * block_n      written by Q.K^T, read by P.V
 *     O acc    block_m * dp           read-modify-written by every P.V step
 *     K panel  block_n * d            streamed once per step
 *     V rows   block_n * dp           streamed once per step
 * The per-thread tiles are kept within about half of L2 so the K/V panels
 * streaming through it (and the next one being prefetched) fit beside them.
 *
 * block_n never depends on the thread count: rows see the same kv-blocks in
 * the same order whatever the threads, which is what makes results
 * bit-identical across thread counts. block_m may shrink so short sequences
 * still give every thread work (the source documents' dynamic tile choice);
 * a row's arithmetic does not depend on block_m (see kernels.h).
 */
#include "plan/tiles.h"

#include "api/status.h"
#include "api/validate.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define FA_ALIGN_FLOATS 16 /* 64-byte alignment of every workspace region */
#define FA_PACK_BUDGET_BYTES ((size_t)64 << 20)

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int auto_block_n(const fa_problem *pb, const fa_kernels *kern) {
    int bn = pb->head_dim > 128 ? 128 : 256;
    int64_t need = (int64_t)round_up((size_t)(pb->seq_k > 0 ? pb->seq_k : 1), (size_t)kern->nr);
    if (need < bn) bn = (int)need;
    return bn;
}

static int auto_block_m(const fa_problem *pb, const fa_kernels *kern, int threads) {
    int bm = pb->head_dim > 128 ? 48 : 96;
    bm = bm / kern->mr * kern->mr;
    if (bm < kern->mr) bm = kern->mr;
    /* Enough work items for every thread (4 per thread evens out causal's
     * unequal items), but never below one register tile of rows. */
    int64_t heads = pb->batch * pb->heads_q;
    while (bm > kern->mr && heads * ((pb->seq_q + bm - 1) / bm) < 4 * (int64_t)threads)
        bm -= kern->mr;
    int64_t rows = pb->seq_q > 0 ? pb->seq_q : 1;
    if (rows < bm) bm = (int)round_up((size_t)rows, (size_t)kern->mr);
    return bm;
}

flashattn_status fa_plan_fwd(const fa_problem *pb, const flashattn_params *p,
                             const fa_kernels *kern, fa_fwd_plan *plan) {
    plan->threads = p->num_threads > 0 ? p->num_threads : default_threads();
    if (p->block_n > 0) {
        if (p->block_n % kern->nr != 0 || p->block_n > FA_MAX_BLOCK)
            return fa_fail(FLASHATTN_ERR_BAD_TILE,
                           "block_n=%d: must be a multiple of %d (the %s kernel's NR) and <= %d",
                           p->block_n, kern->nr, kern->isa, FA_MAX_BLOCK);
        plan->block_n = p->block_n;
    } else {
        plan->block_n = auto_block_n(pb, kern);
    }
    if (p->block_m > 0) {
        if (p->block_m > FA_MAX_BLOCK)
            return fa_fail(FLASHATTN_ERR_BAD_TILE, "block_m=%d: must be <= %d", p->block_m,
                           FA_MAX_BLOCK);
        plan->block_m = p->block_m;
    } else {
        plan->block_m = auto_block_m(pb, kern, plan->threads);
    }

    const size_t d = (size_t)pb->head_dim, dp = (size_t)pb->head_dim_pad;
    const size_t bm = (size_t)plan->block_m, bn = (size_t)plan->block_n;
    size_t kpanels = ((size_t)pb->seq_k + (size_t)kern->nr - 1) / (size_t)kern->nr;
    size_t kf, vf;
    if (!fa_mul_size(kpanels * (size_t)kern->nr, d, &kf) ||
        !fa_mul_size((size_t)pb->seq_k, dp, &vf))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "packed K/V size overflows");
    plan->kpack_floats = round_up(kf, FA_ALIGN_FLOATS);
    plan->vpack_floats = round_up(vf, FA_ALIGN_FLOATS);
    plan->thread_floats = round_up(bm * d, FA_ALIGN_FLOATS) + round_up(bm * bn, FA_ALIGN_FLOATS) +
                          round_up(bm * dp, FA_ALIGN_FLOATS) + 2 * round_up(bm, FA_ALIGN_FLOATS);

    /* Pack several small groups per pass so short sequences still spread
     * over the threads, within a byte budget; one group always fits. */
    size_t group_bytes = (plan->kpack_floats + plan->vpack_floats) * sizeof(float);
    int64_t groups = pb->batch * pb->heads_kv;
    int64_t per_pass = group_bytes ? (int64_t)(FA_PACK_BUDGET_BYTES / group_bytes) : groups;
    if (per_pass > groups) per_pass = groups;
    if (per_pass < 1) per_pass = 1;
    plan->groups_per_pass = per_pass;

    size_t total, part;
    if (!fa_mul_size(group_bytes, (size_t)per_pass, &total) ||
        !fa_mul_size(plan->thread_floats * sizeof(float), (size_t)plan->threads, &part) ||
        !fa_add_size(total, part, &total) || !fa_add_size(total, 64, &total))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "workspace size overflows size_t");
    plan->workspace_bytes = total;
    return FLASHATTN_OK;
}
