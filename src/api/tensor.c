/* Descriptor helpers for the two common contiguous layouts. */
#include "flashattn.h"

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
