/*
 * AMX-BF16 peak loop for `flashattn peak` and bench's pct_peak on the amx
 * path: TDPBF16PS on four independent 16 x 16 f32 accumulator tiles, from
 * two A and two B tiles of 16 rows x 32 bf16 (16 x 16 x 32 multiply-adds,
 * 16384 flops, per instruction). The caller checks that the amx kernel
 * table is available (CPU, OS and, on Linux, the permission) first. The
 * tiles are configured and released within the call: each thread of a
 * team runs it on its own tile state.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/amx/amx.h"
#include "tool/peak_loops.h"

float fa_peak_amx_loop(int64_t iters) {
    /* bf16 1.0 times 2^-20 per pair lane: sums stay exact and finite */
    static const uint32_t one_pairs = 0x3f803f80u, small_pairs = 0x35803580u;
    uint32_t a[16][16], b[16][16];
    float c[16][16];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) a[r][k] = one_pairs, b[r][k] = small_pairs;
    fa_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float s = 0.0f;
    _tile_stored(0, c, 64);
    s += c[0][0];
    _tile_stored(3, c, 64);
    s += c[15][15];
    _tile_release();
    return s;
}
