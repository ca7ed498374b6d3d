/*
 * One decode work item: query positions [i0, i1) of sequence b, with every
 * query head of kv-heads [hk0, hk0 + nh), against the keys of one split,
 * read straight from the cache one step of block_n keys at a time.
 *
 * Rows: kv-head h of the block owns the contiguous rows
 * [h * mh, (h + 1) * mh), mh = group * (i1 - i0); its row r is query
 * i0 + r / group of query head (hk0 + h) * group + r % group. So the query
 * heads sharing a kv-head form one tile (GQA packing: each cache element is
 * read once per kv-head, not once per query head).
 *
 *   for each step of keys:
 *       per head: S = Q K^T   (gemm_nt on the cache's K rows as stored)
 *       mask, m' = max(m, rowmax S), P = exp2(S - m'), l = l*2^(m-m') + rowsum P
 *       per head: acc = acc*2^(m-m') + P V   (gemm_rows on the V rows as stored)
 *   O = acc / l,  LSE = ln2 * (m + log2 l)
 *
 * With few rows per kv-head (seq_q 1: one GQA group) decode is bound by
 * reading the cache, so the cache is read once, by the kernels themselves,
 * widening f16/bf16 in registers: no f32 copy of K or V is written and
 * read back. A
 * step's rows are runs of consecutive slots (a whole step in a contiguous
 * cache, one page at most in a paged one), cut into pieces of a few keys;
 * every head of a piece is done before the next piece, so in a [seq,
 * heads_kv, dim] cache the rows are read in address order and the
 * hardware prefetchers stream them. They alone leave the memory idle
 * while the FMAs work on a piece, so the kernels also prefetch the same
 * rows of the next piece as they read each row. Prefetches spread over
 * the loads like this keep the stream going; bursts of a whole piece
 * stall on the line-fill buffers while the FMA units wait
 * (docs/performance.md has the measurements).
 *
 * The wide path (plan->wide_piece > 0: at least FA_DECODE_WIDE_ROWS rows
 * per kv-head, from several query positions: speculative decoding, chunked
 * prefill) is compute-bound instead. There the cache-reading kernels
 * would widen each K and V element again for every 4 rows and reduce
 * every dot product horizontally, so each piece of a kv-head is widened
 * once into the thread's workspace (NR keys of K as a [d][NR] panel by
 * the transposing copy, plan->pv_piece keys of V as f32 rows) and the
 * forward's MR x NR broadcast GEMM tile does S = Q K^T and acc += P V.
 * P V gives the same bits either way (gemm_rows is gemm's FMA chain); S = Q K^T differs by rounding (the
 * GEMM's chain in order of d vs gemm_nt's lanes and tree).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/mask.h"
#include "driver/careful.h"
#include "driver/decode.h"
#include "driver/score.h"
#include "driver/softmax.h"
#include "driver/strips.h"

/* Keys per kernel call: 16 keys of 8 kv-heads of 128 f16 are 32 KiB, read
 * by the 8 calls of a piece in address order, within L1. */
#define FA_DECODE_PIECE 16

/* Per-token scales gathered at a time (a piece's, or a wide piece's in
 * a few goes). */
#define FA_DECODE_SCALES 64

/* The run of rows starting at logical row j (< end) of kv-head hk of
 * sequence b in t (the cache's k or v): consecutive slots, so one row
 * stride. Returns its length and sets *row to its first row. */
static int64_t run_at(const fa_decode_problem *dp, const flashattn_tensor *t, const fa_seq *s,
                      int64_t hk, int64_t j, int64_t end, const char **row) {
    *row = fa_cache_row(dp, t, s, j, hk);
    const int64_t run = dp->block_table ? dp->page_size - (s->k0 + j) % dp->page_size : end - j;
    return run < end - j ? run : end - j;
}

/* Bytes from `row`, the first row of the piece at j, to the first row of
 * the piece after it in this item's walk (after a step's last piece, the
 * next step's first), 0 when there is none. The kernels prefetch that far
 * past every row they read: one piece ahead, spread over their loads.
 * Consecutive pieces sit one stride apart in a contiguous cache; in a
 * paged one the jump to the next page is as good. */
static int64_t next_piece(const fa_decode_problem *dp, const flashattn_tensor *t, const fa_seq *s,
                          int64_t hk, int64_t j, int64_t len, int64_t j_end, const char *row) {
    if (j + len >= j_end) return 0;
    const char *next = fa_cache_row(dp, t, s, j + len, hk);
    return (int64_t)((uintptr_t)next - (uintptr_t)row);
}

/* Rows of strip s of mh rows (driver/strips.h): 16 rows at mr 12 as
 * 8 + 8, not 12 + 4, whose 4-row tile leaves the FMA ports half idle. */
static int strip_rows(int mh, int mr, int s) {
    const fa_strips cut = fa_strips_cut(mh, mr);
    return fa_strip_rows(&cut, s);
}

/* Wide path, S = Q K^T for one kv-head's mh rows and len <= NR keys:
 * the keys widened once into a [d][NR] panel, then the GEMM's MR x NR
 * broadcast tiles. Columns are computed in whole multiples of 16 (the
 * panel's columns past len zero); the extra ones land in S's slack past
 * the key and are overwritten by the next piece or never read.
 *
 * *pad >= 0: columns [*pad, *pad rounded up to 16) of the panel's d rows
 * are zero (-1: unknown). The copy writes only columns below len, so
 * after it [len, w) is zero when it was before or was cleared: a call
 * with one key on 8 kv-heads clears once, not 8 times (the clearing was
 * 40% of such a call's item). */
static void wide_qk(const fa_kernels *kern, int mh, int len, int64_t d, const float *q,
                    const char *krow, flashattn_dtype dt, int64_t lds, float *wk, float *s,
                    int64_t sld, int *pad) {
    const int nr = kern->nr, w = (len + 15) / 16 * 16;
    /* The padding columns are cleared before the copy, as the whole last
     * group of 16 (one 64-byte store a row, inlined): a memset call per
     * row of only the padding is a visible share of a short forward. */
    const int zero = *pad >= 0 && *pad <= len && (*pad + 15) / 16 * 16 == w;
    if (w > len && !zero)
        for (int64_t c = 0; c < d; c++) memset(wk + c * nr + w - 16, 0, 16 * sizeof(float));
    *pad = len;
    kern->transpose(wk, nr, krow, lds, dt, len, d);
    for (int r = 0, t = 0, rows; r < mh; r += rows, t++) {
        rows = strip_rows(mh, kern->mr, t);
        kern->gemm(rows, w, d, q + r * d, d, wk, nr, s + r * sld, sld, 0);
    }
}

/* Wide path, S = Q K^T for all nh kv-heads of a piece at once when their
 * keys fit one group of 16 columns together (nh * len <= 16: a call of one
 * or two keys): head h's keys widened into columns [h * len, (h + 1) *
 * len) of one panel, then the GEMM over every row of the item against
 * the whole panel, and each head's own columns moved to the piece's place
 * in S. Head by head, each GEMM was one chain of d dependent FMAs per
 * strip (for one query row, 1 x 1 calls: d FMA latencies a head); stacked,
 * the heads' chains run side by side. An element of S is still one chain
 * over d in order (kernels.h), so the bits are wide_qk's; the other heads'
 * columns of a row are computed and dropped. */
static void wide_qk_stacked(const fa_kernels *kern, int nh, int mh, int len, int64_t d,
                            const float *q, const char *krow, int64_t khs, flashattn_dtype dt,
                            int64_t lds, float *wk, float *s, int64_t sld, int *pad) {
    const int nr = kern->nr, used = nh * len, m = nh * mh;
    if (used < 16 && *pad != used)
        for (int64_t c = 0; c < d; c++) memset(wk + c * nr, 0, 16 * sizeof(float));
    *pad = used;
    if (len == 1) /* one key: the heads' rows, khs apart, are the block to transpose */
        kern->transpose(wk, nr, krow, khs / fa_dtype_bytes(dt), dt, nh, d);
    else
        for (int h = 0; h < nh; h++)
            kern->transpose(wk + h * len, nr, krow + h * khs, lds, dt, len, d);
    for (int r = 0, t = 0, rows; r < m; r += rows, t++) {
        rows = strip_rows(m, kern->mr, t);
        kern->gemm(rows, 16, d, q + r * d, d, wk, nr, s + r * sld, sld, 0);
    }
    for (int h = 1; h < nh; h++)
        for (int r = h * mh; r < (h + 1) * mh; r++)
            memmove(s + r * sld, s + r * sld + h * len, (size_t)len * sizeof(float));
}

/* Wide path, acc (+)= P V for one kv-head's mh rows and len keys: the V
 * rows widened once into [len][dpad] (zero past d; for few rows, f32
 * rows with d = dpad are read where they lie), then the GEMM's tiles, NR
 * columns at a time. Each element of acc is the same FMA chain
 * as gemm_rows computes (kernels.h), so both paths give the same bits. */
static void wide_pv(const fa_kernels *kern, int mh, int len, int64_t d, int64_t dpad,
                    const float *p, int64_t sld, const char *vrow, flashattn_dtype dt,
                    int64_t lds, float *wv, float *acc, int accumulate, int *pad) {
    const int64_t es = fa_dtype_bytes(dt);
    /* f32 rows with no padding are already the GEMM's B rows: read in
     * place by up to two strips, not copied. The copy is contiguous and
     * stays in L1, where rows a head's stride apart (4 KiB at 8 x 128)
     * fall into a few cache sets, so more strips re-read them from L2. */
    const float *b = (const float *)vrow;
    int64_t ldb = lds;
    if (!(dt == FLASHATTN_F32 && dpad == d && mh <= 2 * kern->mr)) {
        for (int t = 0; t < len; t++) {
            kern->load(wv + t * dpad, vrow + t * lds * es, dt, d, 1.0f);
            if (dpad > d) memset(wv + t * dpad + d, 0, (size_t)(dpad - d) * sizeof(float));
        }
        b = wv, ldb = dpad;
        *pad = -1; /* wv is wide_qk's panel */
    }
    for (int64_t c = 0; c < dpad; c += kern->nr) {
        const int w = (int)(dpad - c < kern->nr ? dpad - c : kern->nr);
        for (int r = 0, t = 0, rows; r < mh; r += rows, t++) {
            rows = strip_rows(mh, kern->mr, t);
            kern->gemm(rows, w, len, p + r * sld, sld, b + c, ldb, acc + r * dpad + c, dpad,
                       accumulate);
        }
    }
}

/* Row r of an item is query i0 + r % mh / g of query head
 * (hk0 + r / mh) * g + r % mh % g. The loops over rows walk that in order
 * instead of dividing: three 64-bit divisions a row in each of three
 * loops were a tenth of an item's own time at 8 rows. */
typedef struct {
    int64_t i, h;  /* the row's query position and query head */
    int64_t k, q;  /* r % g, and r % mh / g */
} row_walk;

static row_walk walk_start(int64_t i0, int64_t hk0, int64_t g) {
    const row_walk w = {i0, hk0 * g, 0, 0};
    return w;
}

static inline void walk_next(row_walk *w, int64_t i0, int64_t g, int64_t queries) {
    if (++w->k < g) {
        w->h++;
        return;
    }
    w->k = 0;
    w->h -= g - 1; /* back to the kv-head's first query head */
    if (++w->q < queries) {
        w->i++;
        return;
    }
    w->q = 0; /* the next kv-head */
    w->i = i0;
    w->h += g;
}

/* What the steps of one item share: its rows, the thread's tiles. */
typedef struct {
    const fa_decode_problem *dp;
    const fa_decode_plan *plan;
    const fa_kernels *kern;
    fa_seq seq;
    int64_t hk0, nh, i0, i1; /* kv-heads [hk0, hk0 + nh), query positions [i0, i1) */
    int64_t piece;           /* keys per kernel call */
    int mh, m;               /* rows per kv-head, in all */
    float *q, *s, *acc, *mx, *ls, *wk;
    int *wide_pad; /* what wk holds (wide_qk) */
    fa_softmax_totals total; /* rows past FA_SUM_CHUNK keys (driver/softmax.h) */
} decode_item;

/* Q rows, pre-scaled into base 2 (rotated at their cache rows, as
 * FlashAttention-2), and the running maxima and sums reset. */
static void load_queries(const decode_item *t) {
    const fa_problem *pb = &t->dp->base;
    const int64_t d = pb->head_dim, g = pb->group, b = t->seq.idx;
    row_walk w = walk_start(t->i0, t->hk0, g);
    for (int r = 0; r < t->m; r++, walk_next(&w, t->i0, g, t->i1 - t->i0)) {
        t->kern->load(t->q + r * d, fa_row_ptr(pb->q, t->seq.qb, t->seq.q0 + w.i, w.h), pb->q->dtype, d,
                      pb->scale_log2);
        if (t->dp->rot_cos)
            fa_rotary_row(t->dp, t->q + r * d, t->seq.k0 + fa_kv_given(pb, b) + w.i * t->dp->rot_q_step);
        if (t->dp->scale[0].data && !fa_scale_per_token(t->dp, 0)) { /* q . (k * s) = (q * s) . k */
            int64_t step;
            const float *ks = fa_scale_fixed(t->dp, 0, w.h / g, &step);
            for (int64_t c = 0; c < d; c++) t->q[r * d + c] *= ks[c * step];
        }
        t->mx[r] = -INFINITY;
        t->ls[r] = 0.0f;
    }
}

/* A quantised cache's per-token scales on a piece: columns [0, len) of
 * the kv-head's mh rows at x (row stride ld) times the scales of keys
 * j .. j + len - 1 of kv-head hk in the cache's k (t = 0) or v (t = 1)
 * scales, one run of slots, so one stride apart. On V (skip_zero) a
 * weight of 0 stays 0 whatever the scale: a key a row does not see
 * leaves it nothing, even with a NaN scale (flashattn.h's rule). */
static void scale_columns(const decode_item *t, int which, float *x, int64_t ld, int64_t j, int64_t len,
                          int64_t hk, int skip_zero) {
    const float *sc = fa_cache_scale(t->dp, which, &t->seq, j, hk);
    const int64_t step = t->dp->scale[which].stride_seq;
    float s[FA_DECODE_SCALES];
    for (int64_t c0 = 0; c0 < len; c0 += FA_DECODE_SCALES) {
        const int64_t n = len - c0 < FA_DECODE_SCALES ? len - c0 : FA_DECODE_SCALES;
        for (int64_t c = 0; c < n; c++) s[c] = sc[(c0 + c) * step];
        t->kern->scale_cols(x + c0, ld, t->mh, n, s, skip_zero);
    }
}

/* S = Q K^T for keys [j0, j0 + n), in pieces, every head of a piece
 * before the next piece: the cache is read in address order, which the
 * hardware prefetchers follow. */
static void qk_step(const decode_item *t, int64_t j0, int64_t n, int64_t j_end) {
    const fa_problem *pb = &t->dp->base;
    const flashattn_tensor *kt = pb->k;
    const int64_t d = pb->head_dim, sld = t->plan->s_stride;
    const int64_t khs = kt->stride_head * fa_dtype_bytes(kt->dtype);
    for (int64_t j = j0; j < j0 + n;) {
        const char *row;
        int64_t len = run_at(t->dp, kt, &t->seq, t->hk0, j, j0 + n, &row);
        if (len > t->piece) len = t->piece;
        const int64_t pf = t->plan->wide_piece ? 0 : next_piece(t->dp, kt, &t->seq, t->hk0, j, len, j_end, row);
        const int stacked = t->plan->wide_piece && t->nh > 1 && t->nh * len <= 16;
        if (stacked)
            wide_qk_stacked(t->kern, (int)t->nh, t->mh, (int)len, d, t->q, row, khs, kt->dtype,
                            kt->stride_seq, t->wk, t->s + (j - j0), sld, t->wide_pad);
        for (int64_t h = 0; h < t->nh; h++) {
            float *sh = t->s + h * t->mh * sld + (j - j0);
            if (!stacked && t->plan->wide_piece)
                wide_qk(t->kern, t->mh, (int)len, d, t->q + h * t->mh * d, row + h * khs, kt->dtype,
                        kt->stride_seq, t->wk, sh, sld, t->wide_pad);
            else if (!stacked)
                t->kern->gemm_nt(t->mh, (int)len, d, t->q + h * t->mh * d, d, row + h * khs, kt->dtype,
                                 kt->stride_seq, sh, sld, pf);
            if (fa_scale_per_token(t->dp, 0))
                scale_columns(t, 0, sh, sld, j, len, t->hk0 + h, 0);
        }
        j += len;
    }
}

/* The score stage and the online softmax step of every row over keys
 * [j0, j0 + n); only steps that cut some row's visible range need the
 * mask. */
static void softmax_step(const decode_item *t, int64_t j0, int64_t n, int first) {
    const fa_problem *pb = &t->dp->base;
    const int64_t sld = t->plan->s_stride, dpad = pb->head_dim_v_pad;
    const int full = fa_mask_block_full(&t->seq.mask, t->i0, t->i1, j0, j0 + n);
    row_walk w = walk_start(t->i0, t->hk0, pb->group);
    for (int r0 = 0; r0 < t->m; r0 += FA_MAX_MR) {
        const int r1 = t->m - r0 < FA_MAX_MR ? t->m : r0 + FA_MAX_MR;
        float bmax[FA_MAX_MR];
        for (int r = r0; r < r1; r++, walk_next(&w, t->i0, pb->group, t->i1 - t->i0)) {
            const fa_scores sc = fa_scores_of(pb, &t->seq, w.h);
            fa_score_row(t->kern, &sc, t->s + r * sld, w.i, j0, n, full, FA_TILE_MIXED);
            bmax[r - r0] = t->kern->row_max(t->s + r * sld, n);
        }
        for (int r = r0; r < r1; r++)
            fa_softmax_row_exp(t->kern, t->s + r * sld, n, bmax[r - r0], &t->mx[r], &t->ls[r],
                               t->acc + r * dpad, pb->head_dim_v, first);
    }
}

/* acc (+)= P V per head over keys [j0, j0 + n), in the same pieces; the
 * first step overwrites, so acc needs no clearing. */
static void pv_step(const decode_item *t, int64_t j0, int64_t n, int64_t j_end, int first) {
    const fa_problem *pb = &t->dp->base;
    const flashattn_tensor *vt = pb->v;
    const int64_t dv = pb->head_dim_v, dpad = pb->head_dim_v_pad, sld = t->plan->s_stride;
    const int64_t vhs = vt->stride_head * fa_dtype_bytes(vt->dtype);
    for (int64_t j = j0; j < j0 + n;) {
        const char *row;
        int64_t len = run_at(t->dp, vt, &t->seq, t->hk0, j, j0 + n, &row);
        const int64_t most = t->plan->wide_piece ? t->plan->pv_piece : t->piece;
        if (len > most) len = most;
        const int64_t pf = t->plan->wide_piece ? 0 : next_piece(t->dp, vt, &t->seq, t->hk0, j, len, j_end, row);
        for (int64_t h = 0; h < t->nh; h++) {
            float *ph = t->s + h * t->mh * sld + (j - j0);
            if (fa_scale_per_token(t->dp, 1)) /* P (V * s) = (P * s) V, column by column */
                scale_columns(t, 1, ph, sld, j, len, t->hk0 + h, 1);
            if (t->plan->wide_piece)
                wide_pv(t->kern, t->mh, (int)len, dv, dpad, ph, sld, row + h * vhs, vt->dtype, vt->stride_seq,
                        t->wk, t->acc + h * t->mh * dpad, !first || j > j0, t->wide_pad);
            else
                t->kern->gemm_rows(t->mh, (int)dv, len, ph, sld, row + h * vhs, vt->dtype, vt->stride_seq,
                                   t->acc + h * t->mh * dpad, dpad, !first || j > j0, pf);
        }
        j += len;
    }
}

/* Every step of the split's keys. Rows past FA_SUM_CHUNK keys fold their
 * sums every fold_every keys of the split (driver/softmax.h). */
static void run_split(const decode_item *t, int split) {
    const fa_problem *pb = &t->dp->base;
    const int64_t bn = t->plan->block_n, dpad = pb->head_dim_v_pad, dv = pb->head_dim_v;
    const int long_rows = pb->seq_k > FA_SUM_CHUNK;
    const int64_t fold_every = FA_SUM_CHUNK / bn * bn;
    int64_t j_beg, j_end;
    fa_mask_split(fa_mask_lo(&t->seq.mask, t->i0), fa_mask_end(&t->seq.mask, t->i1 - 1), split,
                  t->plan->num_splits, bn, &j_beg, &j_end);
    if (long_rows) fa_softmax_totals_clear(&t->total, t->m);
    for (int64_t j0 = j_beg; j0 < j_end; j0 += bn) {
        const int64_t n = j0 + bn < j_end ? bn : j_end - j0;
        if (long_rows && j0 > j_beg && (j0 - j_beg) % fold_every == 0)
            for (int r = 0; r < t->m; r++) fa_softmax_fold(&t->total, r, t->acc + r * dpad, dv, t->mx[r], &t->ls[r]);
        qk_step(t, j0, n, j_end);
        softmax_step(t, j0, n, j0 == j_beg);
        pv_step(t, j0, n, j_end, j0 == j_beg);
    }
    for (int r = 0; long_rows && r < t->m; r++)
        fa_softmax_unfold(&t->total, r, t->acc + r * dpad, dv, t->mx[r], &t->ls[r]);
}

/* O = acc / l and the LSE of each row; a row that saw no key in this
 * split gets O = 0, LSE = -inf; the sink joins split 0 only (the merge
 * then counts it once). */
static void finalize_rows(const decode_item *t, const flashattn_tensor *o, float *lse, int split) {
    const fa_problem *pb = &t->dp->base;
    row_walk w = walk_start(t->i0, t->hk0, pb->group);
    for (int r = 0; r < t->m; r++, walk_next(&w, t->i0, pb->group, t->i1 - t->i0)) {
        void *orow = (void *)fa_row_ptr(o, t->seq.qb, t->seq.q0 + w.i, w.h);
        if (t->dp->scale[1].data && !fa_scale_per_token(t->dp, 1)) { /* P (V * s) = (P V) * s */
            int64_t step;
            const float *vs = fa_scale_fixed(t->dp, 1, w.h / pb->group, &step);
            float *acc = t->acc + r * pb->head_dim_v_pad;
            for (int64_t c = 0; c < pb->head_dim_v; c++) acc[c] *= vs[c * step];
        }
        fa_softmax_finalize_row(t->kern, orow, o->dtype, t->acc + r * pb->head_dim_v_pad, pb->head_dim_v,
                                t->mx[r], t->ls[r], lse ? fa_lse_at(pb, lse, &t->seq, w.h, w.i) : NULL,
                                split == 0 ? fa_sink2(pb->sinks, w.h) : -INFINITY);
    }
}

void fa_decode_item(const fa_decode_problem *dp, const fa_decode_plan *plan,
                    const fa_kernels *kern, int64_t b, int64_t hblock, int64_t qtile, int split,
                    const flashattn_tensor *o, float *lse, void *tw, int *wide_pad) {
    const fa_problem *pb = &dp->base;
    decode_item t;
    t.wide_pad = wide_pad;
    t.dp = dp, t.plan = plan, t.kern = kern;
    t.seq = fa_seq_of(pb, b);
    t.hk0 = hblock * plan->heads_per_item, t.i0 = qtile * plan->queries_per_item;
    if (t.i0 >= t.seq.seq_q) return; /* a shorter sequence of a varlen batch */
    t.nh = pb->heads_kv - t.hk0 < plan->heads_per_item ? pb->heads_kv - t.hk0 : plan->heads_per_item;
    t.i1 = t.seq.seq_q - t.i0 < plan->queries_per_item ? t.seq.seq_q : t.i0 + plan->queries_per_item;
    t.mh = (int)(pb->group * (t.i1 - t.i0)), t.m = (int)(t.nh * t.mh);
    t.piece = plan->wide_piece ? plan->wide_piece : FA_DECODE_PIECE;
    t.q = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_Q, 0);
    t.s = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_S, 0);
    t.acc = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_ACC, 0);
    t.mx = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_MAX, 0);
    t.ls = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_SUM, 0);
    t.wk = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_WIDE, 0);
    t.total.acc = (double *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_TOTAL_ACC, 0);
    t.total.l = (double *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_TOTAL_SUM, 0);
    t.total.m = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_TOTAL_MAX, 0);
    t.total.ld = pb->head_dim_v_pad;
    /* fast, then once more on the careful table if a NaN or Inf showed up
     * (driver/careful.h) */
    fa_kernels careful;
    for (int pass = 0;; pass++) {
        load_queries(&t);
        run_split(&t, split);
        if (pass || fa_softmax_rows_finite(kern, t.acc, pb->head_dim_v_pad, pb->head_dim_v, t.mx, t.ls, t.m)) break;
        careful = fa_careful_kernels(kern);
        t.kern = &careful;
    }
    finalize_rows(&t, o, lse, split);
}
