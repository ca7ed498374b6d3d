/* NEON: 4 elements of a row in a storage dtype, widened to f32 exactly
 * (f16 by FCVTL, which also quiets a signalling NaN as fa_widen does;
 * bf16 by a shift; the 8-bit cache dtypes below). fa_neon_widen reads all 4; fa_neon_widen_n reads only
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

/* 4 bytes (the low lanes of x) of an 8-bit cache dtype, as widen_avx2.h
 * does it: int8 by sign extension, fp8 through f16 (FCVTL is exact): e5m2
 * is an f16's top byte; e4m3's fields moved into f16's places read 2^-8 of
 * the value (bias 7 against 15), then the exact * 2^8, its one NaN code
 * made f16's quiet NaN first. */
static inline __attribute__((always_inline)) float32x4_t fa_neon_widen8(flashattn_dtype dt,
                                                                        uint8x8_t x) {
    if (dt == FLASHATTN_INT8)
        return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(x)))));
    const uint16x4_t b = vget_low_u16(vmovl_u8(x));
    if (dt == FLASHATTN_FP8_E5M2) return vcvt_f32_f16(vreinterpret_f16_u16(vshl_n_u16(b, 8)));
    const uint16x4_t mag = vand_u16(b, vdup_n_u16(0x7f));
    const uint16x4_t sign = vshl_n_u16(vand_u16(b, vdup_n_u16(0x80)), 8);
    const uint16x4_t h = vbsl_u16(vceq_u16(mag, vdup_n_u16(0x7f)), vorr_u16(sign, vdup_n_u16(0x7e00)),
                                  vorr_u16(sign, vshl_n_u16(mag, 7)));
    return vmulq_n_f32(vcvt_f32_f16(vreinterpret_f16_u16(h)), 256.0f);
}

static inline __attribute__((always_inline)) float32x4_t fa_neon_widen(flashattn_dtype dt,
                                                                       const void *p) {
    if (dt == FLASHATTN_F32) return vld1q_f32((const float *)p);
    if (fa_dtype_bytes(dt) == 1) {
        uint32_t w;
        memcpy(&w, p, sizeof w);
        return fa_neon_widen8(dt, vreinterpret_u8_u32(vdup_n_u32(w)));
    }
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
    memcpy(h, p, (size_t)n * (size_t)fa_dtype_bytes(dt));
    return fa_neon_widen(dt, h);
}

#endif
