/*
 * The boolean mask's tiles, summarised once per call: every (q-block,
 * kv-block) tile of every slice the mask holds (broadcast batch and heads
 * count once) is hidden (no element attends), open (every element does)
 * or mixed. The drivers skip hidden tiles and leave the per-element mask
 * out of open ones. Each element within the problem's sizes is read once;
 * a tile past a shorter varlen sequence's end is judged on the whole
 * array, which can only make it mixed (always a correct answer).
 */
#include "driver/score_tiles.h"

#include "driver/score.h"

int64_t fa_score_tile_slices(const fa_problem *pb) {
    return pb->mask ? pb->mask->batch * pb->mask->heads : 0;
}

void fa_score_tiles_row(const fa_problem *pb, int64_t slice, int64_t qb, int64_t bm, int64_t bn,
                        int64_t qblocks, int64_t kvblocks, uint8_t *tiles) {
    const flashattn_scores *m = pb->mask;
    const int64_t tb = slice / m->heads, th = slice % m->heads;
    const fa_score_slice s = fa_score_slice_of(m, 1, tb, th, NULL);
    const int64_t i0 = qb * bm, i1 = i0 + bm < pb->seq_q ? i0 + bm : pb->seq_q;
    uint8_t *out = tiles + (slice * qblocks + qb) * kvblocks;
    for (int64_t kb = 0; kb < kvblocks; kb++) {
        const int64_t j0 = kb * bn, j1 = j0 + bn < pb->seq_k ? j0 + bn : pb->seq_k;
        int64_t seen = 0;
        for (int64_t i = i0; i < i1; i++) {
            const uint8_t *row = (const uint8_t *)s.base + i * s.sq;
            for (int64_t j = j0; j < j1; j++) seen += row[j * s.sk] != 0;
        }
        const int64_t all = (i1 - i0) * (j1 - j0);
        out[kb] = seen == 0 ? FA_TILE_HIDDEN : seen == all ? FA_TILE_OPEN : FA_TILE_MIXED;
    }
}
