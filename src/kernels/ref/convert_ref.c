/* Portable dtype conversions for loading inputs and storing outputs. */
#include "kernels/ref/half.h"
#include "kernels/ref/ref.h"

void fa_load_ref(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul) {
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
    default:
        break;
    }
}

void fa_store_ref(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul) {
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
