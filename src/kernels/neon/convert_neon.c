/*
 * NEON dtype conversions: load (dtype -> f32, times mul), store (f32 times
 * mul -> dtype, round to nearest even) and the transposing copy. Rows of
 * any length, any alignment; 4 elements per vector, the rest through the
 * scalar reference conversions of core/dtype.h. Vector results are
 * bit-identical to those too:
 *   f16 -> f32  FCVTL is exact (subnormals, inf, NaN included);
 *   f32 -> f16  FCVTN rounds as FPCR says, to nearest even (the AArch64
 *               default, and FZ off: subnormals kept), then NaNs
 *               rewritten to the reference's sign | 0x7e00;
 *   bf16        BFCVTN where the CPU has FEAT_BF16 (it honours FPCR as
 *               FCVTN does, and quiets a NaN keeping its top payload bits,
 *               the reference's rule), else the reference's integer RNE.
 */
#include <arm_neon.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/neon/neon.h"
#include "kernels/neon/widen_neon.h"

static inline uint16x4_t f32_to_f16(float32x4_t x) {
    const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(x));
    /* FCVTN keeps NaN payload bits; the reference makes every NaN the
     * canonical quiet one, keeping only the sign. */
    const uint16x4_t nan = vmovn_u32(vmvnq_u32(vceqq_f32(x, x)));
    const uint16x4_t canon = vorr_u16(vand_u16(h, vdup_n_u16(0x8000)), vdup_n_u16(0x7e00));
    return vbsl_u16(nan, canon, h);
}

static inline uint16x4_t f32_to_bf16_int(float32x4_t x) {
    const uint32x4_t u = vreinterpretq_u32_f32(x);
    /* Round to nearest even: add 0x7fff plus the lowest kept bit and keep
     * the high half (ADDHN); a carry out of the mantissa bumps the
     * exponent, and the largest finite floats correctly round up to inf. */
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint16x4_t rne = vaddhn_u32(u, vaddq_u32(odd, vdupq_n_u32(0x7fff)));
    /* NaN: keep sign and top payload bits, force the quiet bit. */
    const uint16x4_t nan = vmovn_u32(vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000)));
    const uint16x4_t quiet = vorr_u16(vshrn_n_u32(u, 16), vdup_n_u16(0x40));
    return vbsl_u16(nan, quiet, rne);
}

/* BFCVTN and BFCVTN2, 8 at a time, called only when the CPU has FEAT_BF16.
 * The path is built for plain ARMv8-A, and GCC 12 and clang 14 share no
 * way (a target attribute, the bf16 intrinsics, an assembler directive)
 * to reach the two instructions from such a file, so they are written as
 * their encodings, on registers fixed for them: bfcvtn v2.4h, v0.4s and
 * bfcvtn2 v2.8h, v1.4s. */
static void store_bf16_bfcvt(uint16_t *h, const float *src, int64_t n, float mul) {
    const float32x4_t vm = vdupq_n_f32(mul);
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        register float32x4_t lo __asm__("v0") = vmulq_f32(vld1q_f32(src + i), vm);
        register float32x4_t hi __asm__("v1") = vmulq_f32(vld1q_f32(src + i + 4), vm);
        register uint16x8_t r __asm__("v2");
        __asm__(".inst 0x0ea16802\n\t.inst 0x4ea16822" : "=w"(r) : "w"(lo), "w"(hi));
        vst1q_u16(h + i, r);
    }
}

/* Whether BFCVTN may be used: asked once, the answer kept (a benign race:
 * every thread computes the same value). */
static int have_bfcvt(void) {
    static int known = -1;
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) __atomic_store_n(&known, v = fa_cpu_arm_bf16(), __ATOMIC_RELAXED);
    return v;
}

void fa_load_neon(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_valid(dt));
    const float32x4_t vm = vdupq_n_f32(mul);
    const float *f = src;
    const uint16_t *h = src;
    int64_t i = 0;
    switch (dt) {
    case FLASHATTN_F32:
        for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vmulq_f32(vld1q_f32(f + i), vm));
        for (; i < n; i++) dst[i] = f[i] * mul;
        break;
    case FLASHATTN_F16:
        for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vmulq_f32(fa_neon_widen(FLASHATTN_F16, h + i), vm));
        for (; i < n; i++) dst[i] = fa_f16_to_f32(h[i]) * mul;
        break;
    case FLASHATTN_BF16:
        for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vmulq_f32(fa_neon_widen(FLASHATTN_BF16, h + i), vm));
        for (; i < n; i++) dst[i] = fa_bf16_to_f32(h[i]) * mul;
        break;
    default: /* the 8-bit cache dtypes */
        for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vmulq_f32(fa_neon_widen(dt, (const char *)src + i), vm));
        for (; i < n; i++) dst[i] = fa_widen(src, dt, i) * mul;
        break;
    }
}

void fa_store_neon(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_float(dt));
    const float32x4_t vm = vdupq_n_f32(mul);
    float *f = dst;
    uint16_t *h = dst;
    int64_t i = 0;
    switch (dt) {
    case FLASHATTN_F32:
        for (; i + 4 <= n; i += 4) vst1q_f32(f + i, vmulq_f32(vld1q_f32(src + i), vm));
        for (; i < n; i++) f[i] = src[i] * mul;
        break;
    case FLASHATTN_F16:
        for (; i + 4 <= n; i += 4) vst1_u16(h + i, f32_to_f16(vmulq_f32(vld1q_f32(src + i), vm)));
        for (; i < n; i++) h[i] = fa_f32_to_f16(src[i] * mul);
        break;
    case FLASHATTN_BF16:
        if (have_bfcvt()) {
            store_bf16_bfcvt(h, src, n, mul);
            i = n / 8 * 8;
        }
        for (; i + 4 <= n; i += 4) vst1_u16(h + i, f32_to_bf16_int(vmulq_f32(vld1q_f32(src + i), vm)));
        for (; i < n; i++) h[i] = fa_f32_to_bf16(src[i] * mul);
        break;
    default:
        break;
    }
}

/* One whole 4 x 4 block in registers: 4 source rows ldsb bytes apart, 4
 * columns each, to 4 destination rows of 4 floats, ldd apart. */
static inline __attribute__((always_inline)) void block4(float *dst, int64_t ldd, const char *s0,
                                                         int64_t ldsb, flashattn_dtype dt) {
    const float32x4_t x0 = fa_neon_widen(dt, s0), x1 = fa_neon_widen(dt, s0 + ldsb),
                      x2 = fa_neon_widen(dt, s0 + 2 * ldsb), x3 = fa_neon_widen(dt, s0 + 3 * ldsb);
    const float32x4_t t0 = vtrn1q_f32(x0, x1), t1 = vtrn2q_f32(x0, x1);
    const float32x4_t t2 = vtrn1q_f32(x2, x3), t3 = vtrn2q_f32(x2, x3);
    const float64x2_t d0 = vreinterpretq_f64_f32(t0), d1 = vreinterpretq_f64_f32(t1),
                      d2 = vreinterpretq_f64_f32(t2), d3 = vreinterpretq_f64_f32(t3);
    vst1q_f32(dst, vreinterpretq_f32_f64(vzip1q_f64(d0, d2)));
    vst1q_f32(dst + ldd, vreinterpretq_f32_f64(vzip1q_f64(d1, d3)));
    vst1q_f32(dst + 2 * ldd, vreinterpretq_f32_f64(vzip2q_f64(d0, d2)));
    vst1q_f32(dst + 3 * ldd, vreinterpretq_f32_f64(vzip2q_f64(d1, d3)));
}

static inline __attribute__((always_inline)) void transpose_dt(float *dst, int64_t ldd,
                                                               const char *src, int64_t lds,
                                                               flashattn_dtype dt, int rows,
                                                               int64_t cols) {
    const int64_t es = fa_dtype_bytes(dt);
    int r0 = 0;
    for (; r0 + 4 <= rows; r0 += 4) {
        const char *s0 = src + r0 * lds * es;
        int64_t c0 = 0;
        for (; c0 + 4 <= cols; c0 += 4) block4(dst + c0 * ldd + r0, ldd, s0 + c0 * es, lds * es, dt);
        for (; c0 < cols; c0++)
            for (int r = 0; r < 4; r++) dst[c0 * ldd + r0 + r] = fa_widen(s0 + r * lds * es, dt, c0);
    }
    for (; r0 < rows; r0++)
        for (int64_t c = 0; c < cols; c++) dst[c * ldd + r0] = fa_widen(src + r0 * lds * es, dt, c);
}

void fa_transpose_neon(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                       int rows, int64_t cols) {
    FA_KERNEL_CONTRACT(rows >= 0 && cols >= 0 && fa_dtype_valid(dt));
    switch (dt) {
    case FLASHATTN_F32: transpose_dt(dst, ldd, src, lds, FLASHATTN_F32, rows, cols); break;
    case FLASHATTN_F16: transpose_dt(dst, ldd, src, lds, FLASHATTN_F16, rows, cols); break;
    case FLASHATTN_BF16: transpose_dt(dst, ldd, src, lds, FLASHATTN_BF16, rows, cols); break;
    case FLASHATTN_INT8: transpose_dt(dst, ldd, src, lds, FLASHATTN_INT8, rows, cols); break;
    case FLASHATTN_FP8_E4M3: transpose_dt(dst, ldd, src, lds, FLASHATTN_FP8_E4M3, rows, cols); break;
    case FLASHATTN_FP8_E5M2: transpose_dt(dst, ldd, src, lds, FLASHATTN_FP8_E5M2, rows, cols); break;
    default: break;
    }
}
