/* The boolean mask's tile summary (score_tiles.c): FA_TILE_* per
 * [slice][q-block][kv-block], bytes. */
#ifndef FA_DRIVER_SCORE_TILES_H
#define FA_DRIVER_SCORE_TILES_H

#include <stdint.h>

#include "core/problem.h"

/* Slices of the mask (its batch times its heads), 0 without one. */
int64_t fa_score_tile_slices(const fa_problem *pb);

/* Row qb of slice `slice`'s tiles of bm x bn. */
void fa_score_tiles_row(const fa_problem *pb, int64_t slice, int64_t qb, int64_t bm, int64_t bn,
                        int64_t qblocks, int64_t kvblocks, uint8_t *tiles);

#endif
