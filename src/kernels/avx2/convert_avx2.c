/*
 * AVX2 + F16C dtype conversions: load (dtype -> f32, times mul) and store
 * (f32 times mul -> dtype, round to nearest even). Rows of any length, any
 * alignment; 8 elements per vector, the last n % 8 through the scalar
 * reference conversions of core/dtype.h. Vector results are
 * bit-identical to those too:
 *   f16 -> f32  VCVTPH2PS is exact (subnormals, inf, NaN included);
 *   f32 -> f16  VCVTPS2PH with an explicit round-to-nearest-even immediate,
 *               then NaNs rewritten to the reference's sign | 0x7e00;
 *   bf16        integer shifts, the reference's RNE formula lane by lane;
 *   int8, fp8   (load only: KV caches) widen_avx2.h's exact widening.
 */
#include <immintrin.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/avx2/avx2.h"
#include "kernels/avx2/widen_avx2.h"

static inline __m256 bf16_to_f32(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __m128i f32_to_f16(__m256 x) {
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* VCVTPS2PH keeps NaN payload bits; the reference makes every NaN the
     * canonical quiet one, keeping only the sign. */
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(nan)) {
        const __m256i n32 = _mm256_castps_si256(nan);
        const __m128i n16 = _mm_packs_epi32(_mm256_castsi256_si128(n32),
                                            _mm256_extracti128_si256(n32, 1));
        const __m128i canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)),
                                           _mm_set1_epi16(0x7e00));
        h = _mm_blendv_epi8(h, canon, n16);
    }
    return h;
}

static inline __m128i f32_to_bf16(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    /* Round to nearest even: add 0x7fff plus the lowest kept bit, then drop
     * 16 bits; a carry out of the mantissa bumps the exponent, and the
     * largest finite floats correctly round up to infinity. */
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rne = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
    /* NaN: keep sign and top payload bits, force the quiet bit (the
     * rounding add could otherwise carry a NaN into infinity). */
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rne, quiet, nan);
    /* Every lane is in [0, 2^16), so the unsigned-saturating pack is exact. */
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

void fa_load_avx2(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_valid(dt));
    const __m256 vm = _mm256_set1_ps(mul);
    const float *f = src;
    const uint16_t *h = src;
    int64_t i = 0;
    switch (dt) {
    case FLASHATTN_F32:
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(f + i), vm));
        for (; i < n; i++) dst[i] = f[i] * mul;
        break;
    case FLASHATTN_F16:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))), vm));
        for (; i < n; i++) dst[i] = fa_f16_to_f32(h[i]) * mul;
        break;
    case FLASHATTN_BF16:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_mul_ps(bf16_to_f32(_mm_loadu_si128((const __m128i *)(h + i))), vm));
        for (; i < n; i++) dst[i] = fa_bf16_to_f32(h[i]) * mul;
        break;
    default: /* the 8-bit cache dtypes */
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_mul_ps(fa256_widen(dt, (const char *)src + i), vm));
        for (; i < n; i++) dst[i] = fa_widen(src, dt, i) * mul;
        break;
    }
}

void fa_store_avx2(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_float(dt));
    const __m256 vm = _mm256_set1_ps(mul);
    float *f = dst;
    uint16_t *h = dst;
    int64_t i = 0;
    switch (dt) {
    case FLASHATTN_F32:
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), vm));
        for (; i < n; i++) f[i] = src[i] * mul;
        break;
    case FLASHATTN_F16:
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(h + i), f32_to_f16(_mm256_mul_ps(_mm256_loadu_ps(src + i), vm)));
        for (; i < n; i++) h[i] = fa_f32_to_f16(src[i] * mul);
        break;
    case FLASHATTN_BF16:
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(h + i), f32_to_bf16(_mm256_mul_ps(_mm256_loadu_ps(src + i), vm)));
        for (; i < n; i++) h[i] = fa_f32_to_bf16(src[i] * mul);
        break;
    default:
        break;
    }
}

/* Whole 32-byte halves of lines at a 32-byte aligned d (n a multiple of
 * their elements) with VMOVNTPS (f32) or VMOVNTDQ (two narrowed vectors
 * of 8 halves). */
static void stream_halves(void *d, flashattn_dtype dt, const float *s, int64_t n, float mul) {
    const __m256 vm = _mm256_set1_ps(mul);
    if (dt == FLASHATTN_F32) {
        for (int64_t i = 0; i < n; i += 8)
            _mm256_stream_ps((float *)d + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), vm));
        return;
    }
    const int bf16 = dt == FLASHATTN_BF16;
    for (int64_t i = 0; i < n; i += 16) {
        const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(s + i), vm);
        const __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(s + i + 8), vm);
        const __m128i lo = bf16 ? f32_to_bf16(x0) : f32_to_f16(x0);
        const __m128i hi = bf16 ? f32_to_bf16(x1) : f32_to_f16(x1);
        _mm256_stream_si256((__m256i *)((uint16_t *)d + i), _mm256_set_m128i(hi, lo));
    }
}

void fa_store_stream_avx2(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_valid(dt));
    fa_store_stream_with(fa_store_avx2, stream_halves, 32, dst, dt, src, n, mul);
}

void fa_store_fence_avx2(void) { _mm_sfence(); }

/* 8 elements of a row of dtype dt, widened to f32. */
static inline __m256 widen8(const void *src, flashattn_dtype dt, int64_t i) {
    return fa256_widen(dt, (const char *)src + i * fa_dtype_bytes(dt));
}

/* The first two stages of a register transpose, on 4 rows: afterwards
 * x[p]'s 128-bit lane L holds column 4L + p of the 4 rows. */
static inline __attribute__((always_inline)) void lanes4x4(__m256 x[4]) {
    const __m256 t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]);
    const __m256 t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]);
    x[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    x[1] = _mm256_shuffle_ps(t0, t2, 0xee);
    x[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    x[3] = _mm256_shuffle_ps(t1, t3, 0xee);
}

/* One whole 8 x 8 block in registers: 8 source rows lds elements apart, 8
 * columns each, to 8 destination rows of 8 floats, ldd apart. */
static inline __attribute__((always_inline)) void block8(float *dst, int64_t ldd, const char *s0, int64_t ldsb,
                                                         flashattn_dtype dt) {
    __m256 x[8];
    for (int i = 0; i < 8; i++) x[i] = widen8(s0 + i * ldsb, dt, 0);
    lanes4x4(x);
    lanes4x4(x + 4);
    /* x[4q + p], lane L: column 4L + p of rows 4q .. 4q + 3 */
    for (int p = 0; p < 4; p++) {
        _mm256_storeu_ps(dst + p * ldd, _mm256_permute2f128_ps(x[p], x[4 + p], 0x20));
        _mm256_storeu_ps(dst + (4 + p) * ldd, _mm256_permute2f128_ps(x[p], x[4 + p], 0x31));
    }
}

/* Four rows, 8 whole columns: after lanes4x4 each column's 4 elements
 * sit in one 128-bit lane, stored as one vector; element by element this
 * was most of a 4-query backward's transposes. */
static inline __attribute__((always_inline)) void rows4(float *dst, int64_t ldd, const char *s0, int64_t ldsb,
                                                        flashattn_dtype dt) {
    __m256 x[4];
    for (int i = 0; i < 4; i++) x[i] = widen8(s0 + i * ldsb, dt, 0);
    lanes4x4(x);
    for (int p = 0; p < 4; p++) {
        _mm_storeu_ps(dst + p * ldd, _mm256_castps256_ps128(x[p]));
        _mm_storeu_ps(dst + (4 + p) * ldd, _mm256_extractf128_ps(x[p], 1));
    }
}

/* Fewer than 8 rows, 8 whole columns: four of them by rows4, the rest each
 * row's columns widened, then each element extracted straight to its
 * destination row (VEXTRACTPS to memory). A register transpose of a
 * padded block costs the same for one row as for eight, and padding a
 * block takes copies of a run-time length (docs/performance.md, small
 * shapes on Zen 2). Out of line: inlined, it made the caller's frame and
 * every short call slower. */
#define FA_PUT_LANE(h, lane, to)                    \
    do {                                            \
        const int bits_ = _mm_extract_ps(h, lane);  \
        memcpy(to, &bits_, sizeof bits_);           \
    } while (0)
static void few8(float *dst, int64_t ldd, const char *s0, int64_t ldsb, flashattn_dtype dt, int rr) {
    int i = 0;
    if (rr >= 4) {
        rows4(dst, ldd, s0, ldsb, dt);
        i = 4;
    }
    for (; i < rr; i++) {
        const __m256 x = fa256_widen(dt, s0 + i * ldsb);
        const __m128 lo = _mm256_castps256_ps128(x), hi = _mm256_extractf128_ps(x, 1);
        float *d = dst + i;
        FA_PUT_LANE(lo, 0, d);
        FA_PUT_LANE(lo, 1, d + ldd);
        FA_PUT_LANE(lo, 2, d + 2 * ldd);
        FA_PUT_LANE(lo, 3, d + 3 * ldd);
        FA_PUT_LANE(hi, 0, d + 4 * ldd);
        FA_PUT_LANE(hi, 1, d + 5 * ldd);
        FA_PUT_LANE(hi, 2, d + 6 * ldd);
        FA_PUT_LANE(hi, 3, d + 7 * ldd);
    }
}
#undef FA_PUT_LANE

/* Eight f32 rows, 4 whole columns: rows i and i + 4 share a register,
 * whose lanes lanes4x4 turns into the 8 rows of one column. */
static inline __attribute__((always_inline)) void cols4(float *dst, int64_t ldd, const float *s0, int64_t lds) {
    __m256 z[4];
    for (int i = 0; i < 4; i++)
        z[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s0 + i * lds)),
                                    _mm_loadu_ps(s0 + (i + 4) * lds), 1);
    lanes4x4(z);
    for (int p = 0; p < 4; p++) _mm256_storeu_ps(dst + p * ldd, z[p]);
}

/* Fewer than 8 columns (of any number of rows): each element widened
 * where it lies and stored in its place, a row of dst (one column of src)
 * at a time. */
static void few_cols(float *dst, int64_t ldd, const char *s0, int64_t ldsb, flashattn_dtype dt, int rr,
                     int cc) {
    for (int c = 0; c < cc; c++)
        for (int i = 0; i < rr; i++) dst[c * ldd + i] = fa_widen(s0 + i * ldsb, dt, c);
}

/* All of an f32 source of fewer than 8 columns: its first 4 columns 8 rows
 * at a time by cols4, the rest element by element with no dtype to test.
 * The backward's dQ^T goes back to rows this way when a q-block ends in
 * fewer than 8 queries. */
static void narrow_f32(float *dst, int64_t ldd, const float *src, int64_t lds, int rows, int cols) {
    int r0 = 0, c0 = 0;
    if (cols >= 4) {
        for (; r0 + 8 <= rows; r0 += 8) cols4(dst + r0, ldd, src + r0 * lds, lds);
        c0 = 4;
    }
    for (int c = 0; c < cols; c++)
        for (int i = c < c0 ? r0 : 0; i < rows; i++) dst[c * ldd + i] = src[i * lds + c];
}

/* 8 x 8 blocks in registers; a partial block (the last keys of a length
 * that is no multiple of 8, the last columns of a head_dim that is none)
 * by few8 or few_cols, not through a zeroed whole block: AVX2 has no
 * masked 16-bit loads, so filling one takes copies of a run-time length,
 * slower on every partial block measured. */
void fa_transpose_avx2(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                       int rows, int64_t cols) {
    FA_KERNEL_CONTRACT(rows >= 0 && cols >= 0 && fa_dtype_valid(dt));
    const int64_t es = fa_dtype_bytes(dt);
    if (dt == FLASHATTN_F32 && cols < 8) {
        narrow_f32(dst, ldd, (const float *)src, lds, rows, (int)cols);
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const char *s0 = (const char *)src + r0 * lds * es;
        const int rr = rows - r0 < 8 ? rows - r0 : 8;
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
            const int cc = cols - c0 < 8 ? (int)(cols - c0) : 8;
            if (rr == 8 && cc == 8) {
                block8(dst + c0 * ldd + r0, ldd, s0 + c0 * es, lds * es, dt);
                continue;
            }
            if (cc == 8) {
                few8(dst + c0 * ldd + r0, ldd, s0 + c0 * es, lds * es, dt, rr);
                continue;
            }
            few_cols(dst + c0 * ldd + r0, ldd, s0 + c0 * es, lds * es, dt, rr, cc);
        }
    }
}
