/* AVX2: 8 elements of a row in a storage dtype, widened to f32 exactly
 * (f16 by VCVTPH2PS, bf16 by a shift). fa256_widen reads all 8;
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

static inline __attribute__((always_inline)) __m256 fa256_widen(flashattn_dtype dt, const void *p) {
    if (dt == FLASHATTN_F32) return _mm256_loadu_ps((const float *)p);
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
    memcpy(h, p, (size_t)n * sizeof(uint16_t));
    return fa256_widen16(dt, _mm_loadu_si128((const __m128i *)h));
}

#endif
