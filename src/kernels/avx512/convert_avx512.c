/*
 * AVX-512 dtype conversions: load (dtype -> f32, times mul) and store
 * (f32 times mul -> dtype, round to nearest even). Rows of any length,
 * any alignment; the last partial vector goes through a lane mask.
 * Results are bit-identical to core/dtype.h:
 *   f16 -> f32  VCVTPH2PS is exact (subnormals, inf, NaN included);
 *   f32 -> f16  VCVTPS2PH with an explicit round-to-nearest-even immediate,
 *               then NaNs rewritten to the reference's sign | 0x7e00;
 *   bf16        integer shifts, the reference's RNE formula lane by lane;
 *   int8, fp8   (load only: KV caches) widen_avx512.h's exact widening.
 */
#include <immintrin.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/widen_avx512.h"

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static inline __m512 bf16_to_f32(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m256i f32_to_f16(__m512 x) {
    __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* VCVTPS2PH keeps NaN payload bits; the reference makes every NaN the
     * canonical quiet one, keeping only the sign. */
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    if (nan) {
        const __m256i canon = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)),
                                              _mm256_set1_epi16(0x7e00));
        h = _mm256_mask_blend_epi16(nan, h, canon);
    }
    return h;
}

static inline __m256i f32_to_bf16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    /* Round to nearest even: add 0x7fff plus the lowest kept bit, then drop
     * 16 bits; a carry out of the mantissa bumps the exponent, and the
     * largest finite floats correctly round up to infinity. */
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rne = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
    /* NaN: keep sign and top payload bits, force the quiet bit (the
     * rounding add could otherwise carry a NaN into infinity). */
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rne, quiet));
}

/* 16-bit rows (f16 or bf16, a literal at each call site, so that each
 * compiles to its own loop) to and from f32. */
static inline __attribute__((always_inline)) __m512 widen_half(__m256i x, const int bf16) {
    return bf16 ? bf16_to_f32(x) : _mm512_cvtph_ps(x);
}

static inline __attribute__((always_inline)) __m256i narrow_half(__m512 x, const int bf16) {
    return bf16 ? f32_to_bf16(x) : f32_to_f16(x);
}

/* The dtype is chosen once per row, outside the loops, and only the last
 * partial vector goes through a mask: a mask made and a branch taken per
 * vector cost 4-5x the copy itself on the rows of 64-256 floats the
 * drivers pass (fa_load of a 128-float row: about 45 cycles that way). */
static inline __attribute__((always_inline)) void load_half(float *dst, const uint16_t *h, int64_t n,
                                                            __m512 vm, const int bf16) {
    const int64_t n16 = n / 16 * 16;
    const __mmask16 k = tail_mask(n - n16);
    for (int64_t i = 0; i < n16; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(widen_half(_mm256_loadu_si256((const __m256i *)(h + i)), bf16), vm));
    if (k)
        _mm512_mask_storeu_ps(dst + n16, k,
                              _mm512_mul_ps(widen_half(_mm256_maskz_loadu_epi16(k, h + n16), bf16), vm));
}

static inline __attribute__((always_inline)) void store_half(uint16_t *h, const float *src, int64_t n,
                                                             __m512 vm, const int bf16) {
    const int64_t n16 = n / 16 * 16;
    const __mmask16 k = tail_mask(n - n16);
    for (int64_t i = 0; i < n16; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i), narrow_half(_mm512_mul_ps(_mm512_loadu_ps(src + i), vm), bf16));
    if (k)
        _mm256_mask_storeu_epi16(h + n16, k,
                                 narrow_half(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, src + n16), vm), bf16));
}

void fa_load_avx512(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_valid(dt));
    const __m512 vm = _mm512_set1_ps(mul);
    const float *f = src;
    const int64_t n16 = n / 16 * 16;
    const __mmask16 k = tail_mask(n - n16);
    switch (dt) {
    case FLASHATTN_F32:
        for (int64_t i = 0; i < n16; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_loadu_ps(f + i), vm));
        if (k) _mm512_mask_storeu_ps(dst + n16, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, f + n16), vm));
        break;
    case FLASHATTN_F16: load_half(dst, src, n, vm, 0); break;
    case FLASHATTN_BF16: load_half(dst, src, n, vm, 1); break;
    default: /* the 8-bit cache dtypes */
        for (int64_t i = 0; i < n; i += 16)
            _mm512_mask_storeu_ps(dst + i, tail_mask(n - i),
                                  _mm512_mul_ps(fa512_widen(dt, (const char *)src + i, tail_mask(n - i)), vm));
        break;
    }
}

void fa_store_avx512(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_float(dt));
    const __m512 vm = _mm512_set1_ps(mul);
    float *f = dst;
    const int64_t n16 = n / 16 * 16;
    const __mmask16 k = tail_mask(n - n16);
    switch (dt) {
    case FLASHATTN_F32:
        for (int64_t i = 0; i < n16; i += 16) _mm512_storeu_ps(f + i, _mm512_mul_ps(_mm512_loadu_ps(src + i), vm));
        if (k) _mm512_mask_storeu_ps(f + n16, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, src + n16), vm));
        break;
    case FLASHATTN_F16: store_half(dst, src, n, vm, 0); break;
    case FLASHATTN_BF16: store_half(dst, src, n, vm, 1); break;
    default: break;
    }
}

/* Whole 64-byte lines at a line-aligned d (n a multiple of a line's
 * elements) with VMOVNTPS (f32) or VMOVNTDQ (two narrowed vectors of 16
 * halves). */
static void stream_lines(void *d, flashattn_dtype dt, const float *s, int64_t n, float mul) {
    const __m512 vm = _mm512_set1_ps(mul);
    if (dt == FLASHATTN_F32) {
        for (int64_t i = 0; i < n; i += 16)
            _mm512_stream_ps((float *)d + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), vm));
        return;
    }
    const int bf16 = dt == FLASHATTN_BF16;
    for (int64_t i = 0; i < n; i += 32) {
        const __m256i lo = narrow_half(_mm512_mul_ps(_mm512_loadu_ps(s + i), vm), bf16);
        const __m256i hi = narrow_half(_mm512_mul_ps(_mm512_loadu_ps(s + i + 16), vm), bf16);
        _mm512_stream_si512((void *)((uint16_t *)d + i),
                            _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
}

void fa_store_stream_avx512(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_valid(dt));
    fa_store_stream_with(fa_store_avx512, stream_lines, 64, dst, dt, src, n, mul);
}

void fa_store_fence_avx512(void) { _mm_sfence(); }

/* One block of up to 16 source rows x 16 columns, transposed in registers
 * (unpack, then two rounds of 128-bit lane shuffles): rows past rr and
 * columns outside cmask load as 0 and are never stored, so partial blocks
 * (the last keys of a length that is no multiple of 16, the last columns
 * of an odd head_dim) run the same way as whole ones. They used to go
 * element by element, which at 24 keys was a third of a forward's time. */
static inline __attribute__((always_inline)) void block16(float *dst, int64_t ldd,
                                                          const char *s0, int64_t ldsb,
                                                          const flashattn_dtype dt, const int rr,
                                                          const __mmask16 cmask, const int cc,
                                                          const __mmask16 rmask) {
    __m512 x[16], t[16];
    for (int i = 0; i < 16; i++)
        x[i] = i < rr ? fa512_widen(dt, s0 + i * ldsb, cmask) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(x[i], x[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(x[i], x[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        x[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        x[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        x[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        x[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    /* x[4q + p] now holds, in each 128-bit lane L, column 4L + p of rows
     * 4q .. 4q + 3. */
    for (int p = 0; p < 4; p++) {
        t[p] = _mm512_shuffle_f32x4(x[p], x[4 + p], 0x88);     /* lanes 0, 2 of rows 0-7 */
        t[4 + p] = _mm512_shuffle_f32x4(x[p], x[4 + p], 0xdd); /* lanes 1, 3 */
        t[8 + p] = _mm512_shuffle_f32x4(x[8 + p], x[12 + p], 0x88);
        t[12 + p] = _mm512_shuffle_f32x4(x[8 + p], x[12 + p], 0xdd);
    }
    for (int p = 0; p < 4; p++) {
        /* column p (lane 0), 4 + p (lane 1), 8 + p (lane 2), 12 + p (lane 3) */
        x[p] = _mm512_shuffle_f32x4(t[p], t[8 + p], 0x88);
        x[4 + p] = _mm512_shuffle_f32x4(t[4 + p], t[12 + p], 0x88);
        x[8 + p] = _mm512_shuffle_f32x4(t[p], t[8 + p], 0xdd);
        x[12 + p] = _mm512_shuffle_f32x4(t[4 + p], t[12 + p], 0xdd);
    }
    for (int i = 0; i < cc; i++) _mm512_mask_storeu_ps(dst + i * ldd, rmask, x[i]);
}

/* Rows fewer than FEW_ROWS: each row's 16 columns widened, then
 * scattered into their 16 destination rows. The register transpose
 * costs the same whatever the rows (its shuffles run on one port), and
 * for the one key of a 1 x 1 call or the last key of a length it was
 * most of the copy; through a buffer and scalar copies, the vector store
 * does not forward to the narrow loads. idx: 16 destination row offsets
 * (ldd below 2^27, so they fit in 32 bits). */
#define FEW_ROWS 4
static inline __attribute__((always_inline)) void few16(float *dst, const __m512i idx, const char *s0,
                                                        int64_t ldsb, const flashattn_dtype dt,
                                                        const int rr, const __mmask16 cmask) {
    for (int i = 0; i < rr; i++)
        _mm512_mask_i32scatter_ps(dst + i, cmask, idx, fa512_widen(dt, s0 + i * ldsb, cmask), 4);
}

/* dt is a literal at each call site, so each dtype gets its own loops. */
static inline __attribute__((always_inline)) void transpose_dt(float *dst, int64_t ldd,
                                                               const void *src, int64_t lds,
                                                               const flashattn_dtype dt, int rows,
                                                               int64_t cols) {
    const int64_t es = fa_dtype_bytes(dt);
    const int few = ldd < ((int64_t)1 << 27);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(few ? (int)ldd : 0));
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const char *s0 = (const char *)src + r0 * lds * es;
        const int rr = rows - r0 < 16 ? rows - r0 : 16;
        const __mmask16 rmask = tail_mask(rr);
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            float *d0 = dst + c0 * ldd + r0;
            if (rr == 16 && cols - c0 >= 16) {
                block16(d0, ldd, s0 + c0 * es, lds * es, dt, 16, 0xffff, 16, 0xffff);
            } else if (rr < FEW_ROWS && few) {
                few16(d0, idx, s0 + c0 * es, lds * es, dt, rr, tail_mask(cols - c0));
            } else {
                const int cc = cols - c0 < 16 ? (int)(cols - c0) : 16;
                block16(d0, ldd, s0 + c0 * es, lds * es, dt, rr, tail_mask(cc), cc, rmask);
            }
        }
    }
}

void fa_transpose_avx512(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                         int rows, int64_t cols) {
    FA_KERNEL_CONTRACT(rows >= 0 && cols >= 0 && fa_dtype_valid(dt));
    switch (dt) {
    case FLASHATTN_F16: transpose_dt(dst, ldd, src, lds, FLASHATTN_F16, rows, cols); break;
    case FLASHATTN_BF16: transpose_dt(dst, ldd, src, lds, FLASHATTN_BF16, rows, cols); break;
    case FLASHATTN_INT8: transpose_dt(dst, ldd, src, lds, FLASHATTN_INT8, rows, cols); break;
    case FLASHATTN_FP8_E4M3: transpose_dt(dst, ldd, src, lds, FLASHATTN_FP8_E4M3, rows, cols); break;
    case FLASHATTN_FP8_E5M2: transpose_dt(dst, ldd, src, lds, FLASHATTN_FP8_E5M2, rows, cols); break;
    default: transpose_dt(dst, ldd, src, lds, FLASHATTN_F32, rows, cols); break;
    }
}
