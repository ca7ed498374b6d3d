/* AVX-512: 16 elements of a row in a storage dtype, widened to f32 exactly
 * (f16 by VCVTPH2PS, bf16 by a shift). Lanes outside `live` load 0 and
 * touch no memory, so rows of any length can be read to their last element.
 * dt is a literal at every call site: each kernel is compiled per dtype. */
#ifndef FA_WIDEN_AVX512_H
#define FA_WIDEN_AVX512_H

#include <immintrin.h>

#include "kernels/kernels.h"

static inline __attribute__((always_inline)) __m512 fa512_widen(flashattn_dtype dt,
                                                                const void *p,
                                                                __mmask16 live) {
    if (dt == FLASHATTN_F32) return _mm512_maskz_loadu_ps(live, p);
    const __m256i h = _mm256_maskz_loadu_epi16(live, p);
    if (dt == FLASHATTN_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#endif
