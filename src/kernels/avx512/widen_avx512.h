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
    if (fa_dtype_bytes(dt) == 1) {
        /* as widen_avx2.h: int8 by VPMOVSXBD, fp8 through f16 (exact, no
         * DAZ), e4m3 read at 2^-8 of its value, then * 2^8 */
        const __m128i x = _mm_maskz_loadu_epi8(live, p);
        if (dt == FLASHATTN_INT8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x));
        const __m256i b = _mm256_cvtepu8_epi16(x);
        if (dt == FLASHATTN_FP8_E5M2) return _mm512_cvtph_ps(_mm256_slli_epi16(b, 8));
        const __m256i mag = _mm256_and_si256(b, _mm256_set1_epi16(0x7f));
        const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
        const __m256i h = _mm256_mask_mov_epi16(_mm256_or_si256(sign, _mm256_slli_epi16(mag, 7)),
                                                _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f)),
                                                _mm256_or_si256(sign, _mm256_set1_epi16(0x7e00)));
        return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    }
    const __m256i h = _mm256_maskz_loadu_epi16(live, p);
    if (dt == FLASHATTN_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#endif
