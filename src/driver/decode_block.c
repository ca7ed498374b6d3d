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
 * every dot product horizontally, so each piece of NR keys of a kv-head is
 * widened once into the thread's workspace (K as a [d][NR] panel by the
 * transposing copy, V as f32 rows) and the forward's MR x NR broadcast
 * GEMM tile does S = Q K^T and acc += P V. P V gives the same bits either
 * way (gemm_rows is gemm's FMA chain); S = Q K^T differs by rounding (the
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

/* Keys per kernel call: 16 keys of 8 kv-heads of 128 f16 are 32 KiB, read
 * by the 8 calls of a piece in address order, within L1. */
#define FA_DECODE_PIECE 16

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

/* Rows of strip s when mh rows are cut into the fewest strips of at most
 * mr rows, as even as possible: 16 rows as 8 + 8, not 12 + 4, whose
 * 4-row tile leaves the FMA ports half idle (4 chains of a 4-cycle FMA
 * when the piece has 16 keys). Each row's result does not depend on its
 * strip (kernels.h). */
static int strip_rows(int mh, int mr, int s) {
    const int strips = (mh + mr - 1) / mr;
    return mh / strips + (s < mh % strips);
}

/* Wide path, S = Q K^T for one kv-head's mh rows and len <= NR keys:
 * the keys widened once into a [d][NR] panel, then the GEMM's MR x NR
 * broadcast tiles. Columns are computed in whole multiples of 16 (the
 * panel's columns past len zero); the extra ones land in S's slack past
 * the key and are overwritten by the next piece or never read. */
static void wide_qk(const fa_kernels *kern, int mh, int len, int64_t d, const float *q,
                    const char *krow, flashattn_dtype dt, int64_t lds, float *wk, float *s,
                    int64_t sld) {
    const int nr = kern->nr, w = (len + 15) / 16 * 16;
    /* The padding columns are cleared before the copy, as the whole last
     * group of 16 (one 64-byte store a row, inlined): a memset call per
     * row of only the padding is a visible share of a short forward. */
    if (w > len)
        for (int64_t c = 0; c < d; c++) memset(wk + c * nr + w - 16, 0, 16 * sizeof(float));
    kern->transpose(wk, nr, krow, lds, dt, len, d);
    for (int r = 0, t = 0, rows; r < mh; r += rows, t++) {
        rows = strip_rows(mh, kern->mr, t);
        kern->gemm(rows, w, d, q + r * d, d, wk, nr, s + r * sld, sld, 0);
    }
}

/* Wide path, acc (+)= P V for one kv-head's mh rows and len keys: the V
 * rows widened once into [len][dpad] (zero past d; for few rows, f32
 * rows with d = dpad are read where they lie), then the GEMM's tiles, NR
 * columns at a time. Each element of acc is the same FMA chain
 * as gemm_rows computes (kernels.h), so both paths give the same bits. */
static void wide_pv(const fa_kernels *kern, int mh, int len, int64_t d, int64_t dpad,
                    const float *p, int64_t sld, const char *vrow, flashattn_dtype dt,
                    int64_t lds, float *wv, float *acc, int accumulate) {
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

void fa_decode_item(const fa_decode_problem *dp, const fa_decode_plan *plan,
                    const fa_kernels *kern, int64_t b, int64_t hblock, int64_t qtile, int split,
                    const flashattn_tensor *o, float *lse, void *tw) {
    const fa_problem *pb = &dp->base;
    const fa_seq seq = fa_seq_of(pb, b);
    const fa_mask *mask = &seq.mask;
    const int64_t d = pb->head_dim, g = pb->group;
    const int64_t dv = pb->head_dim_v, dpad = pb->head_dim_v_pad; /* V's, O's: acc's rows */
    const int64_t bn = plan->block_n;
    const int64_t hk0 = hblock * plan->heads_per_item, i0 = qtile * plan->queries_per_item;
    const int64_t nh = pb->heads_kv - hk0 < plan->heads_per_item ? pb->heads_kv - hk0 : plan->heads_per_item;
    const int64_t i1 = seq.seq_q - i0 < plan->queries_per_item ? seq.seq_q : i0 + plan->queries_per_item;
    if (i0 >= seq.seq_q) return; /* a shorter sequence of a varlen batch */
    const int mh = (int)(g * (i1 - i0)), m = (int)(nh * mh);
    const flashattn_tensor *kt = pb->k, *vt = pb->v;
    const int64_t kes = fa_dtype_bytes(kt->dtype), ves = fa_dtype_bytes(vt->dtype);
    const int64_t khs = kt->stride_head * kes, vhs = vt->stride_head * ves;
    const int64_t sld = plan->s_stride;
    const int64_t piece = plan->wide_piece ? plan->wide_piece : FA_DECODE_PIECE;
    float *q = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_Q, 0);
    float *s = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_S, 0);
    float *acc = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_ACC, 0);
    float *mx = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_MAX, 0);
    float *ls = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_SUM, 0);
    float *wk = (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_WIDE, 0);
    const fa_softmax_totals total = {
        (double *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_TOTAL_ACC, 0),
        (double *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_TOTAL_SUM, 0),
        (float *)fa_region_at(&plan->thread, tw, FA_DECODE_THREAD_TOTAL_MAX, 0), dpad};
    /* rows past FA_SUM_CHUNK keys fold their sums every fold_every keys of
     * the split (driver/softmax.h) */
    const int long_rows = pb->seq_k > FA_SUM_CHUNK;
    const int64_t fold_every = FA_SUM_CHUNK / bn * bn;

    /* fast, then once more on the careful table if a NaN or Inf showed up
     * (driver/careful.h) */
    fa_kernels careful;
    row_walk w;
    for (int pass = 0;; pass++) {
        /* Q rows, pre-scaled into base 2 */
        w = walk_start(i0, hk0, g);
        for (int r = 0; r < m; r++, walk_next(&w, i0, g, i1 - i0)) {
            kern->load(q + r * d, fa_row_ptr(pb->q, seq.qb, seq.q0 + w.i, w.h), pb->q->dtype, d, pb->scale_log2);
            if (dp->rot_cos) /* at cache rows, as FlashAttention-2 */
                fa_rotary_row(dp, q + r * d, seq.k0 + fa_kv_given(pb, b) + w.i * dp->rot_q_step);
            mx[r] = -INFINITY;
            ls[r] = 0.0f;
        }

        int64_t j_beg, j_end;
        fa_mask_split(fa_mask_lo(mask, i0), fa_mask_end(mask, i1 - 1), split, plan->num_splits, bn,
                      &j_beg, &j_end);
        int first = 1;
        if (long_rows) fa_softmax_totals_clear(&total, m);
        for (int64_t j0 = j_beg; j0 < j_end; j0 += bn) {
            const int64_t n = j0 + bn < j_end ? bn : j_end - j0;
            if (long_rows && j0 > j_beg && (j0 - j_beg) % fold_every == 0)
                for (int r = 0; r < m; r++) fa_softmax_fold(&total, r, acc + r * dpad, dv, mx[r], &ls[r]);

            /* Keys in pieces, every head of a piece before the next piece: the
             * cache is read in address order, which the hardware prefetchers
             * follow. */
            for (int64_t j = j0; j < j0 + n;) {
                const char *row;
                int64_t len = run_at(dp, kt, &seq, hk0, j, j0 + n, &row);
                if (len > piece) len = piece;
                const int64_t pf = plan->wide_piece ? 0 : next_piece(dp, kt, &seq, hk0, j, len, j_end, row);
                for (int64_t h = 0; h < nh; h++) {
                    float *sh = s + h * mh * sld + (j - j0);
                    if (plan->wide_piece)
                        wide_qk(kern, mh, (int)len, d, q + h * mh * d, row + h * khs, kt->dtype,
                                kt->stride_seq, wk, sh, sld);
                    else
                        kern->gemm_nt(mh, (int)len, d, q + h * mh * d, d, row + h * khs, kt->dtype,
                                      kt->stride_seq, sh, sld, pf);
                }
                j += len;
            }

            /* Only steps that cut some row's visible range need the mask. */
            const int full = fa_mask_block_full(mask, i0, i1, j0, j0 + n);
            w = walk_start(i0, hk0, g);
            for (int r0 = 0; r0 < m; r0 += FA_MAX_MR) {
                const int r1 = m - r0 < FA_MAX_MR ? m : r0 + FA_MAX_MR;
                float bmax[FA_MAX_MR];
                for (int r = r0; r < r1; r++, walk_next(&w, i0, g, i1 - i0)) {
                    const fa_scores sc = fa_scores_of(pb, &seq, w.h);
                    fa_score_row(kern, &sc, s + r * sld, w.i, j0, n, full, FA_TILE_MIXED);
                    bmax[r - r0] = kern->row_max(s + r * sld, n);
                }
                for (int r = r0; r < r1; r++)
                    fa_softmax_row_exp(kern, s + r * sld, n, bmax[r - r0], &mx[r], &ls[r],
                                       acc + r * dpad, dv, first);
            }

            /* acc (+)= P V per head, in the same pieces; the first step
             * overwrites, so acc needs no clearing */
            for (int64_t j = j0; j < j0 + n;) {
                const char *row;
                int64_t len = run_at(dp, vt, &seq, hk0, j, j0 + n, &row);
                if (len > piece) len = piece;
                const int64_t pf = plan->wide_piece ? 0 : next_piece(dp, vt, &seq, hk0, j, len, j_end, row);
                for (int64_t h = 0; h < nh; h++) {
                    const float *ph = s + h * mh * sld + (j - j0);
                    if (plan->wide_piece)
                        wide_pv(kern, mh, (int)len, dv, dpad, ph, sld, row + h * vhs, vt->dtype,
                                vt->stride_seq, wk, acc + h * mh * dpad, !first || j > j0);
                    else
                        kern->gemm_rows(mh, (int)dv, len, ph, sld, row + h * vhs, vt->dtype,
                                        vt->stride_seq, acc + h * mh * dpad, dpad, !first || j > j0, pf);
                }
                j += len;
            }
            first = 0;
        }
        for (int r = 0; long_rows && r < m; r++) fa_softmax_unfold(&total, r, acc + r * dpad, dv, mx[r], &ls[r]);
        if (pass || fa_softmax_rows_finite(acc, dpad, dv, mx, ls, m)) break;
        careful = fa_careful_kernels(kern);
        kern = &careful;
    }
    w = walk_start(i0, hk0, g);
    for (int r = 0; r < m; r++, walk_next(&w, i0, g, i1 - i0)) {
        /* a row that saw no key in this split gets O = 0, LSE = -inf; the
         * sink joins split 0 only (the merge then counts it once) */
        void *orow = (void *)fa_row_ptr(o, seq.qb, seq.q0 + w.i, w.h);
        fa_softmax_finalize_row(kern, orow, o->dtype, acc + r * dpad, dv, mx[r], ls[r],
                                lse ? fa_lse_at(pb, lse, &seq, w.h, w.i) : NULL,
                                split == 0 ? fa_sink2(pb->sinks, w.h) : -INFINITY);
    }
}
