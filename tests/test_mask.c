/*
 * The mask's room (src/core/mask.h) against its definition, query by query
 * and key by key: for random sequence lengths, alignments and windows, the
 * questions the drivers ask about blocks (whether a block needs masking,
 * which queries see a key range, which columns of a transposed tile a key
 * strip needs) must agree with a brute-force walk over lo(i) <= j < end(i).
 * The drivers skip whatever these answers leave out, so an answer too
 * narrow loses gradient terms and one too wide costs only time: the checks
 * hold both sides.
 */
#include "core/mask.h"
#include "reference/random.h"
#include "testutil.h"

static int sees(const fa_mask *m, int64_t i, int64_t j) {
    return fa_mask_lo(m, i) <= j && j < fa_mask_end(m, i);
}

/* Whether query i sees any key of [ja, jb). */
static int sees_any(const fa_mask *m, int64_t i, int64_t ja, int64_t jb) {
    for (int64_t j = ja; j < jb; j++)
        if (sees(m, i, j)) return 1;
    return 0;
}

static int64_t draw(uint64_t *s, int64_t n) { return (int64_t)(fa_rand_u64(s) % (uint64_t)n); }

static void check_one(const fa_mask *m, int64_t seq_q, int64_t i0, int64_t i1, int64_t ja, int64_t jb,
                      int64_t grain) {
    const int64_t rows = i1 - i0, lim = (rows + 15) / 16 * 16;
    int64_t ca, ce;
    fa_mask_cols_seeing(m, i0, i1, ja, jb, grain, lim, &ca, &ce);
    int64_t first = -1, last = -1;
    for (int64_t i = i0; i < i1; i++)
        if (sees_any(m, i, ja, jb)) {
            if (first < 0) first = i;
            last = i;
        }
    const char *what = "seq_q %lld seq_k %lld diag %lld window (%lld, %lld), queries [%lld, %lld), "
                       "keys [%lld, %lld), grain %lld: columns [%lld, %lld)";
#define ARGS (long long)seq_q, (long long)m->seq_k, (long long)m->diag, (long long)m->left,         \
             (long long)m->right, (long long)i0, (long long)i1, (long long)ja, (long long)jb,       \
             (long long)grain, (long long)ca, (long long)ce
    if (first < 0) {
        TT_CHECK(ca == 0 && ce == 0, what, ARGS);
    } else {
        /* every query that sees a key is inside, in whole grains from i0, within lim */
        TT_CHECK(ca <= first - i0 && ce > last - i0 && ce <= lim, what, ARGS);
        TT_CHECK(ca % grain == 0 && (ce % grain == 0 || ce == lim), what, ARGS);
        /* and no wider than the grains those queries occupy */
        TT_CHECK(ca == (first - i0) / grain * grain, what, ARGS);
        const int64_t tight = (last - i0 + grain) / grain * grain;
        TT_CHECK(ce == (tight < lim ? tight : lim), what, ARGS);
    }
    /* the range rows_seeing gives over the whole sequence holds every query
     * that sees a key */
    int64_t ia, ie;
    fa_mask_rows_seeing(m, seq_q, ja, jb, &ia, &ie);
    for (int64_t i = 0; i < seq_q; i++)
        if (sees_any(m, i, ja, jb)) TT_CHECK(ia <= i && i < ie, "rows_seeing: query %lld outside [%lld, %lld)",
                                             (long long)i, (long long)ia, (long long)ie);
    /* a strip's lead columns are hidden from every row of it, in whole grains */
    const int64_t cols = fa_mask_strip_cols(m, i0, i1, ja, jb, 32);
    const int64_t lead = fa_mask_strip_lead(m, i0, ja, cols, grain);
    TT_CHECK(lead >= 0 && lead % grain == 0 && (lead == 0 || lead < cols),
             "strip_lead %lld (cols %lld, grain %lld)", (long long)lead, (long long)cols, (long long)grain);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = ja; j < ja + lead; j++)
            TT_CHECK(!sees(m, i, j), "strip_lead %lld: query %lld sees key %lld", (long long)lead,
                     (long long)i, (long long)j);
    /* a block called full has every key visible to every query */
    if (fa_mask_block_full(m, i0, i1, ja, jb))
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = ja; j < jb; j++)
                TT_CHECK(sees(m, i, j), "block_full: query %lld does not see key %lld", (long long)i,
                         (long long)j);
#undef ARGS
}

static void test_random_masks(void) {
    uint64_t s = 20261205;
    for (int n = 0; n < 3000; n++) {
        const int64_t seq_q = 1 + draw(&s, 300), seq_k = 1 + draw(&s, 300);
        fa_mask m = {.seq_k = seq_k,
                     .diag = draw(&s, 2) ? seq_k - seq_q : 0,
                     .left = draw(&s, 3) ? -1 : draw(&s, 64),
                     .right = draw(&s, 3) == 0 ? -1 : draw(&s, 2) ? 0 : draw(&s, 40)};
        const int64_t i0 = draw(&s, seq_q), i1 = i0 + 1 + draw(&s, seq_q - i0);
        const int64_t ja = draw(&s, seq_k), jb = ja + 1 + draw(&s, seq_k - ja < 24 ? seq_k - ja : 24);
        const int64_t grains[] = {1, 16, 32};
        check_one(&m, seq_q, i0, i1, ja, jb, grains[draw(&s, 3)]);
    }
}

int main(void) {
    test_random_masks();
    return tt_finish("test_mask");
}
