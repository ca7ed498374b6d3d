/* NEON: 4 elements of a row in a storage dtype, widened to f32 exactly
 * (f16 by FCVTL, which also quiets a signalling NaN as fa_widen does;
 * bf16 by a shift). fa_neon_widen reads all 4; fa_neon_widen_n reads only
 * the first n (< 4) and gives 0 in the other lanes, touching no memory
 * past them. dt is a literal at every call site. */
#ifndef FA_WIDEN_NEON_H
#define FA_WIDEN_NEON_H

#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels.h"

static inline __attribute__((always_inline)) float32x4_t fa_neon_widen16(flashattn_dtype dt,
                                                                         uint16x4_t h) {
    if (dt == FLASHATTN_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

static inline __attribute__((always_inline)) float32x4_t fa_neon_widen(flashattn_dtype dt,
                                                                       const void *p) {
    if (dt == FLASHATTN_F32) return vld1q_f32((const float *)p);
    return fa_neon_widen16(dt, vld1_u16((const uint16_t *)p));
}

static inline __attribute__((always_inline)) float32x4_t fa_neon_widen_n(flashattn_dtype dt,
                                                                         const void *p, int64_t n) {
    if (dt == FLASHATTN_F32) {
        float f[4] = {0, 0, 0, 0};
        memcpy(f, p, (size_t)n * sizeof(float));
        return vld1q_f32(f);
    }
    uint16_t h[4] = {0, 0, 0, 0};
    memcpy(h, p, (size_t)n * sizeof(uint16_t));
    return fa_neon_widen16(dt, vld1_u16(h));
}

#endif
