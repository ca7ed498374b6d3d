/*
 * Backward driver. Groups of (batch, kv-head) are processed in passes
 * (their size: plan/tiles_bwd.c); each pass has three phases, one barrier
 * apart:
 *
 *   1. pack, per (query head, q-block): Q (times scale) and dO as rows, and
 *      Q (times scale * log2 e) and dO as nr-column panels of transposes, with LSE and D = rowsum(dO * O) as the
 *      panels' extra row; clear the q-block's dQ accumulators and its lock;
 *   2. work items over kv-blocks (bwd_block.c), each owning its dK/dV rows:
 *        deterministic: item = (group, chunk c); chunk c takes kv-blocks
 *          c, c + slots, c + 2 * slots, ... in order, into dQ accumulator c
 *          (strided, so causal masks leave the chunks equally loaded);
 *        otherwise: item = (group, kv-block), all adding into one shared dQ
 *          accumulator per head, under per-q-block locks when there is
 *          more than one thread;
 *   3. reduce, per (query head, q-block): sum the accumulators in slot order
 *      and store dQ rows.
 * Each thread's share of every phase is the items of its own groups, then
 * what is left of the others' (run_share).
 * Nothing is allocated here: every buffer is a slice of the workspace.
 */
#include "driver/bwd.h"

#include <math.h>
#include <string.h>

#include "core/share.h"
#include "core/size.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "driver/careful.h"
#include "driver/pack.h"
#include "driver/score_tiles.h"

#define FA_LOG2E 1.44269504088896340736

/* LSE in base 2 as the S^T GEMM subtracts it. A row with LSE = -inf saw no
 * key and must get P = 0, as must one with +inf (exp(s - inf) = 0): both
 * become +inf, and S - inf = -inf. NaN stays NaN.
 * Rounded once to float, LSE * log2(e) gives back the forward's base-2
 * maximum exactly when one key dominates a row (log2 l ~ 0), so that key's
 * P comes out 1 as it should. (Keeping it as hi + lo floats was tried: that
 * exposes the f32 rounding of LSE itself, ~1e-6 relative in P at |LSE| ~ 100.) */
static float lse2(float lse) { return isinf(lse) ? INFINITY : (float)((double)lse * FA_LOG2E); }

/* D = sum over c of dO[c] * O[c] in double: every product of two floats is
 * exact there, and eight partial sums in a fixed order (the same on every
 * path and thread count) break the one long chain of dependent adds, a
 * visible share of a short backward. */
static double row_dot(const float *x, const float *y, int64_t n, int careful) {
    double part[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    if (careful) /* the rule for non-finite inputs: 0 times anything is 0 */
        for (int64_t c = 0; c < n; c++) part[c % 8] += x[c] == 0.0f || y[c] == 0.0f ? 0.0 : (double)x[c] * y[c];
    if (careful) n = 0;
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int k = 0; k < 8; k++) part[k] += (double)x[c + k] * y[c + k];
    for (int k = 0; c < n; c++, k++) part[k] += (double)x[c] * y[c];
    return ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
}

static void pack_qblock(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                        const fa_seq *seq, int64_t hk, void *gbase, int64_t hi, int64_t qb,
                        float *tmp) {
    const fa_problem *f = &pb->f;
    /* sq: the packed rows' count, the layout's; the sequence has seq_q of them */
    const int64_t d = f->head_dim, dv = f->head_dim_v, nr = kern->nr, bm = plan->block_m, sq = f->seq_q;
    const int64_t da = d + 1, dva = dv + 1, cols = plan->col_panels * nr, cols_v = plan->col_panels_v * nr;
    const int64_t b = seq->qb, h = hk * f->group + hi, q0 = seq->q0;
    const int64_t i0 = qb * bm, i1 = i0 + bm < seq->seq_q ? i0 + bm : seq->seq_q;
    void *head = fa_bwd_head(plan, gbase, hi);
    float *qs = fa_bwd_head_part(plan, head, FA_BWD_HEAD_QS);
    float *qt = fa_bwd_head_part(plan, head, FA_BWD_HEAD_QT);
    float *dos = fa_bwd_head_part(plan, head, FA_BWD_HEAD_DOS);
    float *dot = fa_bwd_head_part(plan, head, FA_BWD_HEAD_DOT);
    float *qr = tmp, *dr = tmp + fa_round_up_i64(cols, 16), *orow = dr + fa_round_up_i64(cols_v, 16);
    const float *lse = fa_lse_at(f, (float *)pb->lse, seq, h, 0);

    memset(qr + d, 0, (size_t)(cols - d) * sizeof(float));
    memset(dr + dv, 0, (size_t)(cols_v - dv) * sizeof(float));
    /* Queries past seq_q in the last panel: P = 0 and dP - D = 0. The
     * whole panel is cleared first and its live rows written over it:
     * query by query (strided stores) or in runs of its rows, this was a
     * third of a one-query backward's time. */
    if (i1 == seq->seq_q && i1 % nr) {
        float *qp = qt + i1 / nr * da * nr, *dop = dot + i1 / nr * dva * nr;
        memset(qp, 0, (size_t)(da * nr) * sizeof(float));
        memset(dop, 0, (size_t)(dva * nr) * sizeof(float));
        for (int64_t r = i1 % nr; r < nr; r++) qp[d * nr + r] = INFINITY;
    }
    /* Q^T in base 2, each element rounded as the forward rounds it (so S is
     * the forward's S bit for bit: the exact widening, then one product);
     * the rows carry the natural scale, so dK needs no rescaling at the
     * end. Whole panels through the transposing copy: element by element
     * these strided stores are a visible share of a short backward. q-blocks start
     * on a panel (block_m is a multiple of nr). On the bf16 dot-product
     * route the panels hold pairs of Q's and dO's own bf16 elements
     * (2p, 2p + 1), zero on top past an odd head_dim, which gemm_bf16
     * scales as the forward's does; the LSE and D rows stay at rows d and
     * dv. */
    if (!plan->bf16_dot)
        for (int64_t p0 = i0; p0 < i1; p0 += nr) {
            const int rows = (int)(i1 - p0 < nr ? i1 - p0 : nr);
            float *qp = qt + p0 / nr * da * nr, *dop = dot + p0 / nr * dva * nr;
            kern->transpose(qp, nr, fa_row_ptr(f->q, b, q0 + p0, h), f->q->stride_seq,
                            f->q->dtype, rows, d);
            kern->scale(qp, d * nr, f->scale_log2);
            kern->transpose(dop, nr, fa_row_ptr(pb->dout, b, q0 + p0, h), pb->dout->stride_seq,
                            pb->dout->dtype, rows, dv);
        }
    for (int64_t i = i0; i < i1; i++) {
        kern->load(qr, fa_row_ptr(f->q, b, q0 + i, h), f->q->dtype, d, 1.0f);
        kern->load(dr, fa_row_ptr(pb->dout, b, q0 + i, h), pb->dout->dtype, dv, 1.0f);
        kern->load(orow, fa_row_ptr(f->o, b, q0 + i, h), f->o->dtype, dv, 1.0f);
        float *qp = qt + i / nr * da * nr + i % nr, *dop = dot + i / nr * dva * nr + i % nr;
        if (plan->bf16_dot) {
            fa_pairs_down((uint32_t *)qp, nr, fa_row_ptr(f->q, b, q0 + i, h), d);
            fa_pairs_down((uint32_t *)dop, nr, fa_row_ptr(pb->dout, b, q0 + i, h), dv);
        }
        kern->scale(qr, d, pb->scale);
        for (int64_t p = 0; p < plan->col_panels; p++) fa_panel_row(qs + (p * sq + i) * nr, qr + p * nr, nr);
        for (int64_t p = 0; p < plan->col_panels_v; p++) fa_panel_row(dos + (p * sq + i) * nr, dr + p * nr, nr);
        qp[d * nr] = lse2(lse[i]);
        dop[dv * nr] = (float)row_dot(dr, orow, dv, kern->careful);
    }
    for (int s = 0; s < plan->slots; s++)
        memset(fa_bwd_slot(plan, f, gbase, s, hi, qb), 0, (size_t)(d * bm) * sizeof(float));
    atomic_init(fa_bwd_lock(plan, gbase, hi, qb), 0);
}

static int reduce_qblock(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                          const fa_seq *seq, int64_t hk, void *gbase, int64_t hi, int64_t qb,
                          float *sum, float *row) {
    const fa_problem *f = &pb->f;
    const int64_t d = f->head_dim, bm = plan->block_m;
    const int64_t b = seq->qb, h = hk * f->group + hi;
    const int64_t i0 = qb * bm, i1 = i0 + bm < seq->seq_q ? i0 + bm : seq->seq_q;
    const float *acc = fa_bwd_slot(plan, f, gbase, 0, hi, qb);
    if (plan->slots > 1) {
        memcpy(sum, acc, (size_t)(d * bm) * sizeof(float));
        for (int s = 1; s < plan->slots; s++) {
            const float *add = fa_bwd_slot(plan, f, gbase, s, hi, qb);
            for (int64_t x = 0; x < d * bm; x++) sum[x] += add[x];
        }
        acc = sum;
    }
    /* dQ^T [d][bm] back to rows, 16 at a time through the transposing copy
     * (a strided gather per element before). */
    for (int64_t r0 = i0; r0 < i1; r0 += 16) {
        const int64_t n = i1 - r0 < 16 ? i1 - r0 : 16;
        kern->transpose(row, d, acc + (r0 - i0), bm, FLASHATTN_F32, (int)d, n);
        for (int64_t i = r0; i < r0 + n; i++)
            kern->store((void *)fa_row_ptr(pb->dq, b, seq->q0 + i, h), pb->dq->dtype,
                        row + (i - r0) * d, d, pb->scale);
    }
    return kern->all_finite(acc, d * bm);
}

/* dK = dV = 0 on the keys of sequence b past seqused_k: rows that hold
 * keys of no sequence get gradients of none. row: max(head_dim,
 * head_dim_v) floats. */
static void clear_unused_keys(const fa_bwd_problem *pb, const fa_kernels *kern, int64_t b, float *row) {
    const fa_problem *f = &pb->f;
    const fa_seq seq = fa_seq_of(f, b);
    const int64_t d = f->head_dim, dv = f->head_dim_v;
    memset(row, 0, (size_t)(d > dv ? d : dv) * sizeof(float));
    for (int64_t j = seq.k0 + seq.seq_k; j < f->cu_k[b + 1]; j++)
        for (int64_t hk = 0; hk < f->heads_kv; hk++) {
            kern->store((void *)fa_row_ptr(pb->dk, seq.kb, j, hk), pb->dk->dtype, row, d, 1.0f);
            kern->store((void *)fa_row_ptr(pb->dv, seq.kb, j, hk), pb->dv->dtype, row, dv, 1.0f);
        }
}

/* dL/dbias = 0 on row u of its [batch][heads][seq_q] rows, before the
 * work items add into it (elements no item reaches stay 0). */
static void clear_dbias_row(const flashattn_scores *t, int64_t u) {
    const int64_t b = u / (t->heads * t->seq_q), h = u / t->seq_q % t->heads, i = u % t->seq_q;
    float *row = (float *)t->data + b * t->stride_batch + h * t->stride_head + i * t->stride_q;
    for (int64_t j = 0; j < t->seq_k; j++) row[j * t->stride_k] = 0.0f;
}

/* dsinks[h] = -sum over the rows of head h of exp(sink_h - LSE_i) D_i,
 * with D_i the same rowsum(dO * O) the packing computes: in double, the
 * rows in order, one thread per head, so the same bits whatever the
 * thread count. tmp: 2 * head_dim_v floats. */
static void sink_grad(const fa_bwd_problem *pb, const fa_kernels *kern, int64_t h, float *tmp) {
    const fa_problem *f = &pb->f;
    const int64_t d = f->head_dim_v; /* dO's and O's */
    const double sink = f->sinks[h];
    float *dr = tmp, *orow = tmp + d;
    double sum = 0.0;
    for (int64_t b = 0; b < f->batch; b++) {
        const fa_seq seq = fa_seq_of(f, b);
        const float *lse = fa_lse_at(f, (float *)pb->lse, &seq, h, 0);
        for (int64_t i = 0; i < seq.seq_q; i++) {
            if (isinf(lse[i])) continue; /* a row of no keys and no weight */
            kern->load(dr, fa_row_ptr(pb->dout, seq.qb, seq.q0 + i, h), pb->dout->dtype, d, 1.0f);
            kern->load(orow, fa_row_ptr(f->o, seq.qb, seq.q0 + i, h), f->o->dtype, d, 1.0f);
            sum += exp(sink - (double)lse[i]) * row_dot(dr, orow, d, kern->careful);
        }
    }
    pb->dsinks[h] = (float)-sum;
}

/* The sequence of group g (= sequence * heads_kv + kv-head). */
static fa_seq group_seq(const fa_problem *f, int64_t g) { return fa_seq_of(f, g / f->heads_kv); }

/* What every thread of a backward call shares. */
typedef struct {
    const fa_bwd_problem *pb;
    const fa_bwd_plan *plan;
    const fa_kernels *kern;
    void *base;
    uint8_t *tiles;
    int64_t groups, tslices;
    atomic_int *finite;
} bwd_run_state;

/* The three phases' work items are shared in ranges (core/share.h), each
 * thread's range the items of its own groups of the pass: it packs their
 * q-blocks, runs their keys and stores their dQ, so the panels, the dQ
 * accumulators and the workspace lines it writes stay in its own core's
 * caches from phase to phase and from call to call, and then helps with
 * what is left of the others'. Handed out item by item (dynamic
 * scheduling), a group's three phases went to either core, every line
 * they share crossed between the cores' caches, and the packing of a
 * short backward took as long on two threads as on one
 * (docs/performance.md). */

/* This thread's range of a phase: the items of its even share of the
 * pass's ng groups (fa_share_cut), per_group items a group. */
static void set_range(const fa_share *s, int64_t ng, int64_t per_group) {
    fa_share_set(fa_share_range_at(s, s->self), fa_share_cut(ng, s->team, s->self) * per_group,
                 fa_share_cut(ng, s->team, s->self + 1) * per_group);
}

/* The group and chunk of phase 2's item `it`: a range's items take its
 * groups in turn, first kv-blocks (chunks) first: under causal masks those
 * see the most queries, so what is left to share at the end is short. */
static void keys_item(int64_t it, int64_t ng, int64_t per_group, int team, int64_t *gi, int64_t *c) {
    int t = 0;
    while (t + 1 < team && fa_share_cut(ng, team, t + 1) * per_group <= it) t++;
    const int64_t first = fa_share_cut(ng, team, t), count = fa_share_cut(ng, team, t + 1) - first;
    const int64_t x = it - first * per_group;
    *gi = first + x % count;
    *c = x / count;
}

/* Groups in the pass starting at group g0. */
static int64_t pass_groups(int64_t groups, int64_t g0, int64_t per_pass) {
    return groups - g0 < per_pass ? groups - g0 : per_pass;
}

static fa_share share_of(const bwd_run_state *r, int kind, int team, int self) {
    const fa_bwd_plan *plan = r->plan;
    return fa_share_of(fa_region_at(&plan->ws, r->base, FA_BWD_WS_SHARE, (size_t)(kind * plan->threads)),
                       plan->ws.r[FA_BWD_WS_SHARE].stride, team, self);
}

/* One thread's share of every loop (orphaned: bound to the region run()
 * opens, or to the calling thread alone). */
static void run_share(const bwd_run_state *r) {
    const fa_bwd_problem *pb = r->pb;
    const fa_bwd_plan *plan = r->plan;
    const fa_kernels *kern = r->kern;
    const fa_problem *f = &pb->f;
    void *base = r->base;
    uint8_t *tiles = r->tiles;
    const int64_t groups = r->groups, tslices = r->tslices;
    const int64_t qblocks = plan->qblocks, kvblocks = plan->kvblocks, bn = plan->block_n;
    const int self = fa_thread_id(), team = fa_team_size();
    const int64_t per_pass = plan->groups_per_pass;
    /* kv items a group: its chunks (deterministic) or its kv-blocks */
    const int64_t per_group = plan->deterministic ? plan->slots : kvblocks;
    /* packing and dQ items a group: its query heads' q-blocks */
    const int64_t qitems = f->group * qblocks;

    void *tw = fa_region_at(&plan->ws, base, FA_BWD_WS_THREADS, (size_t)self);
    float *row = fa_bwd_tile(plan, tw, FA_BWD_THREAD_ROW);
    if (f->used_k) {
#pragma omp for schedule(dynamic) nowait
        for (int64_t b = 0; b < f->batch; b++) clear_unused_keys(pb, kern, b, row);
    }
    if (pb->dsinks) {
#pragma omp for schedule(dynamic) nowait
        for (int64_t h = 0; h < f->heads_q; h++) sink_grad(pb, kern, h, row);
    }
    const int64_t dbias_rows = pb->dbias ? pb->dbias->batch * pb->dbias->heads * pb->dbias->seq_q : 0;
#pragma omp for schedule(static) nowait
    for (int64_t u = 0; u < dbias_rows; u++) clear_dbias_row(pb->dbias, u);
    const fa_share packs = share_of(r, FA_BWD_SHARE_PACK, team, self);
    const fa_share keys = share_of(r, FA_BWD_SHARE_KEYS, team, self);
    const fa_share reduces = share_of(r, FA_BWD_SHARE_REDUCE, team, self);
    /* Each range is set while nobody reads it: the first packing's before
     * the barrier below, the rest before the barrier that precedes their
     * phase (and after the one that ended their last use). */
    set_range(&packs, pass_groups(groups, 0, per_pass), qitems);
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < tslices * qblocks; it++)
        fa_score_tiles_row(f, it / qblocks, it % qblocks, plan->block_m, bn, qblocks, kvblocks, tiles);
    /* implicit barrier: the mask's tiles are sorted */
    for (int64_t g0 = 0; g0 < groups; g0 += per_pass) {
        const int64_t ng = pass_groups(groups, g0, per_pass);
        set_range(&keys, ng, per_group);
        set_range(&reduces, ng, qitems);
        fa_share take = packs;
        for (int64_t it; (it = fa_share_take(&take)) >= 0;) {
            const int64_t hh = it / qblocks, gi = hh / f->group, qb = it % qblocks;
            const fa_seq seq = group_seq(f, g0 + gi);
            if (qb * plan->block_m >= seq.seq_q) continue;
            void *gbase = fa_region_at(&plan->ws, base, FA_BWD_WS_GROUPS, (size_t)gi);
            pack_qblock(pb, plan, kern, &seq, (g0 + gi) % f->heads_kv, gbase, hh % f->group, qb,
                        row);
        }
#pragma omp barrier
        /* the pass's heads are packed */
        if (g0 + ng < groups) set_range(&packs, pass_groups(groups, g0 + ng, per_pass), qitems);
        take = keys;
        for (int64_t it; (it = fa_share_take(&take)) >= 0;) {
            int64_t gi, c;
            keys_item(it, ng, per_group, team, &gi, &c);
            const fa_seq seq = group_seq(f, g0 + gi);
            void *gbase = fa_region_at(&plan->ws, base, FA_BWD_WS_GROUPS, (size_t)gi);
            for (int64_t kb = c; kb * bn < seq.seq_k; kb += per_group) {
                const int64_t j0 = kb * bn, j1 = j0 + bn < seq.seq_k ? j0 + bn : seq.seq_k;
                if (!fa_bwd_kvblock(pb, plan, kern, &seq, (g0 + gi) % f->heads_kv, gbase,
                                    plan->deterministic ? (int)c : 0, j0, j1, tw, tiles))
                    atomic_store_explicit(r->finite, 0, memory_order_relaxed);
            }
        }
#pragma omp barrier
        /* every dQ contribution of the pass is in */
        take = reduces;
        for (int64_t it; (it = fa_share_take(&take)) >= 0;) {
            const int64_t hh = it / qblocks, gi = hh / f->group, qb = it % qblocks;
            const fa_seq seq = group_seq(f, g0 + gi);
            if (qb * plan->block_m >= seq.seq_q) continue;
            void *gbase = fa_region_at(&plan->ws, base, FA_BWD_WS_GROUPS, (size_t)gi);
            if (!reduce_qblock(pb, plan, kern, &seq, (g0 + gi) % f->heads_kv, gbase, hh % f->group,
                               qb, fa_bwd_tile(plan, tw, FA_BWD_THREAD_DQT), row))
                atomic_store_explicit(r->finite, 0, memory_order_relaxed);
        }
#pragma omp barrier
        /* the pass's dQ is stored: its group areas may be packed over */
    }
}

/* Returns whether every gradient accumulator came out finite. */
static int run(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
               void *ws) {
    const fa_problem *f = &pb->f;
    const int64_t groups = f->batch * f->heads_kv;
    if (groups == 0) return 1;
    /* (an atomic flag, not an OpenMP reduction: clang's libomp implements
     * one with a lock the library would export) */
    atomic_int finite;
    atomic_init(&finite, 1);
    bwd_run_state r = {pb, plan, kern, fa_layout_base(ws), NULL, groups, fa_score_tile_slices(f), &finite};
    r.tiles = r.tslices ? (uint8_t *)fa_region_at(&plan->ws, r.base, FA_BWD_WS_TILES, 0) : NULL;
    if (fa_run_alone(plan->threads)) {
        run_share(&r);
    } else {
#pragma omp parallel num_threads(plan->threads)
        run_share(&r);
    }
    return atomic_load_explicit(&finite, memory_order_relaxed);
}

/* Fast, then, if a NaN or Inf reached a gradient accumulator, the whole
 * call once more on the careful table (driver/careful.h): dQ's
 * accumulators are shared across work items, so no item can be redone
 * alone. */
void fa_bwd_run(const fa_bwd_problem *pb, const fa_bwd_plan *plan, const fa_kernels *kern,
                void *ws) {
    if (run(pb, plan, kern, ws)) return;
    const fa_kernels careful = fa_careful_kernels(kern);
    run(pb, plan, &careful, ws);
}
