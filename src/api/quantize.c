/* flashattn_quantize: a float K or V tensor into an 8-bit cache tensor,
 * with the rule of core/quant.h (the append's). */
#include <math.h>
#include <stdlib.h>

#include "api/validate.h"
#include "core/quant.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "dispatch/isa.h"

/* The fixed scales of src: amax / qmax per channel or per head over
 * every row, into amax[heads * width]. Returns 0, or 1 when src holds a
 * NaN or an infinity (no scale fits it). A head that meets one leaves
 * NaN in its first scale (no OpenMP reduction: clang's would export a
 * symbol of its own from the library). */
static int calibrate_scales(const fa_kernels *kern, const flashattn_tensor *src, flashattn_dtype dt,
                            int64_t width, float *amax, int threads) {
    const int64_t d = src->head_dim;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t h = 0; h < src->heads; h++) {
        float x[FLASHATTN_MAX_HEAD_DIM], *a = amax + h * width;
        int bad = 0;
        for (int64_t e = 0; e < width; e++) a[e] = 0.0f;
        for (int64_t b = 0; b < src->batch; b++)
            for (int64_t s = 0; s < src->seqlen; s++) {
                kern->load(x, fa_row_ptr(src, b, s, h), src->dtype, d, 1.0f);
                for (int64_t e = 0; e < d; e++) {
                    const float m = fabsf(x[e]);
                    bad |= !(m <= 3.4028234663852886e38f);
                    if (m > a[width > 1 ? e : 0]) a[width > 1 ? e : 0] = m;
                }
            }
        /* a channel of zeros keeps the smallest normal scale: fixed scales are > 0 */
        for (int64_t e = 0; e < width; e++) a[e] = a[e] > 0.0f ? a[e] / fa_quant_max(dt) : 1.17549435e-38f;
        if (bad) a[0] = NAN;
    }
    for (int64_t h = 0; h < src->heads; h++)
        if (amax[h * width] != amax[h * width]) return 1;
    return 0;
}

flashattn_status flashattn_quantize(const flashattn_tensor *src, const flashattn_tensor *dst,
                                    const flashattn_tensor *scale, flashattn_scale_kind kind, int calibrate,
                                    int num_threads) {
    fa_clear_error();
    const fa_kernels *kern = fa_active_kernels();
    flashattn_status s = fa_validate_quantize(src, dst, scale, kind, calibrate);
    if (s) return s;
    if (num_threads < 0) return fa_fail(FLASHATTN_ERR_BAD_PARAM, "num_threads must be >= 0");
    const int threads = fa_threads_or_default(num_threads);
    const int token = kind == FLASHATTN_SCALE_PER_TOKEN;
    const int64_t d = src->head_dim, width = kind == FLASHATTN_SCALE_PER_CHANNEL ? d : 1;
    const int64_t rows = src->batch * src->seqlen * src->heads;
    float *fixed = (float *)scale->data;
    if (!token && calibrate) {
        float *amax = malloc((size_t)(src->heads * width) * sizeof(float));
        if (!amax) return fa_fail(FLASHATTN_ERR_OUT_OF_MEMORY, "no memory for %lld scales", (long long)(src->heads * width));
        if (calibrate_scales(kern, src, dst->dtype, width, amax, threads)) {
            free(amax);
            return fa_fail(FLASHATTN_ERR_BAD_PARAM, "src holds a NaN or an infinity: no fixed scale fits it");
        }
        for (int64_t h = 0; h < src->heads; h++)
            for (int64_t e = 0; e < width; e++) fixed[h * scale->stride_head + e] = amax[h * width + e];
        free(amax);
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t h = r % src->heads, bs = r / src->heads, b = bs / src->seqlen, t = bs % src->seqlen;
        float x[FLASHATTN_MAX_HEAD_DIM];
        kern->load(x, fa_row_ptr(src, b, t, h), src->dtype, d, 1.0f);
        void *row = (void *)fa_row_ptr(dst, b, t, h);
        if (token) {
            float *sc = (float *)scale->data + b * scale->stride_batch + t * scale->stride_seq + h * scale->stride_head;
            *sc = fa_quant_token_scale(x, d, dst->dtype);
            fa_quant_row(row, dst->dtype, x, d, sc, 0);
        } else {
            fa_quant_row(row, dst->dtype, x, d, fixed + h * scale->stride_head, width > 1);
        }
    }
    return FLASHATTN_OK;
}
