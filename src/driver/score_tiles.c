/*
 * The boolean mask's tiles, summarised once per call: every (q-block,
 * kv-block) tile of every slice the mask holds (broadcast batch and heads
 * count once) is hidden (no element attends), open (every element does)
 * or mixed. The drivers skip hidden tiles and leave the per-element mask
 * out of open ones. Each element within the problem's sizes is read at
 * most once (a tile stops being read once it is known to be mixed);
 * a tile past a shorter varlen sequence's end is judged on the whole
 * array, which can only make it mixed (always a correct answer).
 */
#include "driver/score_tiles.h"

#include <string.h>

#include "driver/score.h"

int64_t fa_score_tile_slices(const fa_problem *pb) {
    return pb->mask ? pb->mask->batch * pb->mask->heads : 0;
}

/* The state of rows [i0, i1) x keys [j0, j1): whether any element attends
 * and whether any does not, stopping after the row where both are known.
 * Where the keys are contiguous, eight bytes a word: ((w & 7f..) + 7f..) | w
 * has the high bit of each nonzero byte set and no carry between bytes, so
 * OR-ing those words says whether one attends and AND-ing them whether
 * one does not. The loop has no exit, so the compiler vectorises it. */
static int tile_state(const fa_score_slice *s, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const uint64_t lows = 0x7f7f7f7f7f7f7f7fu, highs = 0x8080808080808080u;
    int open = 0, hidden = 0;
    for (int64_t i = i0; i < i1 && !(open && hidden); i++) {
        const uint8_t *row = (const uint8_t *)s->base + i * s->sq;
        int64_t j = j0;
        if (s->sk == 1) {
            uint64_t any = 0, all = highs;
            for (; j + 8 <= j1; j += 8) {
                uint64_t w;
                memcpy(&w, row + j, sizeof w);
                const uint64_t on = (((w & lows) + lows) | w) & highs;
                any |= on, all &= on;
            }
            open |= any != 0, hidden |= j > j0 && all != highs;
        }
        for (; j < j1; j++) {
            const int on = row[j * s->sk] != 0;
            open |= on, hidden |= !on;
        }
    }
    return !open ? FA_TILE_HIDDEN : hidden ? FA_TILE_MIXED : FA_TILE_OPEN;
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
        out[kb] = (uint8_t)(i1 > i0 && j1 > j0 ? tile_state(&s, i0, i1, j0, j1) : FA_TILE_HIDDEN);
    }
}
