/* AVX2: 8 elements of a row in a storage dtype, widened to f32 exactly
 * (f16 by VCVTPH2PS, bf16 by a shift, the 8-bit cache dtypes below). fa256_widen reads all 8;
 * fa256_widen_n reads only the first n (< 8) and gives 0 in the other
 * lanes, touching no memory past them. dt is a literal at every call site. */
#ifndef FA_WIDEN_AVX2_H
#define FA_WIDEN_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

static inline __attribute__((always_inline)) __m256 fa256_widen16(flashattn_dtype dt, __m128i h) {
    if (dt == FLASHATTN_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 bytes (the low half of x) of an 8-bit cache dtype. fp8 goes through
 * f16, whose conversion is exact and ignores DAZ: e5m2 is an f16's top
 * byte; e4m3's exponent and mantissa, moved into f16's places, read
 * 2^-8 of the value (its bias is 7, f16's 15), then the exact * 2^8, with
 * its one NaN code made f16's quiet NaN first. */
static inline __attribute__((always_inline)) __m256 fa256_widen8(flashattn_dtype dt, __m128i x) {
    if (dt == FLASHATTN_INT8) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x));
    const __m128i b = _mm_cvtepu8_epi16(x);
    if (dt == FLASHATTN_FP8_E5M2) return _mm256_cvtph_ps(_mm_slli_epi16(b, 8));
    const __m128i mag = _mm_and_si128(b, _mm_set1_epi16(0x7f));
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
    const __m128i h = _mm_blendv_epi8(_mm_or_si128(sign, _mm_slli_epi16(mag, 7)),
                                      _mm_or_si128(sign, _mm_set1_epi16(0x7e00)),
                                      _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f)));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

static inline __attribute__((always_inline)) __m256 fa256_widen(flashattn_dtype dt, const void *p) {
    if (dt == FLASHATTN_F32) return _mm256_loadu_ps((const float *)p);
    if (fa_dtype_bytes(dt) == 1) return fa256_widen8(dt, _mm_loadl_epi64((const __m128i *)p));
    return fa256_widen16(dt, _mm_loadu_si128((const __m128i *)p));
}

static inline __attribute__((always_inline)) __m256 fa256_widen_n(flashattn_dtype dt, const void *p,
                                                                  int64_t n) {
    if (dt == FLASHATTN_F32) {
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        return _mm256_maskload_ps((const float *)p, live);
    }
    uint16_t h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(h, p, (size_t)n * (size_t)fa_dtype_bytes(dt));
    if (fa_dtype_bytes(dt) == 1) return fa256_widen8(dt, _mm_loadu_si128((const __m128i *)h));
    return fa256_widen16(dt, _mm_loadu_si128((const __m128i *)h));
}

#endif
