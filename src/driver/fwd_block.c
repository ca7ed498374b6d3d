/*
 * One q-block of the forward pass: the loop of the FlashAttention paper,
 * in its named steps.
 *
 *   load_q                 Q rows, pre-scaled by scale * log2(e): base-2 logits
 *   for each kv-block the rows can see:
 *       plan_strips        which columns each strip of rows computes
 *       qk                 S = Q K^T
 *       softmax_strips     the score stage (driver/score.h: the mask, only
 *                          on kv-blocks that cut a row's visible range), then
 *                          m' = max(m, rowmax S);  P = exp2(S - m');
 *                          l = l*2^(m-m') + rowsum P;  acc *= 2^(m-m');
 *                          dropout: P *= Z (after the statistics)
 *       pv                 acc += P V
 *   finalize_rows          O = acc / l;  LSE = ln2 * (m + log2 l)
 *
 * On the bf16 dot-product route (plan->bf16_dot) the products run on
 * gemm_bf16: Q's bf16 rows as given, the scale applied to S in f32 by the
 * GEMM, and P rounded to bf16 after the f32 softmax (the row sums l stay
 * those of the f32 P), like FlashAttention-2 on GPUs.
 *
 * Under masks each strip of rows (one register tile) visits only the
 * kv-blocks its rows see, and in a block only the columns up to its last
 * row's end, rounded up to FA_EXP2_SUM_GRAIN, and from its first row's
 * start (a window's left edge), rounded down to whole grains and NR
 * panels: the columns left out are -inf for every row of the strip, which
 * add exact zeros to the row sums (kernels.h), nothing to the row max, and
 * nothing to P V (acc starts at +0 and is never -0). A row's result
 * therefore depends only on block_n, never on block_m or on its strip.
 *
 * On the 8-bit route (pb->int8_qk) S comes from gemm_i8 on Q's rows
 * quantised as they load and K's int8 panels (driver/int8_qk.h), with each
 * key chunk's mean term q . m added back in the tile; the rest is the f32
 * route's. With pb->int8_pv, P V runs on gemm_u8 too: each row's P of the
 * block quantised to u8 after the softmax (and dropout), V's int8 panels
 * with their per-chunk channel scales, one call per chunk the strip's keys
 * touch.
 *
 * Every step is inlined into one loop per route (`route` is a literal at
 * the three call sites of block()), so the f32 route carries no test of it.
 */
#include <math.h>
#include <string.h>

#include "core/mask.h"
#include "core/quant.h"
#include "core/size.h"
#include "driver/careful.h"
#include "driver/fwd.h"
#include "driver/int8_qk.h"
#include "driver/pack.h"
#include "driver/score.h"
#include "driver/softmax.h"
#include "driver/strips.h"

#define FA_INLINE static inline __attribute__((always_inline))

/* What the steps of one q-block share: its rows, the thread's tiles and the
 * group's packed K and V. */
typedef struct {
    const fa_problem *pb;
    const fa_fwd_plan *plan;
    const fa_kernels *kern;
    const fa_seq *seq;
    fa_scores sc;
    int64_t h, i0, bn; /* bn: keys per kv-block, and S's row stride */
    int m;
    fa_strips cut; /* the m rows' strips (driver/strips.h) */
    float *q, *s, *acc, *mx, *ls;
    uint16_t *q16, *p16; /* dot route: Q's bf16 rows (in q's room), P as bf16 */
    const float *kp, *vp;
    /* per strip, for the current kv-block: its columns [lead, cols), and
     * whether the block is its first (it then overwrites acc); and whether
     * any block has been computed for it yet */
    int32_t *cols, *lead;
    uint8_t *first, *started;
    int tile; /* the boolean mask's state of the current tile (FA_TILE_*) */
    fa_softmax_totals total; /* rows past FA_SUM_CHUNK keys (driver/softmax.h) */
    uint32_t drop_key[2];    /* dropout's key of this (sequence, head) */
    /* the 8-bit Q K^T (driver/int8_qk.h): Q's rows as gemm_i8's A, their
     * scales and mean terms (of chunk `chunk_at`), the group's keys */
    uint8_t *q8;
    float *qs, *qa;
    fa_i8_keys k8;
    int64_t chunk, chunk_at;
    /* the 8-bit P V: P's rows as u8 and their scales, the group's values */
    uint8_t *p8;
    float *ps;
    fa_i8_values v8;
} fwd_qblock;

/* The routes: f32 GEMMs; bf16 dot products (plan->bf16_dot); Q K^T on
 * 8-bit integers (pb->int8_qk), the rest in f32 (P and V rounded to bf16
 * values under pb->bf16_pv); Q K^T on 8 bits and P V on gemm_bf16
 * (plan->i8_pv_dot); both products on 8 bits (pb->int8_pv). */
enum { ROUTE_F32, ROUTE_BF16, ROUTE_I8, ROUTE_I8_DOT, ROUTE_I8_PV8 };

/* Whether a route's Q K^T is on 8 bits, and whether its P V is on gemm_bf16. */
#define ROUTE_QK8(route) ((route) == ROUTE_I8 || (route) == ROUTE_I8_DOT || (route) == ROUTE_I8_PV8)
#define ROUTE_PV16(route) ((route) == ROUTE_BF16 || (route) == ROUTE_I8_DOT)

FA_INLINE int strip_rows(const fwd_qblock *t, int s) { return fa_strip_rows(&t->cut, s); }

/* The first row of strip s, from the q-block's first. */
FA_INLINE int strip_row0(const fwd_qblock *t, int s) { return fa_strip_row0(&t->cut, s); }

FA_INLINE void load_q(fwd_qblock *t, const int route) {
    const int dot = route == ROUTE_BF16;
    const fa_problem *pb = t->pb;
    const int64_t d = pb->head_dim, dh = (d + 1) / 2;
    for (int r = 0; r < t->m; r++) {
        const void *qrow = fa_row_ptr(pb->q, t->seq->qb, t->seq->q0 + t->i0 + r, t->h);
        fa_prefetch_rows_ahead(pb->q, qrow, FA_ROW_AHEAD);
        if (dot) {
            memcpy(t->q16 + r * 2 * dh, qrow, (size_t)d * sizeof(uint16_t));
            if (d & 1) t->q16[r * 2 * dh + d] = 0;
        } else {
            t->kern->load(t->q + r * d, qrow, pb->q->dtype, d, pb->scale_log2);
            if (ROUTE_QK8(route)) fa_i8_q_row(pb, t->kern, t->q + r * d, t->q8 + r * 4 * fa_i8_k4(pb), &t->qs[r]);
        }
        t->mx[r] = -INFINITY;
        t->ls[r] = 0.0f;
    }
    t->chunk_at = -1;
}

/* The 8-bit route's term q . m of every row for chunk ch. */
FA_INLINE void mean_terms(fwd_qblock *t, int64_t ch) {
    const int64_t d = t->pb->head_dim;
    for (int r = 0; r < t->m; r++) t->qa[r] = fa_dot_f32(t->q + r * d, t->k8.mean + ch * d, d);
    t->chunk_at = ch;
}

/* Columns a strip may leave out before its first row's first key: whole
 * grains of exp2_sum (kernels.h) and whole NR panels of Q K^T. */
FA_INLINE int64_t lead_grain(const fa_kernels *kern) {
    int64_t g = FA_EXP2_SUM_GRAIN;
    while (g % kern->nr) g += FA_EXP2_SUM_GRAIN;
    return g;
}

/* Each strip's columns in kv-block [j0, j1), worked out once per block
 * rather than in each step below (at short sequences those
 * recomputations cost as much as the softmax); returns the largest end. */
FA_INLINE int64_t plan_strips(fwd_qblock *t, int64_t j0, int64_t j1) {
    const fa_mask *mask = &t->seq->mask;
    const int64_t grain = lead_grain(t->kern);
    int64_t most = 0;
    for (int s = 0; s < t->cut.count; s++) {
        const int64_t r0 = t->i0 + strip_row0(t, s), r1 = r0 + strip_rows(t, s);
        t->cols[s] = (int32_t)fa_mask_strip_cols(mask, r0, r1, j0, j1, FA_EXP2_SUM_GRAIN);
        if (t->tile == FA_TILE_MIXED && t->sc.has_mask && t->cols[s]) {
            /* a boolean mask's mixed tile: the strip stops where its rows'
             * last open key does (a document mask's strips skip the other
             * documents' blocks outright) */
            const int64_t open = fa_round_up_i64(fa_mask_open_end(&t->sc, r0, r1, j0, t->cols[s]), FA_EXP2_SUM_GRAIN);
            if (open < t->cols[s]) t->cols[s] = (int32_t)open;
        }
        t->lead[s] = (int32_t)fa_mask_strip_lead(mask, r0, j0, t->cols[s], grain);
        t->first[s] = !t->started[s];
        if (t->cols[s] > most) most = t->cols[s];
    }
    return most;
}

/* S = Q K^T over whole nr-key panels, each panel for the strips that need
 * it; zero-padded keys give S = 0 in columns past a strip's count, which
 * nothing below reads. */
FA_INLINE void qk(fwd_qblock *t, int64_t j0, int64_t most, const int route) {
    const int dot = route == ROUTE_BF16;
    const fa_kernels *kern = t->kern;
    const int64_t d = t->pb->head_dim, dh = (d + 1) / 2, bn = t->bn, k4 = fa_i8_k4(t->pb);
    const int nr = kern->nr;
    for (int64_t c = 0; c < most; c += nr) {
        /* j0 + c is a whole number of nr-key panels (block_n is) */
        const float *panel = t->kp + (j0 + c) * d;
        const uint32_t *pairs = (const uint32_t *)t->kp + (j0 + c) * dh;
        const int8_t *panel8 = t->k8.panels + (j0 + c) * k4 * 4;
        if (ROUTE_QK8(route) && (j0 + c < t->chunk_at * t->chunk || j0 + c >= (t->chunk_at + 1) * t->chunk))
            mean_terms(t, (j0 + c) / t->chunk);
        for (int s = 0; s < t->cut.count; s++) {
            const int r0 = strip_row0(t, s), mm = strip_rows(t, s);
            const int64_t nc16 = (int64_t)fa_round_up((size_t)t->cols[s], FA_COL_ALIGN);
            if (c >= nc16 || c < t->lead[s]) continue;
            const int n = (int)(nc16 - c < nr ? nc16 - c : nr);
            if (ROUTE_QK8(route))
                kern->gemm_i8(mm, n, k4, t->q8 + r0 * 4 * k4, 4 * k4, panel8, nr, t->k8.sum + j0 + c,
                              t->k8.scale + j0 + c, t->qs + r0, t->qa + r0, t->s + r0 * bn + c, bn);
            else if (dot)
                kern->gemm_bf16(mm, n, dh, t->q16 + r0 * 2 * dh, 2 * dh, pairs, nr,
                                t->s + r0 * bn + c, bn, 0, t->pb->scale_log2);
            else
                kern->gemm(mm, n, d, t->q + r0 * d, d, panel, nr, t->s + r0 * bn + c, bn, 0);
        }
    }
}

/* Per strip: the score stage on its rows, their maxima, then the online
 * softmax step of each row (driver/softmax.h). */
FA_INLINE void softmax_strips(fwd_qblock *t, int64_t j0, const int route) {
    const int dot = ROUTE_PV16(route);
    const fa_kernels *kern = t->kern;
    const int64_t bn = t->bn, dp = t->pb->head_dim_v_pad;
    for (int s = 0; s < t->cut.count; s++) {
        const int r0 = strip_row0(t, s), mm = strip_rows(t, s);
        if (!t->cols[s]) continue;
        /* the strip's columns [a, a + ncols) of the block: keys ja.. */
        const int64_t a = t->lead[s], ncols = t->cols[s] - a, ja = j0 + a;
        const int64_t i = t->i0 + r0;
        const int full = fa_mask_block_full(&t->seq->mask, i, i + mm, ja, ja + ncols);
        float bmax[FA_MAX_MR];
        for (int r = r0; r < r0 + mm; r++) {
            fa_score_row(kern, &t->sc, t->s + r * bn + a, t->i0 + r, ja, ncols, full, t->tile);
            bmax[r - r0] = kern->row_max(t->s + r * bn + a, ncols);
        }
        for (int r = r0; r < r0 + mm; r++) {
            float *row = t->s + r * bn + a;
            fa_softmax_row_exp(kern, row, ncols, bmax[r - r0], &t->mx[r], &t->ls[r],
                               t->acc + r * dp, dp, t->first[s]);
            /* dropout after the statistics: l and m are of the undropped P */
            if (fa_dropout_on(&t->pb->dropout))
                kern->dropout_row(row, ncols, t->drop_key, (uint32_t)(t->i0 + r),
                                  t->pb->dropout.offset, ja, t->pb->dropout.threshold, t->pb->dropout.scale);
            if (route == ROUTE_I8 && t->pb->bf16_pv) fa_round_bf16(kern, row, ncols);
            if (route == ROUTE_I8_PV8) kern->quant_u8(row, ncols, t->p8 + r * bn + a, (ncols + 3) / 4 * 4, &t->ps[r]);
            if (dot) {
                /* an odd count (the last keys) gets a zero partner */
                kern->store(t->p16 + r * bn + a, FLASHATTN_BF16, row, ncols, 1.0f);
                if (ncols & 1) t->p16[r * bn + a + ncols] = 0;
            }
        }
    }
}

/* The 8-bit route's acc (+)= P V: per strip, one gemm_u8 per chunk of V
 * its keys touch (each chunk has its own channel scales). */
FA_INLINE void pv8(fwd_qblock *t, int64_t j0) {
    const fa_kernels *kern = t->kern;
    const int64_t dp = t->pb->head_dim_v_pad, bn = t->bn, chunk = t->chunk;
    const int64_t rows4 = (t->seq->seq_k + 3) / 4 * 4;
    const int nr = kern->nr;
    /* each strip's first chunk found from the block's by steps, not by a
     * division per panel and strip: divisions by a variable cost as much
     * here as a small tile */
    const int64_t first = j0 / chunk;
    for (int64_t c = 0; c < dp; c += nr) {
        const int n = (int)(dp - c < nr ? dp - c : nr);
        for (int s = 0; s < t->cut.count; s++) {
            const int r0 = strip_row0(t, s), mm = strip_rows(t, s);
            if (!t->cols[s]) continue;
            const int64_t end = j0 + t->cols[s];
            int accumulate = !t->first[s];
            int64_t ch = first, x0 = j0 + t->lead[s];
            while ((ch + 1) * chunk <= x0) ch++;
            for (; x0 < end; accumulate = 1, ch++) {
                const int64_t x1 = end < (ch + 1) * chunk ? end : (ch + 1) * chunk;
                kern->gemm_u8(mm, n, (x1 - x0 + 3) / 4, t->p8 + r0 * bn + (x0 - j0), bn,
                              t->v8.panels + c * rows4 + x0 * n, n, t->v8.scale + ch * dp + c, t->ps + r0,
                              t->acc + r0 * dp + c, dp, accumulate);
                x0 = x1;
            }
        }
    }
}

/* acc (+)= P V, each strip over its own columns. */
FA_INLINE void pv(fwd_qblock *t, int64_t j0, const int route) {
    if (route == ROUTE_I8_PV8) {
        pv8(t, j0);
        return;
    }
    const int dot = ROUTE_PV16(route);
    const fa_kernels *kern = t->kern;
    const int64_t dp = t->pb->head_dim_v_pad, bn = t->bn;
    /* the packed V's rows: the sequence's (fa_pack_v) */
    const int64_t rows = t->seq->seq_k, kh = (rows + 1) / 2;
    const int nr = kern->nr;
    for (int64_t c = 0; c < dp; c += nr) {
        const int n = (int)(dp - c < nr ? dp - c : nr);
        for (int s = 0; s < t->cut.count; s++) {
            const int r0 = strip_row0(t, s), mm = strip_rows(t, s);
            if (!t->cols[s]) continue;
            const int64_t a = t->lead[s], ja = j0 + a; /* even: a whole number of grains */
            if (dot)
                kern->gemm_bf16(mm, n, (t->cols[s] - a + 1) / 2, t->p16 + r0 * bn + a, bn,
                                (const uint32_t *)t->vp + c * kh + ja / 2 * n, n,
                                t->acc + r0 * dp + c, dp, !t->first[s], 1.0f);
            else
                kern->gemm(mm, n, t->cols[s] - a, t->s + r0 * bn + a, bn, t->vp + c * rows + ja * n, n,
                           t->acc + r0 * dp + c, dp, !t->first[s]);
        }
    }
}

FA_INLINE void finalize_rows(fwd_qblock *t) {
    const fa_problem *pb = t->pb;
    for (int r = 0; r < t->m; r++) {
        const int64_t i = t->i0 + r;
        void *orow = (void *)fa_row_ptr(pb->o, t->seq->qb, t->seq->q0 + i, t->h);
        fa_softmax_finalize_row(t->kern, orow, pb->o->dtype, t->acc + r * pb->head_dim_v_pad,
                                pb->head_dim_v, t->mx[r], t->ls[r],
                                pb->lse ? fa_lse_at(pb, pb->lse, t->seq, t->h, i) : NULL,
                                fa_sink2(pb->sinks, t->h));
    }
}

/* Every row's f32 sums into its double totals (driver/softmax.h). */
static void fold_rows(fwd_qblock *t) {
    const int64_t dp = t->pb->head_dim_v_pad;
    for (int r = 0; r < t->m; r++)
        fa_softmax_fold(&t->total, r, t->acc + r * dp, t->pb->head_dim_v, t->mx[r], &t->ls[r]);
}

static void unfold_rows(fwd_qblock *t) {
    const int64_t dp = t->pb->head_dim_v_pad;
    for (int r = 0; r < t->m; r++)
        fa_softmax_unfold(&t->total, r, t->acc + r * dp, t->pb->head_dim_v, t->mx[r], &t->ls[r]);
}

FA_INLINE void block(fwd_qblock *t, const int route) {
    const int dot = ROUTE_PV16(route);
    const fa_mask *mask = &t->seq->mask;
    const int64_t bn = t->bn, seq_k = t->seq->seq_k;
    load_q(t, route);
    const int64_t j_lo = fa_mask_lo(mask, t->i0), j_end = fa_mask_end(mask, t->i0 + t->m - 1);
    /* Folds at the same keys for every row, whatever its q-block (so
     * block_m still changes no bit), at whole blocks. */
    const int long_rows = t->pb->seq_k > FA_SUM_CHUNK;
    const int64_t fold_every = FA_SUM_CHUNK / bn * bn;
    if (long_rows) fa_softmax_totals_clear(&t->total, t->m);
    for (int64_t j0 = j_lo / bn * bn; j0 < j_end; j0 += bn) {
        if (long_rows && j0 > j_lo / bn * bn && j0 % fold_every == 0) fold_rows(t);
        const int64_t j1 = j0 + bn < seq_k ? j0 + bn : seq_k;
        t->tile = fa_score_tile(&t->sc, t->i0 / t->plan->block_m, j0 / bn);
        if (t->tile == FA_TILE_HIDDEN) continue; /* the mask hides the whole tile */
        const int64_t most = plan_strips(t, j0, j1);
        qk(t, j0, most, route);
        softmax_strips(t, j0, route);
        pv(t, j0, route);
        for (int s = 0; s < t->cut.count; s++) t->started[s] |= t->cols[s] > 0;
    }
    if (dot || ROUTE_QK8(route)) t->kern->gemm_bf16_done();
    if (long_rows) unfold_rows(t);
}

void fa_fwd_block(const fa_problem *pb, const fa_fwd_plan *plan, const fa_kernels *kern,
                  const fa_seq *seq, int64_t h, int64_t i0, int64_t i1, int64_t block_n, void *group,
                  void *tw, const uint8_t *tiles) {
    /* at most one strip per row: block_m <= FA_MAX_BLOCK */
    int32_t cols[FA_MAX_BLOCK], lead[FA_MAX_BLOCK];
    uint8_t first[FA_MAX_BLOCK], started[FA_MAX_BLOCK];
    fwd_qblock t;
    t.cols = cols, t.lead = lead, t.first = first, t.started = started;
    t.pb = pb, t.plan = plan, t.kern = kern, t.seq = seq;
    t.h = h, t.i0 = i0, t.bn = block_n;
    fa_dropout_key(&pb->dropout, seq->idx * pb->heads_q + h, t.drop_key);
    const int64_t bm = plan->block_m, bn = block_n;
    t.sc = fa_scores_of_tiles(pb, seq, h, tiles, (pb->seq_q + bm - 1) / bm, (pb->seq_k + bn - 1) / bn);
    t.m = (int)(i1 - i0);
    t.cut = fa_strips_cut(t.m, kern->mr);
    t.q = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_Q, 0);
    t.s = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_S, 0);
    t.acc = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_ACC, 0);
    t.mx = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_MAX, 0);
    t.ls = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_SUM, 0);
    t.q16 = (uint16_t *)t.q;
    t.p16 = (uint16_t *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_P16, 0);
    t.kp = (const float *)fa_region_at(&plan->group, group, FA_FWD_GROUP_K, 0);
    t.vp = (const float *)fa_region_at(&plan->group, group, FA_FWD_GROUP_V, 0);
    t.total.acc = (double *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_TOTAL_ACC, 0);
    t.total.l = (double *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_TOTAL_SUM, 0);
    t.total.m = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_TOTAL_MAX, 0);
    t.total.ld = pb->head_dim_v_pad;
    t.q8 = (uint8_t *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_Q8, 0);
    t.qs = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_QSCALE, 0);
    t.qa = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_QADD, 0);
    t.k8 = fa_i8_keys_of(plan, group);
    t.p8 = (uint8_t *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_P8, 0);
    t.ps = (float *)fa_region_at(&plan->thread, tw, FA_FWD_THREAD_PSCALE, 0);
    t.v8 = fa_i8_values_of(plan, group);
    t.chunk = fa_pack_chunk(kern);
    /* fast, then once more on the careful table if a NaN or Inf showed up
     * (driver/careful.h) */
    fa_kernels careful;
    for (int pass = 0;; pass++) {
        memset(started, 0, (size_t)t.cut.count);
        if (pb->int8_pv)
            block(&t, ROUTE_I8_PV8);
        else if (plan->i8_pv_dot)
            block(&t, ROUTE_I8_DOT);
        else if (pb->int8_qk)
            block(&t, ROUTE_I8);
        else if (plan->bf16_dot)
            block(&t, ROUTE_BF16);
        else
            block(&t, ROUTE_F32);
        if (pass || fa_softmax_rows_finite(kern, t.acc, pb->head_dim_v_pad, pb->head_dim_v, t.mx, t.ls, t.m))
            break;
        careful = fa_careful_kernels(kern);
        t.kern = &careful;
    }
    finalize_rows(&t);
}
