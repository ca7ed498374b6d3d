/*
 * Input checks. Every path out of here either fills a consistent fa_problem
 * or returns a status with a message naming the tensor and the field, before
 * anything has been written to an output.
 */
#include "api/validate.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "api/status.h"
#include "kernels/kernels.h"

size_t fa_dtype_size(flashattn_dtype dt) {
    switch (dt) {
    case FLASHATTN_F32: return 4;
    case FLASHATTN_F16:
    case FLASHATTN_BF16: return 2;
    default: return 0;
    }
}

void flashattn_params_init(flashattn_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->window_left = -1;
    p->window_right = -1;
    p->align = FLASHATTN_ALIGN_BOTTOM_RIGHT;
}

flashattn_params flashattn_params_default(void) {
    flashattn_params p;
    flashattn_params_init(&p);
    return p;
}

/* The first release's struct ends at reserved_flags. */
#define FA_PARAMS_V1_SIZE (offsetof(flashattn_params, reserved_flags) + sizeof(uint32_t))

flashattn_status fa_read_params(const flashattn_params *user, flashattn_params *out) {
    flashattn_params_init(out);
    if (!user) return FLASHATTN_OK;
    if (user->struct_size < FA_PARAMS_V1_SIZE || user->struct_size > sizeof *out)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                       "params.struct_size is %zu: initialise params with flashattn_params_init()",
                       user->struct_size);
    memcpy(out, user, user->struct_size);
    out->struct_size = sizeof *out;
    if (!isfinite(out->scale))
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.scale must be finite");
    if (out->causal != 0 && out->causal != 1)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.causal must be 0 or 1");
    if (out->window_left < -1 || out->window_right < -1)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.window_left/right must be >= -1");
    if (out->align != FLASHATTN_ALIGN_BOTTOM_RIGHT && out->align != FLASHATTN_ALIGN_TOP_LEFT)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.align is not a flashattn_align value");
    if (out->num_threads < 0)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.num_threads must be >= 0");
    if (out->block_m < 0 || out->block_n < 0)
        return fa_fail(FLASHATTN_ERR_BAD_TILE, "params.block_m/block_n must be >= 0 (0: automatic)");
    if (out->reserved_flags != 0)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.reserved_flags must be 0");
    return FLASHATTN_OK;
}

/* Largest element offset + 1 of a tensor, checked for overflow, in bytes. */
static flashattn_status tensor_extent(const flashattn_tensor *t, const char *name) {
    const int64_t dims[4] = {t->batch, t->seqlen, t->heads, t->head_dim};
    const int64_t strides[4] = {t->stride_batch, t->stride_seq, t->stride_head, t->stride_dim};
    int64_t last = 0;
    for (int i = 0; i < 4; i++) {
        int64_t term;
        if (dims[i] == 0) return FLASHATTN_OK; /* empty: nothing is addressed */
        if (__builtin_mul_overflow(dims[i] - 1, strides[i], &term) ||
            __builtin_add_overflow(last, term, &last))
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its extent overflows 64 bits", name);
    }
    size_t bytes;
    if ((uint64_t)last >= SIZE_MAX / 8 ||
        !fa_mul_size((size_t)last + 1, fa_dtype_size(t->dtype), &bytes))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its byte size overflows size_t", name);
    return FLASHATTN_OK;
}

static flashattn_status check_tensor(const flashattn_tensor *t, const char *name) {
    if (!t) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "%s is NULL", name);
    if ((unsigned)t->dtype >= FLASHATTN_DTYPE_COUNT)
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "%s.dtype is %d, not a flashattn_dtype", name,
                       (int)t->dtype);
    if (t->batch < 0 || t->seqlen < 0)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "%s: batch and seqlen must be >= 0", name);
    if (t->heads < 1) return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "%s: heads must be >= 1", name);
    if (t->head_dim < 1 || t->head_dim > FLASHATTN_MAX_HEAD_DIM)
        return fa_fail(FLASHATTN_ERR_BAD_HEAD_DIM, "%s: head_dim is %lld, must be 1..%d", name,
                       (long long)t->head_dim, FLASHATTN_MAX_HEAD_DIM);
    if (t->stride_dim != 1)
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "%s: stride_dim must be 1 (it is %lld)", name,
                       (long long)t->stride_dim);
    if (t->stride_batch < 0 || t->stride_seq < 0 || t->stride_head < 0)
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "%s: strides must be >= 0", name);
    if (!t->data && t->batch > 0 && t->seqlen > 0)
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "%s.data is NULL", name);
    return tensor_extent(t, name);
}

/* An output must give every (b, s, h) row its own memory: sort the outer
 * dimensions by stride and require each to step over everything inside it. */
static int rows_distinct(const flashattn_tensor *t) {
    int64_t size[3] = {t->batch, t->seqlen, t->heads};
    int64_t stride[3] = {t->stride_batch, t->stride_seq, t->stride_head};
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (stride[b] < stride[a]) {
                int64_t s = stride[a], n = size[a];
                stride[a] = stride[b], size[a] = size[b];
                stride[b] = s, size[b] = n;
            }
    if (size[0] == 0 || size[1] == 0 || size[2] == 0) return 1; /* empty: no rows */
    int64_t extent = t->head_dim;
    for (int a = 0; a < 3; a++) {
        if (size[a] <= 1) continue;
        if (stride[a] < extent) return 0;
        extent = stride[a] * (size[a] - 1) + extent; /* no overflow: tensor_extent passed */
    }
    return 1;
}

flashattn_status fa_validate_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 float *lse, const flashattn_params *p, fa_problem *pb) {
    flashattn_status s;
    if ((s = check_tensor(q, "q")) || (s = check_tensor(k, "k")) || (s = check_tensor(v, "v")) ||
        (s = check_tensor(o, "o")))
        return s;
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "q, k and v must have the same dtype");
    if (k->batch != q->batch || v->batch != q->batch || o->batch != q->batch)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "q, k, v and o must have the same batch");
    if (v->seqlen != k->seqlen || v->heads != k->heads)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "k and v must have the same seqlen and heads");
    if (k->head_dim != q->head_dim || v->head_dim != q->head_dim)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "q, k and v must have the same head_dim");
    if (o->seqlen != q->seqlen || o->heads != q->heads || o->head_dim != v->head_dim)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "o must have q's seqlen and heads, v's head_dim");
    if (q->heads % k->heads != 0)
        return fa_fail(FLASHATTN_ERR_BAD_HEADS, "heads_q (%lld) is not a multiple of heads_kv (%lld)",
                       (long long)q->heads, (long long)k->heads);
    if (!rows_distinct(o))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "o: strides make distinct rows overlap");
    size_t lse_elems;
    if (!fa_mul_size((size_t)q->batch, (size_t)q->heads, &lse_elems) ||
        !fa_mul_size(lse_elems, (size_t)q->seqlen, &lse_elems) ||
        !fa_mul_size(lse_elems, sizeof(float), &lse_elems))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "lse: byte size overflows size_t");
    (void)lse;

    memset(pb, 0, sizeof *pb);
    pb->q = q, pb->k = k, pb->v = v, pb->o = o, pb->lse = lse;
    pb->batch = q->batch;
    pb->seq_q = q->seqlen;
    pb->seq_k = k->seqlen;
    pb->heads_q = q->heads;
    pb->heads_kv = k->heads;
    pb->head_dim = q->head_dim;
    pb->head_dim_pad = (q->head_dim + FA_COL_ALIGN - 1) / FA_COL_ALIGN * FA_COL_ALIGN;
    pb->group = q->heads / k->heads;
    float scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)q->head_dim);
    pb->scale_log2 = scale * 1.4426950408889634f;
    pb->diag = p->align == FLASHATTN_ALIGN_BOTTOM_RIGHT ? pb->seq_k - pb->seq_q : 0;
    pb->left = p->window_left;
    pb->right = p->window_right;
    /* A bound wider than both sequences is no bound; dropping it also keeps
     * i + diag -/+ bound far from int64 overflow. */
    if (pb->left > pb->seq_q + pb->seq_k) pb->left = -1;
    if (pb->right > pb->seq_q + pb->seq_k) pb->right = -1;
    if (p->causal && (pb->right < 0 || pb->right > 0)) pb->right = 0;
    return FLASHATTN_OK;
}
