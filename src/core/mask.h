/*
 * The mask in one room: which keys each query sees, and every question the
 * drivers, the planner and the baselines ask about it for blocks of queries
 * and keys. Nothing outside this file works out a key range.
 *
 * In a sequence of seq_k keys, query i sees key j iff lo(i) <= j < end(i):
 *     lo(i)  = max(0, i + diag - left)          (left < 0: 0)
 *     end(i) = min(seq_k, i + diag + right + 1)  (right < 0: seq_k)
 * with diag = seq_k - seq_q (bottom-right alignment) or 0 (top-left), and
 * causal folded into right = 0 by the validation. Both bounds only grow
 * with i; every question below relies on that. A row with lo(i) >= end(i)
 * sees no key (O = 0, LSE = -inf).
 *
 * Score modifiers that hide keys by value (boolean masks, -inf biases) do
 * not change these bounds: they act in the score stage (driver/score.h) on
 * the keys the bounds let through.
 */
#ifndef FA_CORE_MASK_H
#define FA_CORE_MASK_H

#include <math.h>
#include <stdint.h>

typedef struct fa_mask {
    int64_t seq_k;       /* keys of the sequence */
    int64_t diag;        /* query i's own key is i + diag */
    int64_t left, right; /* window bounds; -1: none */
} fa_mask;

/* First key query i sees (clamped to >= 0). */
static inline int64_t fa_mask_lo(const fa_mask *m, int64_t i) {
    const int64_t lo = m->left < 0 ? 0 : i + m->diag - m->left;
    return lo < 0 ? 0 : lo;
}

/* One past the last key query i sees (clamped to [0, seq_k]). */
static inline int64_t fa_mask_end(const fa_mask *m, int64_t i) {
    int64_t end = m->right < 0 ? m->seq_k : i + m->diag + m->right + 1;
    if (end > m->seq_k) end = m->seq_k;
    return end < 0 ? 0 : end;
}

/* Whether the bounds cut no row of queries [i0, i1) inside keys [j0, j1):
 * every such row sees every such key, so the block needs no masking. */
static inline int fa_mask_block_full(const fa_mask *m, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    return fa_mask_lo(m, i1 - 1) <= j0 && fa_mask_end(m, i0) >= j1;
}

/* Columns of the kv-block [j0, j1) that query rows [s0, s1) (one strip of
 * a q-block) compute: 0 when no row sees the block, else up to the last
 * row's end rounded up to `grain` (key ranges move right with the row).
 * The columns left out are hidden from every row of the strip. */
static inline int64_t fa_mask_strip_cols(const fa_mask *m, int64_t s0, int64_t s1, int64_t j0,
                                         int64_t j1, int64_t grain) {
    const int64_t s_end = fa_mask_end(m, s1 - 1);
    if (s_end <= j0 || fa_mask_lo(m, s0) >= j1) return 0;
    if (s_end >= j1) return j1 - j0;
    const int64_t need = (s_end - j0 + grain - 1) / grain * grain;
    return need < j1 - j0 ? need : j1 - j0;
}

/* Columns at the start of kv-block [j0, ...) that query rows [s0, ...)
 * (one strip) leave out: the keys before the first row's first key (a
 * window's left edge), rounded down to whole `grain`s, and 0 unless that
 * is short of `cols`, the strip's end (fa_mask_strip_cols). Key ranges
 * move right with the row, so they are hidden from every row. */
static inline int64_t fa_mask_strip_lead(const fa_mask *m, int64_t s0, int64_t j0, int64_t cols,
                                         int64_t grain) {
    const int64_t lead = (fa_mask_lo(m, s0) - j0) / grain * grain;
    return lead > 0 && lead < cols ? lead : 0;
}

/* The queries of [0, seq_q) that see any key of [j0, j1): one range
 * [*ia, *ie) (both bounds grow with the query); rows inside it may still
 * see none of them, which the tile masking handles. Binary searches. */
static inline void fa_mask_rows_seeing(const fa_mask *m, int64_t seq_q, int64_t j0, int64_t j1,
                                       int64_t *ia, int64_t *ie) {
    int64_t lo = 0, hi = seq_q;
    while (lo < hi) { /* first row whose end is past j0 */
        const int64_t mid = lo + (hi - lo) / 2;
        if (fa_mask_end(m, mid) > j0) hi = mid; else lo = mid + 1;
    }
    *ia = lo;
    lo = 0, hi = seq_q;
    while (lo < hi) { /* first row that starts at or after j1 */
        const int64_t mid = lo + (hi - lo) / 2;
        if (fa_mask_lo(m, mid) >= j1) hi = mid; else lo = mid + 1;
    }
    *ie = lo;
}

/* The columns of a transposed tile of queries [i0, i1) (the backward's S^T:
 * keys down the rows, column c is query i0 + c) that key rows [ja, jb)
 * need: [*ca, *ce) relative to i0, the queries that see any of those keys
 * widened to whole groups of `grain` columns counted from i0, clipped to
 * lim; *ca = *ce = 0 when no query of the tile sees them. Every column
 * outside is hidden from every key of the rows. Both ends only grow with
 * the keys. Binary searches over the tile's queries. */
static inline void fa_mask_cols_seeing(const fa_mask *m, int64_t i0, int64_t i1, int64_t ja,
                                       int64_t jb, int64_t grain, int64_t lim, int64_t *ca,
                                       int64_t *ce) {
    int64_t lo = i0, hi = i1;
    while (lo < hi) { /* first query whose end is past ja */
        const int64_t mid = lo + (hi - lo) / 2;
        if (fa_mask_end(m, mid) > ja) hi = mid; else lo = mid + 1;
    }
    const int64_t a = lo;
    hi = i1;
    while (lo < hi) { /* first query that starts at or after jb */
        const int64_t mid = lo + (hi - lo) / 2;
        if (fa_mask_lo(m, mid) >= jb) hi = mid; else lo = mid + 1;
    }
    if (a >= lo) {
        *ca = *ce = 0;
        return;
    }
    const int64_t e = (lo - i0 + grain - 1) / grain * grain;
    *ca = (a - i0) / grain * grain;
    *ce = e < lim ? e : lim;
}

/* Keys [*j_beg, *j_end) of part `split` of `splits` (split-KV): consecutive
 * parts of the keys [lo, end) that rows see, each a whole number of steps
 * of bn keys; late parts may be empty. */
static inline void fa_mask_split(int64_t lo, int64_t end, int split, int splits, int64_t bn,
                                 int64_t *j_beg, int64_t *j_end) {
    if (end <= lo) {
        *j_beg = *j_end = lo;
        return;
    }
    int64_t per = (end - lo + splits - 1) / splits;
    per = (per + bn - 1) / bn * bn;
    const int64_t a = lo + per * split;
    *j_beg = a < end ? a : end;
    *j_end = a + per < end ? a + per : end;
}

/* Mask one row of scores: keys [j0, j0 + n) of query i, -inf outside the
 * keys it sees. */
static inline void fa_mask_row(const fa_mask *m, float *row, int64_t i, int64_t j0, int64_t n) {
    const int64_t lo = fa_mask_lo(m, i), end = fa_mask_end(m, i);
    for (int64_t j = 0; j < n && j0 + j < lo; j++) row[j] = -INFINITY;
    for (int64_t j = end - j0 > 0 ? end - j0 : 0; j < n; j++) row[j] = -INFINITY;
}

/* Mask a transposed tile (the backward's S^T): row r is key j0 + r, column
 * c is query i0 + c (c < rows); -inf where the key is hidden. A key's
 * visible columns are one range [ca, cb): the queries whose end is past
 * it minus those whose start is past it; both only grow with the key. */
static inline void fa_mask_tile_t(const fa_mask *m, float *st, int64_t ld, int keys, int64_t i0,
                                  int64_t rows, int64_t j0) {
    int64_t ca = 0, cb = 0;
    for (int r = 0; r < keys; r++) {
        const int64_t j = j0 + r;
        while (ca < rows && fa_mask_end(m, i0 + ca) <= j) ca++;
        while (cb < rows && fa_mask_lo(m, i0 + cb) <= j) cb++;
        float *row = st + r * ld;
        for (int64_t c = 0; c < ca && c < rows; c++) row[c] = -INFINITY;
        for (int64_t c = cb > ca ? cb : ca; c < rows; c++) row[c] = -INFINITY;
    }
}

#endif
