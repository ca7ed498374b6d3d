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
 *       K rows of every head of the block, in address order -> f32
 *           ([key][head][dim]: one conversion per key when the heads'
 *           rows are adjacent, as in a [seq, heads_kv, dim] cache)
 *       per head: S = Q K^T   (gemm_nt: K rows as they are, no packing)
 *       mask, m' = max(m, rowmax S), P = exp2(S - m'), l = l*2^(m-m') + rowsum P
 *       V rows, likewise -> f32; per head: acc = acc*2^(m-m') + P V
 *   O = acc / l,  LSE = ln2 * (m + log2 l)
 *
 * Decode is bound by memory: the step's V rows are prefetched while its K
 * rows are converted, and the next step's K rows while its V rows are.
 */
#include <math.h>
#include <string.h>

#include "driver/decode.h"
#include "driver/pack.h"

#define FA_LN2 0.69314718055994530942

static size_t round16(size_t x) { return (x + 15) / 16 * 16; }

/* -inf outside [lo, end) for the row's keys [j0, j0 + n). */
static void mask_row(float *s, int64_t j0, int64_t n, int64_t lo, int64_t end) {
    for (int64_t j = 0; j < n && j0 + j < lo; j++) s[j] = -INFINITY;
    for (int64_t j = end - j0 > 0 ? end - j0 : 0; j < n; j++) s[j] = -INFINITY;
}

/* Addresses of rows [j0, j0 + n) of kv-head hk of sequence b in t (the
 * cache's k or v): one block-table lookup per page, not per row. */
static void cache_rows(const fa_decode_problem *dp, const flashattn_tensor *t, int64_t b,
                       int64_t hk, int64_t j0, int64_t n, const char **out) {
    const int64_t step = t->stride_seq * (t->dtype == FLASHATTN_F32 ? 4 : 2);
    for (int64_t j = 0; j < n;) {
        const char *row = fa_cache_row(dp, t, b, j0 + j, hk);
        int64_t run = dp->block_table ? dp->page_size - (j0 + j) % dp->page_size : n - j;
        if (run > n - j) run = n - j;
        for (int64_t r = 0; r < run; r++) out[j + r] = row + r * step;
        j += run;
    }
}

/* Into L2: nh rows of `bytes`, head_step bytes apart from row. */
static void prefetch_heads(const char *row, int64_t nh, int64_t head_step, int64_t bytes) {
    for (int64_t h = 0; h < nh; h++)
        for (int64_t off = 0; off < bytes; off += 64)
            __builtin_prefetch(row + h * head_step + off, 0, 2);
}

/* Keys [*j_beg, *j_end) of split `split`: consecutive parts of [lo, end),
 * each a whole number of steps; late splits may be empty. */
static void split_range(int64_t lo, int64_t end, int split, int splits, int64_t bn,
                        int64_t *j_beg, int64_t *j_end) {
    if (end <= lo) {
        *j_beg = *j_end = lo;
        return;
    }
    int64_t per = (end - lo + splits - 1) / splits;
    per = (per + bn - 1) / bn * bn;
    int64_t a = lo + per * split;
    *j_beg = a < end ? a : end;
    *j_end = a + per < end ? a + per : end;
}

void fa_decode_item(const fa_decode_problem *dp, const fa_decode_plan *plan,
                    const fa_kernels *kern, int64_t b, int64_t hblock, int64_t qtile, int split,
                    const flashattn_tensor *o, float *lse, float *tw) {
    const fa_problem seq = fa_decode_seq(dp, b);
    const fa_problem *pb = &seq;
    const int64_t d = pb->head_dim, dpad = pb->head_dim_pad, g = pb->group;
    const int64_t bn = plan->block_n;
    const int mr = kern->mr, nr = kern->nr;
    const int64_t hk0 = hblock * plan->heads_per_item, i0 = qtile * plan->queries_per_item;
    const int64_t nh = pb->heads_kv - hk0 < plan->heads_per_item ? pb->heads_kv - hk0 : plan->heads_per_item;
    const int64_t i1 = pb->seq_q - i0 < plan->queries_per_item ? pb->seq_q : i0 + plan->queries_per_item;
    const int mh = (int)(g * (i1 - i0)), m = (int)(nh * mh);
    const size_t rows = (size_t)plan->rows;
    const int64_t es = pb->k->dtype == FLASHATTN_F32 ? 4 : 2, rowb = d * es;
    const int64_t khs = pb->k->stride_head * es, vhs = pb->v->stride_head * es;
    /* the block's rows of one key are one run of nh * d elements */
    const int k_run = pb->k->stride_head == d, v_run = pb->v->stride_head == d && dpad == d;
    const int64_t kld = nh * d, vld = nh * dpad;
    float *q = tw;                                               /* [m][d]        */
    float *s = q + round16(rows * (size_t)d);                    /* [m][bn]       */
    float *acc = s + round16(rows * (size_t)bn);                 /* [m][dpad]     */
    float *kv = acc + round16(rows * (size_t)dpad);              /* [bn][nh][d], then [bn][nh][dpad] */
    float *mx = kv + round16((size_t)(plan->heads_per_item * bn * dpad));
    float *ls = mx + round16(rows);
    const char **krow = (const char **)(ls + round16(rows)); /* [bn] each, for head hk0 */
    const char **vrow = krow + bn, **knext = vrow + bn;

    /* Q rows, pre-scaled into base 2 */
    for (int r = 0; r < m; r++) {
        const int64_t i = i0 + r % mh / g, h = (hk0 + r / mh) * g + r % mh % g;
        kern->load(q + r * d, fa_row_ptr(pb->q, b, i, h), pb->q->dtype, d, pb->scale_log2);
        mx[r] = -INFINITY;
        ls[r] = 0.0f;
    }

    int64_t j_beg, j_end;
    split_range(fa_key_lo(pb, i0), fa_key_end(pb, i1 - 1), split, plan->num_splits, bn, &j_beg,
                &j_end);
    int first = 1;
    if (j_beg < j_end) cache_rows(dp, pb->k, b, hk0, j_beg, j_end - j_beg < bn ? j_end - j_beg : bn, krow);
    for (int64_t j0 = j_beg; j0 < j_end; j0 += bn) {
        const int64_t n = j0 + bn < j_end ? bn : j_end - j0;
        cache_rows(dp, pb->v, b, hk0, j0, n, vrow);
        for (int64_t j = 0; j < n; j++) {
            if (k_run)
                kern->load(kv + j * kld, krow[j], pb->k->dtype, kld, 1.0f);
            else
                for (int64_t h = 0; h < nh; h++)
                    kern->load(kv + j * kld + h * d, krow[j] + h * khs, pb->k->dtype, d, 1.0f);
            prefetch_heads(vrow[j], nh, vhs, rowb);
        }
        for (int64_t h = 0; h < nh; h++)
            kern->gemm_nt(mh, (int)n, d, q + h * mh * d, d, kv + h * d, kld, s + h * mh * bn, bn);

        /* Only steps that cut some row's visible range need the mask. */
        const int full = fa_key_lo(pb, i1 - 1) <= j0 && fa_key_end(pb, i0) >= j0 + n;
        for (int r = 0; r < m; r++) {
            float *row = s + r * bn;
            const int64_t i = i0 + r % mh / g;
            if (!full) mask_row(row, j0, n, fa_key_lo(pb, i), fa_key_end(pb, i));
            const float bmax = kern->row_max(row, n);
            const float mnew = bmax > mx[r] ? bmax : mx[r];
            if (mnew == -INFINITY) {
                /* Nothing visible to this row yet: P = 0, and keep m = -inf
                 * (exp2(-inf - -inf) would be NaN). */
                memset(row, 0, (size_t)n * sizeof(float));
                continue;
            }
            const float alpha = exp2f(mx[r] - mnew); /* 0 when m was -inf */
            ls[r] = ls[r] * alpha + kern->exp2_sum(row, n, mnew);
            if (!first && alpha != 1.0f) kern->scale(acc + r * dpad, dpad, alpha);
            mx[r] = mnew;
        }

        /* V rows, while the next step's K rows are prefetched */
        const int64_t n_next = j0 + bn < j_end ? (j0 + 2 * bn < j_end ? bn : j_end - j0 - bn) : 0;
        if (n_next) cache_rows(dp, pb->k, b, hk0, j0 + bn, n_next, knext);
        for (int64_t j = 0; j < n; j++) {
            if (v_run)
                kern->load(kv + j * vld, vrow[j], pb->v->dtype, vld, 1.0f);
            else
                for (int64_t h = 0; h < nh; h++) {
                    float *vr = kv + j * vld + h * dpad;
                    kern->load(vr, vrow[j] + h * vhs, pb->v->dtype, d, 1.0f);
                    if (dpad > d) memset(vr + d, 0, (size_t)(dpad - d) * sizeof(float));
                }
            if (j < n_next) prefetch_heads(knext[j], nh, khs, rowb);
        }
        const char **t = krow;
        krow = knext, knext = t;

        /* acc (+)= P V per head; the first step overwrites, so acc needs no clearing */
        for (int64_t h = 0; h < nh; h++)
            for (int64_t c = 0; c < dpad; c += nr) {
                const int n_cols = (int)(dpad - c < nr ? dpad - c : nr);
                for (int r = (int)(h * mh); r < (h + 1) * mh; r += mr) {
                    const int rr = (int)((h + 1) * mh - r < mr ? (h + 1) * mh - r : mr);
                    kern->gemm(rr, n_cols, n, s + r * bn, bn, kv + h * dpad + c, vld,
                               acc + r * dpad + c, dpad, !first);
                }
            }
        first = 0;
    }

    for (int r = 0; r < m; r++) {
        const int64_t i = i0 + r % mh / g, h = (hk0 + r / mh) * g + r % mh % g;
        void *orow = (void *)fa_row_ptr(o, b, i, h);
        float row_lse;
        if (ls[r] == 0.0f) {
            /* The row saw no key (in this split): O = 0, LSE = -inf. */
            memset(acc + r * dpad, 0, (size_t)d * sizeof(float));
            kern->store(orow, o->dtype, acc + r * dpad, d, 1.0f);
            row_lse = -INFINITY;
        } else {
            kern->store(orow, o->dtype, acc + r * dpad, d, 1.0f / ls[r]);
            row_lse = (float)(FA_LN2 * ((double)mx[r] + log2((double)ls[r])));
        }
        if (lse) lse[(b * pb->heads_q + h) * pb->seq_q + i] = row_lse;
    }
}
