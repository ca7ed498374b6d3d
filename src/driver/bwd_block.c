/*
 * One work item of the backward pass (FlashAttention-2's, with recomputation):
 * the keys [j0, j1) of one (batch, kv-head) against every q-block, of every
 * query head of the group, that sees them.
 *
 * Tiles are kept transposed, keys down the rows, so that every operand of
 * every product is already in the layout the GEMM contract wants (A read by
 * rows, B as rows of at most nr floats) and no tile is ever transposed:
 *
 *   S^T  = [K | -1] [Qs | lse2]^T     Qs = Q*scale*log2(e), lse2 = LSE*log2(e):
 *                                     S^T - LSE in base 2, in one FMA chain
 *   P^T  = exp2(S^T)                  masked entries are -inf, so P = 0
 *   dP^T = [V | -1] [dO | D]^T        (dO V^T - D)^T, D = rowsum(dO * O)
 *   dS^T = P^T * dP^T                 elementwise
 *   dV  += P^T dO
 *   dK  += dS^T (Q * scale)
 *   dQ^T += K^T dS^T                  (times scale when stored, by the driver)
 *
 * The packed Qs^T and dO^T panels carry lse2 and D as an extra row, which is
 * why K and V get a -1 column: the per-query subtractions ride in the GEMMs.
 *
 * On the bf16 dot-product route (plan->bf16_dot) the two products whose
 * operands are the caller's bf16 tensors, S^T and dP^T, run on gemm_bf16:
 * K and V rows as given, Q^T and dO^T panels of pairs (bwd.c), S^T the
 * forward's S bit for bit; lse2 and D are subtracted after them (the f32
 * chain ends with that same single rounding). dV, dK and dQ stay on f32
 * GEMMs: rounding P and dS to bf16 for them, as FlashAttention-2 does on
 * GPUs, put the gradients' error past the 2x of plain f32 attention that
 * every path is held to (docs/performance.md); with f32 GEMMs the bf16
 * rounding of the outputs dominates.
 */
#include <math.h>
#include <string.h>

#include "core/mask.h"
#include "core/size.h"
#include "driver/bwd.h"
#include "driver/careful.h"
#include "driver/pack.h"
#include "driver/score.h"
#include "driver/strips.h"

/* This item's keys and its thread's tiles. */
typedef struct {
    int64_t j0, j1;
    const float *kaug, *vaug, *kt; /* [keys][d+1], [keys][dv+1], [d][block_n] */
    float *dk, *dv;                /* [keys][dp], [keys][dvp] accumulators */
    float *st, *dpt, *dqt;         /* [keys][tile_ld] twice, [d][bm] */
    float *cols;                   /* dot route or softcap: lse2 and D of a step's queries */
    float *dcap;                   /* softcap: 1 - tanh^2, [keys][tile_ld] */
    float *drop;                   /* dropout: Z, [keys][tile_ld] */
    fa_strips cut;                 /* the keys' strips of at most mr (driver/strips.h) */
    fa_strips dcut;                /* dQ^T's head_dim rows in strips too */
} kv_item;

static void acquire(atomic_int *l) {
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        while (atomic_load_explicit(l, memory_order_relaxed)) {
        }
}

/* Query rows [i0, i1) of one packed head (its four parts), and their
 * q-block's dQ^T accumulator; lock NULL: dq is this item's alone. */
typedef struct {
    const float *qs, *qt, *dos, *dot;
    int64_t i0, i1;
    float *dq;
    atomic_int *lock;
    int64_t h; /* the query head */
    int open;  /* every query sees every key of the item (the mask cuts no row) */
} q_tile;

/* dL/dbias += dS of key j (sequence-relative) for the tile's queries
 * [a, cm) (the others' dS is 0 there: the mask hides the key from them):
 * the logit's gradient after the bias, before the softcap's factor. Only
 * this item writes these elements (validate.c's check_dbias), in the
 * order of its heads, q-blocks and queries: deterministic. */
static void add_dbias(const fa_bwd_problem *pb, const fa_seq *seq, const q_tile *q, int64_t j,
                      const float *ds, int64_t a, int64_t cm) {
    const flashattn_scores *t = pb->dbias;
    const int64_t tb = t->batch > 1 ? seq->idx : 0, th = t->heads > 1 ? q->h : 0;
    float *at = (float *)t->data + tb * t->stride_batch + th * t->stride_head +
                (t->seq_k > 1 ? j : 0) * t->stride_k;
    if (t->seq_q > 1)
        for (int64_t c = a; c < cm; c++) at[(q->i0 + c) * t->stride_q] += ds[c];
    else
        for (int64_t c = a; c < cm; c++) at[0] += ds[c];
}

/* Dropout on key rows [r0, r0 + mm) of a tile, over their columns [a, e),
 * where S^T holds P^T and dP^T holds dP'^T - D (dP' = dO V^T, the
 * gradient of P Z): with Z the mask over 1 - p,
 *   dS = P (Z dP' - D)   and   P^T becomes (P Z)^T for dV,
 * D = rowsum(dO * O) being dO . (P Z) V already. Z^T comes from
 * dropout_cols, the forward's mask transposed; the update then runs along
 * the tile's rows. dd: D of the tile's queries. */
static void dropout_rows(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                         const fa_seq *seq, const kv_item *t, const q_tile *q, int64_t m,
                         const float *dd, int r0, int mm, int64_t a, int64_t e) {
    const fa_problem *f = &pb->f;
    const int64_t lt = plan->tile_ld, cm = e < m ? e : m;
    uint32_t key[2];
    fa_dropout_key(&f->dropout, seq->idx * f->heads_q + q->h, key);
    float *z = t->drop + r0 * lt;
    if (cm > a)
        kern->dropout_cols(z + a, lt, mm, cm - a, key, (uint32_t)(q->i0 + a), f->dropout.offset,
                           t->j0 + r0, f->dropout.threshold, f->dropout.scale);
    for (int r = 0; r < mm; r++)
        for (int64_t c = cm > a ? cm : a; c < e; c++) z[r * lt + c] = 0.0f;
    for (int r = r0; r < r0 + mm; r++) {
        float *p = t->st + r * lt, *ds = t->dpt + r * lt;
        const float *zr = t->drop + r * lt;
        if (kern->careful)
            for (int64_t c = a; c < e; c++) {
                ds[c] = fa_careful_mul(p[c], zr[c] * (ds[c] + dd[c]) - dd[c]);
                p[c] = fa_careful_mul(p[c], zr[c]);
            }
        else
            for (int64_t c = a; c < e; c++) {
                ds[c] = p[c] * (zr[c] * (ds[c] + dd[c]) - dd[c]);
                p[c] *= zr[c];
            }
    }
}

/* The columns [*a, *e) of the tile that key rows [r, r + mm) compute:
 * whole panels of nr queries that see any of the keys, within m16; the
 * mask hides the rest of the rows from every query (their P, dS are 0),
 * so a causal or windowed tile's products skip them. All of them when
 * the mask cuts no row of the tile (q->open). */
static void strip_span(const fa_seq *seq, const kv_item *t, const q_tile *q, int r, int mm, int nr,
                       int64_t m16, int64_t *a, int64_t *e) {
    if (q->open) {
        *a = 0, *e = m16;
        return;
    }
    fa_mask_cols_seeing(&seq->mask, q->i0, q->i1, t->j0 + r, t->j0 + r + mm, nr, m16, a, e);
}

/* S^T - lse2 and dP^T - D of one tile on the bf16 dot-product route: the
 * products on gemm_bf16, then each query's lse2 and D (rows d and dv of
 * its Q^T and dO^T panels) subtracted; strips only over their span. */
static void dot_scores(const fa_bwd_plan *plan, const fa_kernels *kern, const kv_item *t,
                       const q_tile *q, const fa_problem *f, const fa_seq *seq) {
    const int64_t d = f->head_dim, bm = plan->block_m, lt = plan->tile_ld, da = d + 1, dh = (d + 1) / 2;
    const int64_t dv = f->head_dim_v, dva = dv + 1, dvh = (dv + 1) / 2;
    const int nr = kern->nr;
    const int64_t i0 = q->i0, m16 = fa_round_up_i64(q->i1 - i0, FA_COL_ALIGN);
    const uint16_t *k16 = (const uint16_t *)t->kaug, *v16 = (const uint16_t *)t->vaug;
    float *st = t->st, *dpt = t->dpt, *l2 = t->cols;
    float *dd = t->cols + fa_round_up_i64(bm, FA_COL_ALIGN);
    for (int64_t c = 0; c < m16; c += nr) {
        const int n = (int)(m16 - c < nr ? m16 - c : nr);
        /* panel (i0 + c) / nr starts at (i0 + c) * da, and (i0 + c) * dva */
        const uint32_t *qp = (const uint32_t *)(q->qt + (i0 + c) * da);
        const uint32_t *dop = (const uint32_t *)(q->dot + (i0 + c) * dva);
        for (int x = 0; x < t->cut.count; x++) {
            const int r = fa_strip_row0(&t->cut, x), mm = fa_strip_rows(&t->cut, x);
            int64_t a, e;
            strip_span(seq, t, q, r, mm, nr, m16, &a, &e);
            if (c < a || c >= e) continue;
            kern->gemm_bf16(mm, n, dh, k16 + r * 2 * dh, 2 * dh, qp, nr, st + r * lt + c, lt, 0,
                            f->scale_log2);
            kern->gemm_bf16(mm, n, dvh, v16 + r * 2 * dvh, 2 * dvh, dop, nr, dpt + r * lt + c, lt, 0,
                            1.0f);
        }
    }
    for (int64_t c = 0; c < m16; c++) {
        l2[c] = q->qt[(i0 + c) / nr * da * nr + d * nr + (i0 + c) % nr];
        dd[c] = q->dot[(i0 + c) / nr * dva * nr + dv * nr + (i0 + c) % nr];
    }
    for (int x = 0; x < t->cut.count; x++) {
        const int r = fa_strip_row0(&t->cut, x), mm = fa_strip_rows(&t->cut, x);
        int64_t a, e;
        strip_span(seq, t, q, r, mm, nr, m16, &a, &e);
        for (int rr = r; rr < r + mm; rr++)
            for (int64_t c = a; c < e; c++) st[rr * lt + c] -= l2[c], dpt[rr * lt + c] -= dd[c];
    }
}

/* dQ^T (+)= K^T dS^T for the tile's query panel [c, c + n): over the key
 * strips whose span holds the panel, in runs of consecutive strips (each
 * element one FMA chain over the keys in order, as one call over all keys
 * would give: the keys left out have dS = 0 there). accumulate: dst holds
 * this item's sum so far; otherwise the first run overwrites it, and a
 * panel no key strip reaches is cleared. */
static void dq_panel(const fa_bwd_plan *plan, const fa_kernels *kern, const kv_item *t,
                     const q_tile *q, const fa_seq *seq, int64_t d, int64_t m16, int64_t c, int n,
                     float *dst, int accumulate) {
    const int64_t bm = plan->block_m, bn = plan->block_n, lt = plan->tile_ld;
    const int nr = kern->nr;
    const fa_strips *rows = &t->dcut;
    int acc = accumulate;
    for (int x = 0; x < t->cut.count;) {
        int64_t a, e;
        int y = x; /* the run: strips [x, y) */
        for (; y < t->cut.count; y++) {
            strip_span(seq, t, q, fa_strip_row0(&t->cut, y), fa_strip_rows(&t->cut, y), nr, m16, &a, &e);
            if (c < a || c >= e) break;
        }
        if (y == x) { /* strip x does not reach the panel */
            x++;
            continue;
        }
        const int r = fa_strip_row0(&t->cut, x), end = fa_strip_row0(&t->cut, y);
        for (int z = 0; z < rows->count; z++) {
            const int64_t rd = fa_strip_row0(rows, z);
            kern->gemm(fa_strip_rows(rows, z), n, end - r, t->kt + rd * bn + r, bn,
                       t->dpt + r * lt + c, lt, dst + rd * bm + c, bm, acc);
        }
        acc = 1;
        x = y;
    }
    if (!acc) /* k = 0: C = 0 */
        for (int z = 0; z < rows->count; z++) {
            const int64_t rd = fa_strip_row0(rows, z);
            kern->gemm(fa_strip_rows(rows, z), n, 0, t->kt, bn, t->dpt, lt, dst + rd * bm + c, bm, 0);
        }
}

/* acc (keys x width, row stride width) += X^T B over the tile: X^T its
 * [keys][tile_ld] P^T or dS^T, B the queries' rows as nr-column panels
 * `slice` floats apart (dO, or Q * scale). Each element is one FMA chain
 * over the query rows in order, continued across q-blocks and heads; a
 * strip's chain skips the queries outside its span, whose terms are 0. */
static void key_rows_add(const fa_bwd_plan *plan, const fa_kernels *kern, const fa_seq *seq,
                         const kv_item *t, const q_tile *q, const float *xt, const float *panels,
                         int64_t slice, float *acc, int64_t width) {
    const int64_t lt = plan->tile_ld, m = q->i1 - q->i0, m16 = fa_round_up_i64(m, FA_COL_ALIGN);
    const int nr = kern->nr;
    for (int64_t c = 0; c < width; c += nr) {
        const int n = (int)(width - c < nr ? width - c : nr);
        for (int x = 0; x < t->cut.count; x++) {
            const int r = fa_strip_row0(&t->cut, x), mm = fa_strip_rows(&t->cut, x);
            int64_t a, e;
            strip_span(seq, t, q, r, mm, nr, m16, &a, &e);
            if (e > m) e = m;
            if (a >= e) continue;
            kern->gemm(mm, n, e - a, xt + r * lt + a, lt,
                       panels + c / nr * slice + (q->i0 + a) * nr, nr, acc + r * width + c, width, 1);
        }
    }
}

/* One block_m x block_n tile. Each strip of keys works only on its
 * span of query panels (strip_span): on a tile the diagonal of a causal
 * mask crosses, about half the products. (Software prefetch of the next
 * tile's operands, which stream from L3, was tried: no gain measurable
 * here, and the prefetch loops stalled on fill buffers.) */
static void step(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                 const fa_seq *seq, const kv_item *t, const q_tile *q, const fa_scores *scores,
                 int tile) {
    const fa_problem *f = &pb->f;
    const int64_t d = f->head_dim, dp = f->head_dim_pad, bm = plan->block_m;
    const int64_t dvp = f->head_dim_v_pad, lt = plan->tile_ld, da = d + 1, dva = f->head_dim_v + 1;
    const int nr = kern->nr;
    const int64_t i0 = q->i0, i1 = q->i1, m = i1 - i0, m16 = fa_round_up_i64(m, FA_COL_ALIGN);
    /* i0 is a multiple of nr (block_m is), so its panels start at i0 * da
     * and i0 * dva; column slice c of the rows starts at (c / nr) * seq_q * nr. */
    const int64_t slice = f->seq_q * nr;
    float *st = t->st, *dpt = t->dpt;
    int64_t a, e;

    /* S^T - lse2 and dP^T - D; query columns past seq_q in the last panel
     * are zero with lse2 = +inf, so they come out -inf (P = 0) and 0. */
    if (plan->bf16_dot) dot_scores(plan, kern, t, q, f, seq);
    for (int64_t c = 0; !plan->bf16_dot && c < m16; c += nr) {
        const int n = (int)(m16 - c < nr ? m16 - c : nr);
        for (int x = 0; x < t->cut.count; x++) {
            const int r = fa_strip_row0(&t->cut, x), mm = fa_strip_rows(&t->cut, x);
            strip_span(seq, t, q, r, mm, nr, m16, &a, &e);
            if (c < a || c >= e) continue;
            kern->gemm(mm, n, da, t->kaug + r * da, da, q->qt + (i0 + c) * da, nr, st + r * lt + c,
                       lt, 0);
            kern->gemm(mm, n, dva, t->vaug + r * dva, dva, q->dot + (i0 + c) * dva, nr,
                       dpt + r * lt + c, lt, 0);
        }
    }
    /* The score stage; only strips that cut some query's visible range need
     * the mask. The softcap wants each query's lse2 (row d of its panel;
     * the dot route has them already), dropout each query's D. */
    const fa_scores sc = *scores;
    if (sc.cap2 != 0.0f && !plan->bf16_dot)
        for (int64_t c = 0; c < m; c++) t->cols[c] = q->qt[(i0 + c) / nr * da * nr + d * nr + (i0 + c) % nr];
    float *dd = t->cols + fa_round_up_i64(bm, FA_COL_ALIGN);
    if (fa_dropout_on(&f->dropout) && !plan->bf16_dot) /* (dot_scores put them there) */
        for (int64_t c = 0; c < m16; c++)
            dd[c] = q->dot[(i0 + c) / nr * dva * nr + f->head_dim_v * nr + (i0 + c) % nr];
    for (int x = 0; x < t->cut.count; x++) {
        const int r = fa_strip_row0(&t->cut, x), mm = fa_strip_rows(&t->cut, x);
        strip_span(seq, t, q, r, mm, nr, m16, &a, &e);
        if (a >= e) continue;
        const int64_t cm = e < m ? e : m; /* the columns of real queries */
        const int64_t j = t->j0 + r;
        if (cm > a)
            fa_score_tile_t(kern, &sc, st + r * lt + a, lt, mm, i0 + a, cm - a, j,
                            fa_mask_block_full(&seq->mask, i0 + a, i0 + cm, j, j + mm), tile,
                            t->cols + a, t->dcap + r * lt + a);
        /* m = 0: S^T already holds S - LSE <= 0, up to rounding (kernels.h). */
        for (int rr = r; rr < r + mm; rr++) kern->exp2_sum(st + rr * lt + a, e - a, 0.0f);
        if (fa_dropout_on(&f->dropout)) dropout_rows(pb, plan, kern, seq, t, q, m, dd, r, mm, a, e);
        for (int rr = r; rr < r + mm; rr++) {
            float *p = st + rr * lt, *ds = dpt + rr * lt;
            /* (careful: the rule for non-finite inputs, 0 times anything is 0) */
            if (fa_dropout_on(&f->dropout)) {
            } else if (kern->careful) {
                for (int64_t c = a; c < e; c++) ds[c] = fa_careful_mul(ds[c], p[c]);
            } else {
                for (int64_t c = a; c < e; c++) ds[c] *= p[c];
            }
            if (pb->dbias) add_dbias(pb, seq, q, t->j0 + rr, ds, a, cm);
            if (sc.cap2 != 0.0f && kern->careful) /* dS of the raw logit: times d(softcap)/ds */
                for (int64_t c = a; c < cm; c++) ds[c] = fa_careful_mul(ds[c], t->dcap[rr * lt + c]);
            else if (sc.cap2 != 0.0f)
                for (int64_t c = a; c < cm; c++) ds[c] *= t->dcap[rr * lt + c];
        }
    }

    /* dV += P^T dO and dK += dS^T (Q * scale) */
    key_rows_add(plan, kern, seq, t, q, st, q->dos, slice, t->dv, dvp);
    key_rows_add(plan, kern, seq, t, q, dpt, q->qs, slice, t->dk, dp);

    /* dQ^T (+)= K^T dS^T: straight into an accumulator this item owns, or
     * into the thread's tile and then, under the q-block's lock, added to
     * the shared one. */
    float *dst = q->lock ? t->dqt : q->dq;
    for (int64_t c = 0; c < m16; c += nr)
        dq_panel(plan, kern, t, q, seq, d, m16, c, (int)(m16 - c < nr ? m16 - c : nr), dst,
                 q->lock == NULL);
    if (q->lock) {
        acquire(q->lock);
        for (int64_t r = 0; r < d; r++)
            for (int64_t c = 0; c < m16; c++) q->dq[r * bm + c] += dst[r * bm + c];
        atomic_store_explicit(q->lock, 0, memory_order_release);
    }
}

static q_tile tile_at(const fa_bwd_plan *plan, const fa_problem *f, const fa_seq *seq,
                      const kv_item *t, void *gbase, int slot, int64_t hk, int64_t hi, int64_t qb) {
    void *head = fa_bwd_head(plan, gbase, hi);
    const int64_t i0 = qb * plan->block_m;
    q_tile q = {fa_bwd_head_part(plan, head, FA_BWD_HEAD_QS),
                fa_bwd_head_part(plan, head, FA_BWD_HEAD_QT),
                fa_bwd_head_part(plan, head, FA_BWD_HEAD_DOS),
                fa_bwd_head_part(plan, head, FA_BWD_HEAD_DOT),
                i0,
                i0 + plan->block_m < seq->seq_q ? i0 + plan->block_m : seq->seq_q,
                fa_bwd_slot(plan, f, gbase, slot, hi, qb),
                plan->shared_dq ? fa_bwd_lock(plan, gbase, hi, qb) : NULL,
                hk * f->group + hi,
                0};
    q.open = fa_mask_block_full(&seq->mask, q.i0, q.i1, t->j0, t->j1);
    return q;
}

int fa_bwd_kvblock(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                    const fa_seq *seq, int64_t hk, void *gbase, int slot, int64_t j0, int64_t j1,
                    void *tw, const uint8_t *tiles) {
    const fa_problem *f = &pb->f;
    const int64_t d = f->head_dim, dp = f->head_dim_pad, bm = plan->block_m, bn = plan->block_n;
    const int64_t dv = f->head_dim_v, dvp = f->head_dim_v_pad;
    const int64_t b = seq->kb, k0 = seq->k0;
    const int keys = (int)(j1 - j0);
    float *kaug = fa_bwd_tile(plan, tw, FA_BWD_THREAD_KAUG);
    float *vaug = fa_bwd_tile(plan, tw, FA_BWD_THREAD_VAUG);
    float *kt = fa_bwd_tile(plan, tw, FA_BWD_THREAD_KT);
    kv_item t = {j0, j1, kaug, vaug, kt,
                 fa_bwd_tile(plan, tw, FA_BWD_THREAD_DK), fa_bwd_tile(plan, tw, FA_BWD_THREAD_DV),
                 fa_bwd_tile(plan, tw, FA_BWD_THREAD_ST), fa_bwd_tile(plan, tw, FA_BWD_THREAD_DPT),
                 fa_bwd_tile(plan, tw, FA_BWD_THREAD_DQT), fa_bwd_tile(plan, tw, FA_BWD_THREAD_COLS),
                 fa_bwd_tile(plan, tw, FA_BWD_THREAD_DCAP), fa_bwd_tile(plan, tw, FA_BWD_THREAD_DROP),
                 fa_strips_cut(keys, kern->mr), fa_strips_cut((int)d, kern->mr)};

    if (plan->bf16_dot) {
        /* K and V rows as given (pairs of elements) for S^T and dP^T; K^T in f32 */
        const int64_t dh = (d + 1) / 2, dvh = (dv + 1) / 2;
        uint16_t *k16 = (uint16_t *)kaug, *v16 = (uint16_t *)vaug;
        for (int r = 0; r < keys; r++) {
            const void *krow = fa_row_ptr(f->k, b, k0 + j0 + r, hk);
            memcpy(k16 + r * 2 * dh, krow, (size_t)d * sizeof(uint16_t));
            memcpy(v16 + r * 2 * dvh, fa_row_ptr(f->v, b, k0 + j0 + r, hk),
                   (size_t)dv * sizeof(uint16_t));
            if (d & 1) k16[r * 2 * dh + d] = 0;
            if (dv & 1) v16[r * 2 * dvh + dv] = 0;
        }
    }
    for (int r = 0; !plan->bf16_dot && r < keys; r++) {
        float *kr = kaug + r * (d + 1), *vr = vaug + r * (dv + 1);
        kern->load(kr, fa_row_ptr(f->k, b, k0 + j0 + r, hk), f->k->dtype, d, 1.0f);
        kern->load(vr, fa_row_ptr(f->v, b, k0 + j0 + r, hk), f->v->dtype, dv, 1.0f);
        kr[d] = vr[dv] = -1.0f;
    }
    /* K^T, widened, by the packing's transposing copy (an element-by-element
     * loop here is a large share of a backward with few query rows) */
    if (keys > 0)
        kern->transpose(kt, bn, fa_row_ptr(f->k, b, k0 + j0, hk), f->k->stride_seq, f->k->dtype,
                        keys, d);
    memset(t.dk, 0, (size_t)(keys * dp) * sizeof(float));
    memset(t.dv, 0, (size_t)(keys * dvp) * sizeof(float));

    /* The queries that see any of these keys form one range (key bounds grow
     * with the query); rows inside it that see none are masked tile by tile. */
    int64_t ia, ie;
    fa_mask_rows_seeing(&seq->mask, seq->seq_q, j0, j1, &ia, &ie);
    for (int64_t hi = 0; ia < ie && hi < f->group; hi++) {
        const fa_scores sc = fa_scores_of_tiles(f, seq, hk * f->group + hi, tiles, plan->qblocks,
                                                plan->kvblocks);
        for (int64_t qb = ia / bm; qb * bm < ie; qb++) {
            const int tile = fa_score_tile(&sc, qb, j0 / bn);
            if (tile == FA_TILE_HIDDEN) continue; /* the mask hides the whole tile */
            const q_tile q = tile_at(plan, f, seq, &t, gbase, slot, hk, hi, qb);
            step(pb, plan, kern, seq, &t, &q, &sc, tile);
        }
    }
    if (plan->bf16_dot) kern->gemm_bf16_done();

    const fa_store_fn store = plan->stream_dkv ? kern->store_stream : kern->store;
    const int finite = kern->all_finite(t.dk, keys * dp) && kern->all_finite(t.dv, keys * dvp);
    for (int r = 0; r < keys; r++) {
        store((void *)fa_row_ptr(pb->dk, b, k0 + j0 + r, hk), pb->dk->dtype, t.dk + r * dp, d, 1.0f);
        store((void *)fa_row_ptr(pb->dv, b, k0 + j0 + r, hk), pb->dv->dtype, t.dv + r * dvp, dv, 1.0f);
    }
    if (plan->stream_dkv) kern->store_fence();
    return finite;
}
