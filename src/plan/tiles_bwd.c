/*
 * Tile choice for the backward pass.
 *
 * A work item owns block_n keys and walks the q-blocks that see them, one
 * block_m x block_n tile at a time. Per thread (f32, d = head_dim, dv =
 * head_dim_v, dp and dvp those padded):
 *     K, V rows + a -1 column   block_n * (d + dv + 2)  A operands of S^T, dP^T
 *     K^T                       d * block_n             A operand of dQ^T
 *     dK, dV accumulators       block_n * (dp + dvp)    read-modify-written every step
 *     S^T/P^T, dP^T/dS^T        2 * block_n * block_m
 *     dQ^T tile                 d * block_m
 * plus, streamed per step from the packed heads, Qs/dO rows and panels
 * (2 * block_m * (d + dv + 2)). block_m is 128; block_n fills 3/4 of L2 with
 * the item's data (auto_block_n), but is never below FA_BWD_MIN_KEYS, and
 * the keys are then split into items of even size (a few keys under the
 * floor where the cap forces one more item).
 * Smaller tiles run slower (docs/performance.md): the dK/dV products run
 * over block_m query rows per call and the dQ product over block_n keys,
 * short calls spend more of their time loading and storing the C tile,
 * and each Q/dO panel streamed from L2 serves block_n / MR tiles. Where
 * L2 is small the item's data then overflows it into L3, which costs less
 * than the shorter calls would.
 *
 * block_n and the number of deterministic chunks never depend on the thread
 * count: a dQ element is summed per kv-block and then over kv-blocks in an
 * order fixed by them alone. dK and dV do not depend on block_m at all
 * (each element is one FMA chain over the query rows in order, kernels.h).
 */
#include "plan/tiles_bwd.h"

#include <math.h>
#include <stdatomic.h>

#include "core/share.h"
#include "core/size.h"
#include "core/status.h"
#include "core/threads.h"
#include "plan/cpu_caches.h"
#include "plan/tiles.h"

/* Packed heads and dQ accumulators of the groups processed at once. */
#define FA_BWD_PASS_BUDGET_BYTES ((size_t)128 << 20)
/* Least work of a pass a thread (pass_groups). */
#define FA_BWD_PASS_FLOPS 134217728.0
/* A work item's share of L2 (3/4), L2 when it is unknown, most keys per item. */
#define FA_BWD_L2_SHARE_NUM 3
#define FA_BWD_L2_SHARE_DEN 4
#define FA_BWD_L2_DEFAULT ((int64_t)1 << 20)
#define FA_BWD_MAX_KEYS 360
/* Fewest keys per item the L2 share may give (docs/performance.md). */
#define FA_BWD_MIN_KEYS 252
/* dK and dV elements (both together) from which they are written around
 * the caches (kern->store_stream): 4 MiB of f32. Few queries against many
 * keys make the backward a stream of K, V in and dK, dV out, where plain
 * stores read every line before writing it and push K and V out of the
 * caches; long query ranges write dK and dV once after much work, where
 * streaming neither helps nor hurts. */
#define FA_BWD_STREAM_ELEMS ((int64_t)1 << 20)

/* *r = a * b * c, or 0 on overflow. */
static int bytes3(size_t a, size_t b, size_t c, size_t *r) {
    size_t t;
    return fa_mul_size(a, b, &t) && fa_mul_size(t, c, r);
}

/* Keys per work item: whole register tiles down the key rows, as many as
 * keep the item's own data within FA_BWD_L2_SHARE of L2 (per key: K and V
 * rows with their -1 column, K^T, dK and dV, the S^T and dP^T rows of a
 * block_m step; plus the dQ^T tile), at least FA_BWD_MIN_KEYS, at most
 * FA_BWD_MAX_KEYS. More keys per item means each streamed Q/dO panel
 * serves more register tiles while it is in L1. Depends on the problem
 * and the CPU, never on the thread count. */
static int auto_block_n(const fa_problem *pb, const fa_kernels *kern, int64_t bm) {
    const int64_t d = pb->head_dim, dp = pb->head_dim_pad, mr = kern->mr;
    const int64_t dv = pb->head_dim_v, dvp = pb->head_dim_v_pad;
    const fa_cpu_caches *cc = fa_cpu_caches_get();
    const int64_t l2 = cc->l2_bytes > 0 ? cc->l2_bytes : FA_BWD_L2_DEFAULT;
    const int64_t per_key = (int64_t)sizeof(float) * ((d + 1) + (dv + 1) + d + dp + dvp + 2 * bm);
    const int64_t fixed = (int64_t)sizeof(float) * d * bm;
    int64_t bn = (l2 * FA_BWD_L2_SHARE_NUM / FA_BWD_L2_SHARE_DEN - fixed) / per_key / mr * mr;
    if (bn < FA_BWD_MIN_KEYS / mr * mr) bn = FA_BWD_MIN_KEYS / mr * mr;
    if (bn > FA_BWD_MAX_KEYS / mr * mr) bn = FA_BWD_MAX_KEYS / mr * mr;
    if (bn < mr) bn = mr;
    const int64_t need = (pb->seq_k + mr - 1) / mr * mr;
    if (need <= bn) return (int)(need > 0 ? need : 1);
    /* The keys in items of even size, each at least bn where the cap
     * allows: the rule's bn alone left a last item of a few keys (seq 256:
     * 252 and 4), a work item as long as the others' barrier wait. */
    int64_t items = need / bn;
    int64_t even = (need + items - 1) / items;
    if ((even + mr - 1) / mr * mr > FA_BWD_MAX_KEYS / mr * mr) even = (need + items) / (items + 1);
    return (int)((even + mr - 1) / mr * mr);
}

/* Groups a pass packs. As few as keep each thread's packed heads in its
 * own L2 from the packing to the work items (a thread's range of a phase
 * is its own groups of the pass, driver/bwd.c): one a thread. But enough
 * that the three barriers of a pass cost little against its work (at
 * least FA_BWD_PASS_FLOPS a thread), and that a pass has two work items a
 * thread (items: a group's kv items) for the threads' taking from each
 * other's ranges to even out. One thread waits for no one, and packs one
 * group at a time. Packing the whole batch at once left the panels to
 * come back from L3; passes of one group a thread at seq 128 met their
 * barriers too often (docs/performance.md). */
static int64_t pass_groups(const fa_problem *pb, int threads, int64_t items) {
    const int64_t groups = pb->batch * pb->heads_kv;
    if (threads <= 1 || groups < 1) return 1;
    if (items < 1) items = 1;
    int64_t per_pass = (2 * (int64_t)threads + items - 1) / items;
    if (per_pass < threads) per_pass = threads;
    double pairs = 0.0; /* query-key pairs of all sequences, masks aside */
    for (int64_t b = 0; b < pb->batch; b++) {
        const fa_seq seq = fa_seq_of(pb, b);
        pairs += (double)seq.seq_q * (double)seq.seq_k;
    }
    /* the five products: S^T, dK, dQ^T over head_dim, dP^T, dV over head_dim_v */
    const double flops = 2.0 * pairs * (double)pb->heads_q * (double)(3 * pb->head_dim + 2 * pb->head_dim_v);
    const double passes = floor(flops / ((double)threads * FA_BWD_PASS_FLOPS));
    if (passes < (double)groups) {
        const int64_t n = passes < 1.0 ? 1 : (int64_t)passes;
        if ((groups + n - 1) / n > per_pass) per_pass = (groups + n - 1) / n;
    }
    return per_pass;
}

static int auto_block_m(const fa_problem *pb) {
    int bm = 128;
    int64_t need = pb->seq_q > 0 ? pb->seq_q : 1;
    if (need < bm) bm = (int)need;
    return bm;
}

flashattn_status fa_plan_bwd(const fa_problem *pb, flashattn_dtype dout_dtype,
                             const flashattn_params *p, const fa_kernels *kern,
                             fa_bwd_plan *plan) {
    plan->threads = fa_threads_or_default(p->num_threads);
    plan->deterministic = p->deterministic != 0;
    if (p->block_m > FA_MAX_BLOCK || p->block_n > FA_MAX_BLOCK)
        return fa_fail(FLASHATTN_ERR_BAD_TILE, "block_m=%d, block_n=%d: each must be <= %d",
                       p->block_m, p->block_n, FA_MAX_BLOCK);
    int bm = p->block_m > 0 ? p->block_m : auto_block_m(pb);
    /* Q^T is packed in panels of nr queries and a step starts on a panel. */
    plan->block_m = (bm + kern->nr - 1) / kern->nr * kern->nr;
    plan->block_n = p->block_n > 0 ? p->block_n : auto_block_n(pb, kern, plan->block_m);

    const size_t d = (size_t)pb->head_dim, dp = (size_t)pb->head_dim_pad, nr = (size_t)kern->nr;
    const size_t dv = (size_t)pb->head_dim_v, dvp = (size_t)pb->head_dim_v_pad;
    const size_t bm_ = (size_t)plan->block_m, bn = (size_t)plan->block_n, f = sizeof(float);
    const size_t group = (size_t)pb->group;
    plan->qblocks = (pb->seq_q + plan->block_m - 1) / plan->block_m;
    plan->kvblocks = (pb->seq_k + plan->block_n - 1) / plan->block_n;
    const size_t panels = ((size_t)pb->seq_q + nr - 1) / nr;
    plan->col_panels = (pb->head_dim_pad + kern->nr - 1) / kern->nr;
    plan->col_panels_v = (pb->head_dim_v_pad + kern->nr - 1) / kern->nr;
    const size_t row_cols = (size_t)plan->col_panels * nr, row_cols_v = (size_t)plan->col_panels_v * nr;
    size_t rows_b, rows_v_b, panels_b, panels_v_b, slot_b;
    if (!bytes3((size_t)pb->seq_q, row_cols, f, &rows_b) || !bytes3((size_t)pb->seq_q, row_cols_v, f, &rows_v_b) ||
        !bytes3(panels, (d + 1) * nr, f, &panels_b) || !bytes3(panels, (dv + 1) * nr, f, &panels_v_b) ||
        !bytes3((size_t)plan->qblocks * bm_, d, f, &slot_b))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "backward workspace size overflows size_t");
    fa_layout_init(&plan->head, "bwd head");
    fa_layout_array(&plan->head, FA_BWD_HEAD_QS, "q rows", 1, rows_b);
    fa_layout_array(&plan->head, FA_BWD_HEAD_QT, "q^t panels", 1, panels_b);
    fa_layout_array(&plan->head, FA_BWD_HEAD_DOS, "do rows", 1, rows_v_b);
    fa_layout_array(&plan->head, FA_BWD_HEAD_DOT, "do^t panels", 1, panels_v_b);
    if (plan->head.overflow)
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "backward workspace size overflows size_t");

    /* Deterministic chunks: as many as the kv-blocks give, within the
     * budget; the count depends on the problem only, never on threads. */
    size_t slot_group_b;
    if (!fa_mul_size(group, fa_round_up(slot_b, FA_LAYOUT_ALIGN), &slot_group_b))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "backward workspace size overflows size_t");
    int slots = 1;
    if (plan->deterministic) {
        slots = plan->kvblocks < FA_BWD_MAX_SLOTS ? (int)plan->kvblocks : FA_BWD_MAX_SLOTS;
        if (slots < 1) slots = 1;
        while (slots > 1 && slot_group_b > FA_BWD_PASS_BUDGET_BYTES / (size_t)slots) slots /= 2;
    }
    plan->slots = slots;
    plan->shared_dq = !plan->deterministic && plan->threads > 1;
    size_t locks;
    if (!fa_mul_size(group, (size_t)plan->qblocks, &locks))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "backward workspace size overflows size_t");
    fa_layout_init(&plan->group, "bwd group");
    fa_layout_array(&plan->group, FA_BWD_GROUP_HEADS, "heads", group, plan->head.size);
    fa_layout_array(&plan->group, FA_BWD_GROUP_DQ, "dq^t", (size_t)slots * group, slot_b);
    fa_layout_scalars(&plan->group, FA_BWD_GROUP_LOCKS, "locks", locks, sizeof(atomic_int));
    if (plan->group.overflow)
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "backward workspace size overflows size_t");

    /* S^T and dP^T rows an odd number of 64-byte lines apart: dQ^T reads
     * dP^T as its B operand, a 32-float slice of every row, and at block_m
     * = 128 (8 lines) those slices fell in a quarter of L1's sets and
     * missed (docs/performance.md has the miss counts). */
    plan->tile_ld = (int64_t)fa_round_up(bm_, 16);
    if (plan->tile_ld / 16 % 2 == 0) plan->tile_ld += 16;
    const size_t lt = (size_t)plan->tile_ld;
    plan->bf16_dot = kern->bf16_dot && pb->q->dtype == FLASHATTN_BF16 &&
                     pb->k->dtype == FLASHATTN_BF16 && pb->v->dtype == FLASHATTN_BF16 &&
                     dout_dtype == FLASHATTN_BF16;
    /* packing: Qs, dO and O rows; reduce: 16 dQ rows (the rest, a zero row
     * or dO and O rows, need less) */
    const size_t pack_f = fa_round_up(row_cols, 16) + 2 * fa_round_up(row_cols_v, 16);
    const size_t row_f = pack_f > fa_round_up(16 * d, 16) ? pack_f : fa_round_up(16 * d, 16);
    fa_layout *t = &plan->thread;
    fa_layout_init(t, "bwd thread");
    fa_layout_array(t, FA_BWD_THREAD_KAUG, "k rows", 1, bn * (d + 1) * f);
    fa_layout_array(t, FA_BWD_THREAD_VAUG, "v rows", 1, bn * (dv + 1) * f);
    fa_layout_array(t, FA_BWD_THREAD_KT, "k^t", 1, d * bn * f);
    fa_layout_array(t, FA_BWD_THREAD_DK, "dk", 1, bn * dp * f);
    fa_layout_array(t, FA_BWD_THREAD_DV, "dv", 1, bn * dvp * f);
    fa_layout_array(t, FA_BWD_THREAD_ST, "s^t", 1, bn * lt * f);
    fa_layout_array(t, FA_BWD_THREAD_DPT, "dp^t", 1, bn * lt * f);
    fa_layout_array(t, FA_BWD_THREAD_DQT, "dq^t", 1, d * bm_ * f);
    fa_layout_array(t, FA_BWD_THREAD_ROW, "rows", 1, row_f * f);
    const int cap = pb->softcap2 != 0.0f, drop = fa_dropout_on(&pb->dropout);
    fa_layout_array(t, FA_BWD_THREAD_COLS, "lse and d", 1,
                    plan->bf16_dot || cap || drop ? 2 * fa_round_up(bm_, 16) * f : 0);
    fa_layout_array(t, FA_BWD_THREAD_DCAP, "softcap's 1 - tanh^2", 1, cap ? bn * lt * f : 0);
    fa_layout_array(t, FA_BWD_THREAD_DROP, "dropout's Z", 1, drop ? bn * lt * f : 0);
    /* (products of validated sizes: heads_kv * head_dim and seq_k fit) */
    plan->stream_dkv =
        pb->k->batch * pb->k->seqlen * pb->heads_kv * (pb->head_dim + pb->head_dim_v) >= FA_BWD_STREAM_ELEMS;

    const int64_t groups = pb->batch * pb->heads_kv;
    const size_t group_bytes = plan->group.size;
    int64_t per_pass = pass_groups(pb, plan->threads, plan->deterministic ? plan->slots : plan->kvblocks);
    if (group_bytes && per_pass > (int64_t)(FA_BWD_PASS_BUDGET_BYTES / group_bytes))
        per_pass = (int64_t)(FA_BWD_PASS_BUDGET_BYTES / group_bytes);
    if (per_pass > groups) per_pass = groups;
    if (per_pass < 1) per_pass = 1;
    plan->groups_per_pass = per_pass;

    fa_layout_init(&plan->ws, "bwd workspace");
    fa_layout_array(&plan->ws, FA_BWD_WS_GROUPS, "groups", (size_t)per_pass, group_bytes);
    fa_layout_array(&plan->ws, FA_BWD_WS_THREADS, "threads", (size_t)plan->threads, t->size);
    size_t tiles = 0;
    if (pb->mask && (!fa_mul_size((size_t)(pb->mask->batch * pb->mask->heads), (size_t)plan->qblocks, &tiles) ||
                     !fa_mul_size(tiles, (size_t)plan->kvblocks, &tiles)))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "mask tile summary overflows size_t");
    fa_layout_array(&plan->ws, FA_BWD_WS_TILES, "mask tiles", 1, tiles);
    fa_layout_array(&plan->ws, FA_BWD_WS_SHARE, "work ranges", FA_BWD_SHARE_KINDS * (size_t)plan->threads,
                    sizeof(fa_share_range));
    if (t->overflow || plan->ws.overflow)
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "backward workspace size overflows size_t");
    plan->workspace_bytes = fa_layout_workspace_bytes(&plan->ws);
    return FLASHATTN_OK;
}
