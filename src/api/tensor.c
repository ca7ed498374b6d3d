/* Descriptor helpers: element sizes and the two common contiguous layouts. */
#include <stdint.h>

#include "core/dtype.h"
#include "flashattn.h"

size_t flashattn_dtype_size(flashattn_dtype dt) {
    return fa_dtype_valid(dt) ? (size_t)fa_dtype_bytes(dt) : 0;
}

/* a * b, or INT64_MAX where it overflows: a stride the entry points then
 * reject (FLASHATTN_ERR_OVERFLOW) unless the tensor is empty */
static int64_t mul_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

flashattn_tensor flashattn_tensor_bshd(void *data, flashattn_dtype dtype, int64_t batch,
                                       int64_t seqlen, int64_t heads, int64_t head_dim) {
    const int64_t row = mul_sat(heads, head_dim);
    flashattn_tensor t = {data, dtype, batch, seqlen, heads, head_dim,
                          mul_sat(seqlen, row), row, head_dim, 1};
    return t;
}

flashattn_tensor flashattn_tensor_bhsd(void *data, flashattn_dtype dtype, int64_t batch,
                                       int64_t seqlen, int64_t heads, int64_t head_dim) {
    const int64_t head = mul_sat(seqlen, head_dim);
    flashattn_tensor t = {data, dtype, batch, seqlen, heads, head_dim,
                          mul_sat(heads, head), head_dim, head, 1};
    return t;
}
