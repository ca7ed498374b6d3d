/* The 8-bit options' quantisation (kernels.h, quant_u8 .. quant_i8_with):
 * core/quant.h's rules as written. */
#include "core/quant.h"
#include "kernels/ref/ref.h"

void fa_quant_u8_ref(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale) {
    fa_u8_row(p, n, q, n4, scale);
}

void fa_quant_i8_row_ref(float *x, const float *sub, int64_t n, int8_t *q, float *scale) {
    if (sub)
        for (int64_t i = 0; i < n; i++) x[i] -= sub[i];
    fa_i8_row(x, n, q, scale);
}

void fa_amax_acc_ref(const float *x, int64_t n, uint32_t *amax) {
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = fa_f32_bits(x[i]) & 0x7fffffffu;
        amax[i] = u > amax[i] ? u : amax[i];
    }
}

void fa_quant_i8_with_ref(const float *x, const float *inv, int64_t n, int8_t *q) {
    for (int64_t i = 0; i < n; i++) {
        if (inv[i] == 0.0f) {
            q[i] = 0;
            continue;
        }
        int32_t r = (int32_t)((x[i] * inv[i] + 12582912.0f) - 12582912.0f);
        r = r > 127 ? 127 : r;
        q[i] = (int8_t)(r < -127 ? -127 : r);
    }
}
