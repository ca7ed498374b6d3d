/* Descriptor helpers: element sizes and the two common contiguous layouts. */
#include "core/dtype.h"
#include "flashattn.h"

size_t flashattn_dtype_size(flashattn_dtype dt) {
    return fa_dtype_valid(dt) ? (size_t)fa_dtype_bytes(dt) : 0;
}

flashattn_tensor flashattn_tensor_bshd(void *data, flashattn_dtype dtype, int64_t batch,
                                       int64_t seqlen, int64_t heads, int64_t head_dim) {
    flashattn_tensor t = {data, dtype, batch, seqlen, heads, head_dim,
                          seqlen * heads * head_dim, heads * head_dim, head_dim, 1};
    return t;
}

flashattn_tensor flashattn_tensor_bhsd(void *data, flashattn_dtype dtype, int64_t batch,
                                       int64_t seqlen, int64_t heads, int64_t head_dim) {
    flashattn_tensor t = {data, dtype, batch, seqlen, heads, head_dim,
                          seqlen * heads * head_dim, head_dim, seqlen * head_dim, 1};
    return t;
}
