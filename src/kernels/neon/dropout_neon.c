/*
 * dropout_row and dropout_cols (kernels.h) on NEON: four Philox4x32-10
 * streams at once, one per 32-bit lane. A 32 x 32 -> 64 product's high
 * word comes from UMULL/UMULL2 (the odd words of the two 64-bit halves),
 * its low word from MUL. The keep test and the rounding are the portable
 * kernel's (one x * scale, or scale, kept when the 16 bits are at least
 * the threshold), so every table gives the same bits.
 *
 * dropout_row: the lanes are four groups of eight columns, a step 32
 * columns; a 4 x 4 transpose of the output words puts each group's eight
 * 16-bit halves in column order. A step that sticks out of the row runs
 * on a copy of the columns it has (the mask is a pure function of the
 * column). dropout_cols: the lanes are four rows, so each of a group's
 * eight keys is one vector of four rows, a row of z^T as it is stored.
 */
#include <arm_neon.h>

#include "core/philox.h"
#include "kernels/neon/neon.h"

static inline uint32x4_t mulhi(uint32x4_t x, uint32_t m) {
    const uint32x4_t mv = vdupq_n_u32(m);
    const uint64x2_t lo = vmull_u32(vget_low_u32(x), vget_low_u32(mv)), hi = vmull_high_u32(x, mv);
    return vuzp2q_u32(vreinterpretq_u32_u64(lo), vreinterpretq_u32_u64(hi));
}

/* The ten rounds on four counters (c[0..3], a vector each), key (k0, k1). */
static inline void philox4(uint32x4_t c[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        const uint32x4_t h0 = mulhi(c[0], FA_PHILOX_M0), h1 = mulhi(c[2], FA_PHILOX_M1);
        const uint32x4_t l0 = vmulq_n_u32(c[0], FA_PHILOX_M0), l1 = vmulq_n_u32(c[2], FA_PHILOX_M1);
        c[0] = veorq_u32(veorq_u32(h1, c[1]), vdupq_n_u32(k0));
        c[2] = veorq_u32(veorq_u32(h0, c[3]), vdupq_n_u32(k1));
        c[1] = l1, c[3] = l0;
        k0 += FA_PHILOX_W0, k1 += FA_PHILOX_W1;
    }
}

/* x[0..8) *= scale where the eight 16-bit halves w are at least thr, else 0. */
static inline void apply8(float *x, uint16x8_t w, uint16x8_t thr, float32x4_t scale) {
    const int16x8_t keep = vreinterpretq_s16_u16(vcgeq_u16(w, thr));
    const uint32x4_t k0 = vreinterpretq_u32_s32(vmovl_s16(vget_low_s16(keep)));
    const uint32x4_t k1 = vreinterpretq_u32_s32(vmovl_high_s16(keep));
    vst1q_f32(x, vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vmulq_f32(vld1q_f32(x), scale)), k0)));
    vst1q_f32(x + 4, vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vmulq_f32(vld1q_f32(x + 4), scale)), k1)));
}

/* 32 columns from column 8 * g0 (x at that column). */
static inline void step32(float *x, const uint32_t key[2], uint32_t row, uint64_t offset, int64_t g0,
                          uint16x8_t thr, float32x4_t scale) {
    const uint32_t lanes[4] = {0, 1, 2, 3};
    uint32x4_t c[4] = {vaddq_u32(vdupq_n_u32((uint32_t)g0), vld1q_u32(lanes)), vdupq_n_u32(row),
                       vdupq_n_u32((uint32_t)offset), vdupq_n_u32((uint32_t)(offset >> 32))};
    philox4(c, key[0], key[1]);
    /* lane l of c[w] is word w of group g0 + l: transpose so that vector l
     * holds group l's words 0..3 */
    const uint32x4_t t0 = vtrn1q_u32(c[0], c[1]), t1 = vtrn2q_u32(c[0], c[1]);
    const uint32x4_t t2 = vtrn1q_u32(c[2], c[3]), t3 = vtrn2q_u32(c[2], c[3]);
    const uint64x2_t d0 = vreinterpretq_u64_u32(t0), d1 = vreinterpretq_u64_u32(t1),
                     d2 = vreinterpretq_u64_u32(t2), d3 = vreinterpretq_u64_u32(t3);
    const uint64x2_t g[4] = {vzip1q_u64(d0, d2), vzip1q_u64(d1, d3), vzip2q_u64(d0, d2), vzip2q_u64(d1, d3)};
    for (int l = 0; l < 4; l++) apply8(x + 8 * l, vreinterpretq_u16_u64(g[l]), thr, scale);
}

void fa_dropout_row_neon(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                         int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && j0 >= 0 && threshold < 65536u);
    const uint16x8_t thr = vdupq_n_u16((uint16_t)threshold);
    const float32x4_t sv = vdupq_n_f32(scale);
    /* steps of four groups from the group of j0; a step that sticks out
     * of [j0, j0 + n) runs on a copy of the columns it has */
    for (int64_t g = j0 >> 3; g << 3 < j0 + n; g += 4) {
        const int64_t c0 = g << 3; /* the step's first column */
        if (c0 >= j0 && c0 + 32 <= j0 + n) {
            step32(x + (c0 - j0), key, row, offset, g, thr, sv);
            continue;
        }
        float tmp[32];
        for (int w = 0; w < 32; w++) {
            const int64_t t = c0 + w - j0;
            tmp[w] = t >= 0 && t < n ? x[t] : 0.0f;
        }
        step32(tmp, key, row, offset, g, thr, sv);
        for (int w = 0; w < 32; w++) {
            const int64_t t = c0 + w - j0;
            if (t >= 0 && t < n) x[t] = tmp[w];
        }
    }
}

void fa_dropout_cols_neon(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                          uint64_t offset, int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && m >= 0 && ld >= m && j0 >= 0 && threshold < 65536u);
    const uint32x4_t thr = vdupq_n_u32(threshold), sv = vreinterpretq_u32_f32(vdupq_n_f32(scale));
    const uint32_t lanes[4] = {0, 1, 2, 3};
    for (int64_t c = 0; c < m; c += 4) {
        const uint32x4_t rows = vaddq_u32(vdupq_n_u32(row0 + (uint32_t)c), vld1q_u32(lanes));
        const int64_t rows_here = m - c < 4 ? m - c : 4;
        for (int64_t g = j0 >> 3; g << 3 < j0 + n; g++) {
            uint32x4_t w[4] = {vdupq_n_u32((uint32_t)g), rows, vdupq_n_u32((uint32_t)offset),
                               vdupq_n_u32((uint32_t)(offset >> 32))};
            philox4(w, key[0], key[1]);
            for (int kk = 0; kk < 8; kk++) {
                const int64_t t = (g << 3) + kk - j0;
                if (t < 0 || t >= n) continue;
                const uint32x4_t word = w[kk >> 1];
                const uint32x4_t half = kk & 1 ? vshrq_n_u32(word, 16) : vandq_u32(word, vdupq_n_u32(0xFFFF));
                const float32x4_t out = vreinterpretq_f32_u32(vandq_u32(vcgeq_u32(half, thr), sv));
                if (rows_here == 4) {
                    vst1q_f32(z + t * ld + c, out);
                } else {
                    float tmp[4];
                    vst1q_f32(tmp, out);
                    for (int64_t e = 0; e < rows_here; e++) z[t * ld + c + e] = tmp[e];
                }
            }
        }
    }
}
