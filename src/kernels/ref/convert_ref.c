/* Portable dtype conversions for loading inputs and storing outputs. */
#include "core/dtype.h"
#include "kernels/ref/ref.h"

void fa_load_ref(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_valid(dt));
    switch (dt) {
    case FLASHATTN_F32:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i] * mul;
        break;
    case FLASHATTN_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = fa_f16_to_f32(((const uint16_t *)src)[i]) * mul;
        break;
    case FLASHATTN_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = fa_bf16_to_f32(((const uint16_t *)src)[i]) * mul;
        break;
    default: /* the 8-bit cache dtypes */
        for (int64_t i = 0; i < n; i++) dst[i] = fa_widen(src, dt, i) * mul;
        break;
    }
}

void fa_store_ref(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
    FA_KERNEL_CONTRACT(n >= 0 && fa_dtype_float(dt));
    switch (dt) {
    case FLASHATTN_F32:
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = src[i] * mul;
        break;
    case FLASHATTN_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = fa_f32_to_f16(src[i] * mul);
        break;
    case FLASHATTN_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = fa_f32_to_bf16(src[i] * mul);
        break;
    default:
        break;
    }
}

float fa_widen_ref(const void *src, flashattn_dtype dt, int64_t i) { return fa_widen(src, dt, i); }

void fa_transpose_ref(float *dst, int64_t ldd, const void *src, int64_t lds, flashattn_dtype dt,
                      int rows, int64_t cols) {
    FA_KERNEL_CONTRACT(rows >= 0 && cols >= 0 && fa_dtype_valid(dt));
    const int64_t es = fa_dtype_bytes(dt);
    for (int r = 0; r < rows; r++) {
        const void *row = (const char *)src + r * lds * es;
        for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = fa_widen_ref(row, dt, c);
    }
}
