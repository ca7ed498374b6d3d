/*
 * Input checks. Every path out of here either fills a consistent fa_problem
 * or returns a status with a message naming the tensor and the field, before
 * anything has been written to an output.
 */
#include "api/validate.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/size.h"
#include "core/status.h"
#include "kernels/kernels.h"

/* The first release's struct ends at reserved_flags. */
#define FA_PARAMS_V1_SIZE (offsetof(flashattn_params, reserved_flags) + sizeof(uint32_t))

/* Every field the first release has is set here; fields after them
 * default to 0 / NULL, which init_size's memset gives. A caller's struct
 * larger than the library's is cleared whole and keeps its size, which
 * fa_read_params then rejects with a message. */
void flashattn_params_init_size(flashattn_params *p, size_t size) {
    if (!p || size < FA_PARAMS_V1_SIZE) return;
    memset(p, 0, size);
    p->struct_size = size;
    p->window_left = -1;
    p->window_right = -1;
    p->align = FLASHATTN_ALIGN_BOTTOM_RIGHT;
}

void flashattn_varlen_init_size(flashattn_varlen *v, size_t size) {
    if (!v || size < sizeof v->struct_size) return;
    memset(v, 0, size);
    v->struct_size = size;
}

/* One cu_seqlens array: starts at 0, never decreases, ends at total;
 * *most is its longest sequence. */
static flashattn_status check_cu(const int32_t *cu, int64_t n, int64_t total, const char *name,
                                 const char *tensor, int64_t *most) {
    if (!cu) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "varlen.%s is NULL", name);
    if (cu[0] != 0)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "varlen.%s[0] is %d: must be 0", name, (int)cu[0]);
    *most = 0;
    for (int64_t b = 0; b < n; b++) {
        const int64_t len = (int64_t)cu[b + 1] - cu[b];
        if (len < 0)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "varlen.%s decreases at %lld (%d then %d): sequence lengths must be >= 0",
                           name, (long long)b, (int)cu[b], (int)cu[b + 1]);
        if (len > *most) *most = len;
    }
    if (cu[n] != total)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                       "varlen.%s[batch] is %d, but %s holds %lld rows (its seqlen)", name,
                       (int)cu[n], tensor, (long long)total);
    return FLASHATTN_OK;
}

/* Packed sequences: every tensor one batch entry, the boundaries
 * consistent with it. Fills the problem's sequence view. decode: the
 * cache gives the keys (no cu_seqlens_k, no seqused_k). */
static flashattn_status check_varlen(const flashattn_varlen *vl, int decode,
                                     const flashattn_tensor *q, const flashattn_tensor *k,
                                     fa_problem *pb) {
    flashattn_status s;
    if (vl->struct_size != sizeof *vl) /* (the only size there has been) */
        return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                       "varlen.struct_size is %zu: initialise it with flashattn_varlen_init()",
                       vl->struct_size);
    if (vl->batch < 0 || vl->batch > INT32_MAX)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "varlen.batch is %lld: must be 0..%d",
                       (long long)vl->batch, INT32_MAX);
    if (q->batch != 1 || (k && k->batch != 1))
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                       "varlen: tensors hold the packed sequences in one batch entry (batch 1)");
    int64_t most_q, most_k = 0;
    if ((s = check_cu(vl->cu_seqlens_q, vl->batch, q->seqlen, "cu_seqlens_q", "q", &most_q))) return s;
    if (decode) {
        if (vl->cu_seqlens_k || vl->seqused_k)
            return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                           "varlen decode: the cache's seqlens give the keys; cu_seqlens_k and "
                           "seqused_k must be NULL");
    } else {
        if ((s = check_cu(vl->cu_seqlens_k, vl->batch, k->seqlen, "cu_seqlens_k", "k", &most_k)))
            return s;
        if (vl->seqused_k) {
            most_k = 0;
            for (int64_t b = 0; b < vl->batch; b++) {
                const int64_t n = (int64_t)vl->cu_seqlens_k[b + 1] - vl->cu_seqlens_k[b];
                if (vl->seqused_k[b] < 0 || vl->seqused_k[b] > n)
                    return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                                   "varlen.seqused_k[%lld] is %d: must be 0..%lld (the sequence's keys)",
                                   (long long)b, (int)vl->seqused_k[b], (long long)n);
                if (vl->seqused_k[b] > most_k) most_k = vl->seqused_k[b];
            }
        }
    }
    pb->batch = vl->batch;
    pb->seq_q = most_q;
    pb->seq_k = most_k;
    pb->cu_q = vl->cu_seqlens_q;
    pb->cu_k = vl->cu_seqlens_k;
    pb->used_k = vl->seqused_k;
    return FLASHATTN_OK;
}

/* A bias or mask array against the problem (batch, heads_q, seq_q, seq_k
 * filled): each dimension the problem's or 1, strides >= 0, its extent
 * within 64 bits. min_k >= 0 (decode: the most keys a sequence has, seq_k
 * the capacity) also lets seq_k be anything from min_k to seq_k. */
static flashattn_status check_scores_within(const flashattn_scores *t, const char *name, int is_bias,
                                            const fa_problem *pb, int64_t min_k) {
    const int64_t want[4] = {pb->batch, pb->heads_q, pb->seq_q, pb->seq_k};
    const int64_t dims[4] = {t->batch, t->heads, t->seq_q, t->seq_k};
    const int64_t strides[4] = {t->stride_batch, t->stride_head, t->stride_q, t->stride_k};
    static const char *dim_name[4] = {"batch", "heads", "seq_q", "seq_k"};
    if (is_bias && !fa_dtype_float(t->dtype))
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "%s.dtype is %d: must be f32, f16 or bf16", name, (int)t->dtype);
    int64_t last = 0;
    int empty = 0;
    for (int x = 0; x < 4; x++) {
        if (x == 3 && min_k >= 0 && dims[x] >= min_k && dims[x] <= want[x]) {
        } else if (x == 3 && min_k >= 0 && dims[x] != 1) {
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "%s.seq_k is %lld: must be 1, or from the longest sequence's keys (%lld) to "
                           "the cache's capacity (%lld)",
                           name, (long long)dims[x], (long long)min_k, (long long)want[x]);
        } else if (dims[x] != want[x] && dims[x] != 1) {
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "%s.%s is %lld: must be %lld or 1", name,
                           dim_name[x], (long long)dims[x], (long long)want[x]);
        }
        if (strides[x] < 0)
            return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "%s: strides must be >= 0", name);
        int64_t term;
        if (want[x] == 0) empty = 1;
        if (dims[x] > 0 && (__builtin_mul_overflow(dims[x] - 1, strides[x], &term) ||
                            __builtin_add_overflow(last, term, &last)))
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its extent overflows 64 bits", name);
    }
    size_t bytes;
    if ((uint64_t)last >= SIZE_MAX / 8 ||
        !fa_mul_size((size_t)last + 1, is_bias ? (size_t)fa_dtype_bytes(t->dtype) : 1, &bytes))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its byte size overflows size_t", name);
    if (!t->data && !empty) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "%s.data is NULL", name);
    return FLASHATTN_OK;
}

static flashattn_status check_scores(const flashattn_scores *t, const char *name, int is_bias,
                                     const fa_problem *pb) {
    return check_scores_within(t, name, is_bias, pb, -1);
}

/* Softcap, ALiBi and sinks (params already read): checked, then set in pb
 * (its batch and heads_q filled). */
static flashattn_status check_modifiers(const flashattn_params *p, fa_problem *pb) {
    if (!isfinite(p->softcap) || p->softcap < 0.0f)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.softcap is %g: must be finite and >= 0",
                       (double)p->softcap);
    if (p->alibi_batch_stride != 0 && p->alibi_batch_stride != pb->heads_q)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                       "params.alibi_batch_stride is %lld: must be 0 or heads_q (%lld)",
                       (long long)p->alibi_batch_stride, (long long)pb->heads_q);
    if (p->alibi_slopes) {
        const int64_t n = p->alibi_batch_stride ? pb->batch * pb->heads_q : pb->heads_q;
        for (int64_t x = 0; x < n; x++)
            if (!isfinite(p->alibi_slopes[x]))
                return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.alibi_slopes[%lld] is not finite",
                               (long long)x);
    }
    if (p->sinks)
        for (int64_t h = 0; h < pb->heads_q; h++)
            if (!isfinite(p->sinks[h]))
                return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.sinks[%lld] is not finite", (long long)h);
    pb->softcap2 = p->softcap * 1.4426950408889634f;
    pb->alibi = p->alibi_slopes;
    pb->alibi_stride = p->alibi_batch_stride;
    pb->sinks = p->sinks;
    return FLASHATTN_OK;
}

/* The bias gradient's array (flashattn.h): the checks of a bias array,
 * f32, distinct elements, and only the broadcasts a work item of the
 * backward sums alone (one item owns a kv-block of one (sequence, kv-head)
 * for every query head of its group and every query). */
static flashattn_status check_dbias(const flashattn_scores *t, const fa_problem *pb) {
    flashattn_status s;
    if (!pb->bias) return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.dbias needs params.bias");
    if (t->dtype != FLASHATTN_F32)
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "params.dbias.dtype must be FLASHATTN_F32");
    if ((s = check_scores(t, "params.dbias", 1, pb))) return s;
    if ((t->seq_k == 1 && pb->seq_k > 1) || (t->batch == 1 && pb->batch > 1) ||
        (t->heads == 1 && pb->heads_q > 1 && pb->heads_kv > 1))
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED,
                       "params.dbias: summing over keys, sequences, or query heads of several kv-heads "
                       "is not done here; pass those dimensions whole and sum them");
    /* distinct elements: the dimensions of more than one element, by
     * stride, each stride past the span of the smaller ones */
    int64_t dims[4] = {t->batch, t->heads, t->seq_q, t->seq_k};
    int64_t strides[4] = {t->stride_batch, t->stride_head, t->stride_q, t->stride_k};
    int64_t span = 1;
    for (int done = 0; done < 4; done++) {
        int at = -1;
        for (int x = 0; x < 4; x++)
            if (dims[x] > 1 && (at < 0 || strides[x] < strides[at])) at = x;
        if (at < 0) break;
        if (strides[at] < span)
            return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "params.dbias: strides make distinct elements overlap");
        if (__builtin_mul_overflow(strides[at], dims[at], &span))
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "params.dbias: its extent overflows 64 bits");
        dims[at] = 1;
    }
    return FLASHATTN_OK;
}

/* Bias and mask (batch, heads_q, seq_q and seq_k filled; min_k as for
 * check_scores_within). */
static flashattn_status check_score_arrays(const flashattn_params *p, fa_problem *pb, int64_t min_k) {
    flashattn_status s;
    if (p->bias && (s = check_scores_within(p->bias, "params.bias", 1, pb, min_k))) return s;
    if (p->mask && (s = check_scores_within(p->mask, "params.mask", 0, pb, min_k))) return s;
    pb->bias = p->bias;
    pb->mask = p->mask;
    return FLASHATTN_OK;
}


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
    if (!(out->dropout_p >= 0.0f && out->dropout_p < 1.0f))
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.dropout_p is %g: must be in [0, 1)",
                       (double)out->dropout_p);
    if (out->precision != FLASHATTN_PRECISION_EXACT && out->precision != FLASHATTN_PRECISION_INT8_QK &&
        out->precision != FLASHATTN_PRECISION_INT8_QK_BF16_PV &&
        out->precision != FLASHATTN_PRECISION_INT8_QK_INT8_PV)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.precision is %d: not a flashattn_precision value",
                       (int)out->precision);
    return FLASHATTN_OK;
}

/* Dropout's stream (core/philox.h) into pb, within the sizes its counter
 * holds (flashattn.h); batch, heads_q, seq_q and seq_k filled. */
static flashattn_status check_dropout(const flashattn_params *p, fa_problem *pb) {
    memset(&pb->dropout, 0, sizeof pb->dropout);
    if (p->dropout_p == 0.0f) return FLASHATTN_OK;
    if (pb->seq_q > ((int64_t)1 << 32) || pb->seq_k > ((int64_t)1 << 34) ||
        (pb->heads_q > 0 && pb->batch > ((int64_t)1 << 32) / pb->heads_q))
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED,
                       "dropout: at most 2^32 queries and 2^34 keys a sequence and 2^32 (sequence, "
                       "head) pairs");
    const double t = nearbyint((double)p->dropout_p * 65536.0);
    pb->dropout.threshold = t >= 65535.0 ? 65535u : (uint32_t)t;
    pb->dropout.scale = (float)(1.0 / (1.0 - (double)p->dropout_p));
    pb->dropout.seed = p->dropout_seed;
    pb->dropout.offset = p->dropout_offset;
    return FLASHATTN_OK;
}

flashattn_status flashattn_dropout_mask(const flashattn_params *user, int64_t heads_q, int64_t b,
                                        int64_t h, int64_t i, int64_t j0, int64_t n, uint8_t *keep) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if ((s = fa_read_params(user, &p))) return s;
    if (!keep && n > 0) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "keep is NULL");
    if (heads_q < 1 || b < 0 || h < 0 || h >= heads_q || i < 0 || i >= ((int64_t)1 << 32) || j0 < 0 ||
        n < 0 || n > ((int64_t)1 << 34) - j0 || b > (((int64_t)1 << 32) - 1 - h) / heads_q)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                       "flashattn_dropout_mask: heads_q >= 1, 0 <= h < heads_q, b * heads_q + h < 2^32, "
                       "0 <= i < 2^32, j0 >= 0, j0 + n <= 2^34");
    fa_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.batch = b + 1, pb.heads_q = heads_q, pb.seq_q = i + 1, pb.seq_k = j0 + n;
    if ((s = check_dropout(&p, &pb))) return s;
    uint32_t key[2];
    fa_dropout_key(&pb.dropout, b * heads_q + h, key);
    uint32_t r[4] = {0, 0, 0, 0};
    for (int64_t t = 0; t < n; t++) {
        const int64_t j = j0 + t;
        if (t == 0 || !(j & 7)) {
            const uint32_t ctr[4] = {(uint32_t)(j >> 3), (uint32_t)i, (uint32_t)pb.dropout.offset,
                                     (uint32_t)(pb.dropout.offset >> 32)};
            fa_philox4x32_10(ctr, key, r);
        }
        keep[t] = p.dropout_p == 0.0f || fa_dropout_bits(r, j) >= pb.dropout.threshold;
    }
    return FLASHATTN_OK;
}

/* Largest element offset + 1 of a tensor, checked for overflow, in bytes. */
static flashattn_status tensor_extent(const flashattn_tensor *t, const char *name) {
    const int64_t dims[4] = {t->batch, t->seqlen, t->heads, t->head_dim};
    const int64_t strides[4] = {t->stride_batch, t->stride_seq, t->stride_head, t->stride_dim};
    int64_t last = 0, count = 1;
    /* Every stride of a tensor with elements, even of a dimension of size
     * 1 (which never steps), so that the kernels' stride * element size
     * (times a few rows of prefetch distance) cannot overflow. */
    const int empty = dims[0] == 0 || dims[1] == 0 || dims[2] == 0 || dims[3] == 0;
    for (int i = 0; i < 4 && !empty; i++)
        if (strides[i] > FLASHATTN_MAX_STRIDE)
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: a stride of %lld elements is past FLASHATTN_MAX_STRIDE (2^56)",
                           name, (long long)strides[i]);
    for (int i = 0; i < 4; i++) {
        int64_t term;
        if (dims[i] == 0) return FLASHATTN_OK; /* empty: nothing is addressed */
        if (__builtin_mul_overflow(dims[i] - 1, strides[i], &term) ||
            __builtin_add_overflow(last, term, &last))
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its extent overflows 64 bits", name);
    }
    /* The element count too, even where strides of 0 make the extent small:
     * the planners count rows, heads and groups in int64. */
    for (int i = 0; i < 4; i++)
        if (__builtin_mul_overflow(count, dims[i], &count))
            return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its element count overflows 64 bits", name);
    size_t bytes;
    if ((uint64_t)last >= SIZE_MAX / 8 ||
        !fa_mul_size((size_t)last + 1, (size_t)fa_dtype_bytes(t->dtype), &bytes))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "%s: its byte size overflows size_t", name);
    return FLASHATTN_OK;
}

/* A tensor's shape, strides and extent; its dtype one of the float ones,
 * or (a KV cache's k and v: quant) an 8-bit cache dtype too. */
static flashattn_status check_tensor_of(const flashattn_tensor *t, const char *name, int quant) {
    if (!t) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "%s is NULL", name);
    if (!fa_dtype_valid(t->dtype))
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "%s.dtype is %d, not a flashattn_dtype", name,
                       (int)t->dtype);
    if (!quant && !fa_dtype_float(t->dtype))
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE,
                       "%s.dtype is %s: only a KV cache's k and v can be int8 or fp8", name,
                       fa_dtype_name(t->dtype));
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

static flashattn_status check_tensor(const flashattn_tensor *t, const char *name) {
    return check_tensor_of(t, name, 0);
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

/* Every sequence's lengths against the cache: seqlens and leftpad in
 * range, the append within the capacity, the block-table entries it reads
 * (from the page of its first key to that of its last) in the pool, and
 * the rotary positions it uses within the table. */
static flashattn_status check_seqlens(const fa_decode_problem *dp, int64_t capacity,
                                      int64_t num_pages, const flashattn_kv_cache *c) {
    const fa_problem *pb = &dp->base;
    for (int64_t b = 0; b < pb->batch; b++) {
        const int64_t len = pb->kv_lens_i32 ? (int64_t)pb->kv_lens_i32[b] : pb->kv_lens_i64[b];
        const int64_t add = fa_kv_added(pb, b), pad = pb->leftpad ? pb->leftpad[b] : 0;
        if (len < 0 || len > capacity)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "cache seqlens[%lld] = %lld: must be in 0..%lld (the capacity)",
                           (long long)b, (long long)len, (long long)capacity);
        if (pad < 0 || pad > len)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "cache leftpad[%lld] = %lld: must be in 0..%lld (its seqlens)",
                           (long long)b, (long long)pad, (long long)len);
        if (add > capacity - len)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "appending %lld rows to sequence %lld (%lld rows) overflows the "
                           "cache capacity %lld",
                           (long long)add, (long long)b, (long long)len, (long long)capacity);
        if (pb->batch_idx && (pb->batch_idx[b] < 0 || pb->batch_idx[b] >= c->k.batch))
            return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                           "cache batch_idx[%lld] = %d: not an entry of the cache (0..%lld)",
                           (long long)b, (int)pb->batch_idx[b], (long long)c->k.batch - 1);
        if (dp->rot_cos) {
            const int64_t sq = fa_seq_q_of(pb, b);
            int64_t last = -1; /* the last position used */
            if (add > 0) last = len + add - 1;
            if (sq > 0) {
                const int64_t qlast = len + (dp->rot_q_step ? sq - 1 : 0);
                if (qlast > last) last = qlast;
            }
            if (last >= c->rotary_len)
                return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                               "sequence %lld uses rotary position %lld, past the tables' "
                               "rotary_len %lld",
                               (long long)b, (long long)last, (long long)c->rotary_len);
        }
        if (!dp->block_table) continue;
        const int64_t pages = (len + add + dp->page_size - 1) / dp->page_size;
        for (int64_t i = pad / dp->page_size; i < pages; i++) {
            const int32_t e = dp->block_table[b * dp->max_pages + i];
            if (e < 0 || e >= num_pages)
                return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                               "block_table[%lld][%lld] = %d: not a page of the pool (0..%lld)",
                               (long long)b, (long long)i, (int)e, (long long)num_pages - 1);
        }
    }
    return FLASHATTN_OK;
}

/* The first release's cache struct ends at seqlens_i64. */
#define FA_KV_CACHE_V1_SIZE (offsetof(flashattn_kv_cache, seqlens_i64) + sizeof(const int64_t *))
/* 0.3's ends at rotary_interleaved, before the quantised caches' scales. */
#define FA_KV_CACHE_V3_SIZE offsetof(flashattn_kv_cache, k_scale)

/* The cache's rotary tables. */
static flashattn_status check_rotary(const flashattn_kv_cache *c, int64_t d) {
    if (!c->rotary_cos && !c->rotary_sin) return FLASHATTN_OK;
    if (!c->rotary_cos || !c->rotary_sin)
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "give both cache.rotary_cos and rotary_sin, or neither");
    if (c->rotary_dim < 2 || c->rotary_dim % 2 || c->rotary_dim > d)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                       "cache.rotary_dim is %lld: must be even, 2..%lld (head_dim)",
                       (long long)c->rotary_dim, (long long)d);
    if (c->rotary_len < 0)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "cache.rotary_len must be >= 0");
    if (c->rotary_interleaved != 0 && c->rotary_interleaved != 1)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "cache.rotary_interleaved must be 0 or 1");
    size_t bytes;
    if (!fa_mul_size((size_t)c->rotary_len, (size_t)c->rotary_dim / 2 * sizeof(float), &bytes))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "cache rotary tables: byte size overflows size_t");
    return FLASHATTN_OK;
}

/* A scale tensor for kind against kv, the 8-bit tensor it scales: dtype,
 * shape, layout (distinct rows when per-token ones are written), and the
 * fixed ones' values unless they are about to be written. */
static flashattn_status check_scale_tensor(const flashattn_tensor *sc, const flashattn_tensor *kv,
                                           flashattn_scale_kind kind, const char *name, int writing,
                                           int calibrating) {
    flashattn_status s;
    if (kind != FLASHATTN_SCALE_PER_TOKEN && kind != FLASHATTN_SCALE_PER_CHANNEL && kind != FLASHATTN_SCALE_PER_HEAD)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "%s: scale kind %d is not a flashattn_scale_kind", name, (int)kind);
    if (!sc->data && kv->batch > 0 && kv->seqlen > 0)
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "%s.data is NULL: a %s cache needs its scales", name,
                       fa_dtype_name(kv->dtype));
    if (sc->dtype != FLASHATTN_F32) return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "%s.dtype must be FLASHATTN_F32", name);
    if ((s = check_tensor(sc, name))) return s;
    const int token = kind == FLASHATTN_SCALE_PER_TOKEN;
    const int64_t want[4] = {token ? kv->batch : 1, token ? kv->seqlen : 1, kv->heads,
                             kind == FLASHATTN_SCALE_PER_CHANNEL ? kv->head_dim : 1};
    if (sc->batch != want[0] || sc->seqlen != want[1] || sc->heads != want[2] || sc->head_dim != want[3])
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                       "%s is [%lld, %lld, %lld, %lld]: a %s scale must be [%lld, %lld, %lld, %lld]", name,
                       (long long)sc->batch, (long long)sc->seqlen, (long long)sc->heads, (long long)sc->head_dim,
                       token ? "per-token" : kind == FLASHATTN_SCALE_PER_CHANNEL ? "per-channel" : "per-head",
                       (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    if ((token ? writing : calibrating) && !rows_distinct(sc))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "%s: strides make distinct rows overlap, cannot write them", name);
    for (int64_t h = 0; !token && !calibrating && h < sc->heads; h++)
        for (int64_t e = 0; e < sc->head_dim; e++) {
            const float x = ((const float *)sc->data)[h * sc->stride_head + e];
            if (!(x > 0.0f && x <= 3.4028234663852886e38f))
                return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                               "%s[head %lld][%lld] is %g: fixed scales must be finite and > 0", name,
                               (long long)h, (long long)e, (double)x);
        }
    return FLASHATTN_OK;
}

/* A quantised cache's scales (flashattn_scale_kind); none for a float
 * cache. */
static flashattn_status check_scales(const flashattn_kv_cache *c, int appending, fa_decode_problem *dp) {
    flashattn_status s;
    const int quant = fa_dtype_quant(c->k.dtype);
    for (int t = 0; t < 2; t++) {
        const flashattn_tensor *sc = t ? &c->v_scale : &c->k_scale, *kv = t ? &c->v : &c->k;
        const flashattn_scale_kind kind = t ? c->v_scale_kind : c->k_scale_kind;
        const char *name = t ? "cache.v_scale" : "cache.k_scale";
        if (!quant) {
            if (sc->data)
                return fa_fail(FLASHATTN_ERR_BAD_PARAM, "%s: scales are for int8 and fp8 caches (this one is %s)",
                               name, fa_dtype_name(c->k.dtype));
            continue;
        }
        if ((s = check_scale_tensor(sc, kv, kind, name, appending, 0))) return s;
        dp->scale[t] = *sc;
        dp->scale_kind[t] = kind;
    }
    return FLASHATTN_OK;
}

flashattn_status fa_validate_quantize(const flashattn_tensor *src, const flashattn_tensor *dst,
                                      const flashattn_tensor *scale, flashattn_scale_kind kind, int calibrate) {
    flashattn_status s;
    if ((s = check_tensor(src, "src")) || (s = check_tensor_of(dst, "dst", 1))) return s;
    if (!scale) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "scale is NULL");
    if (!fa_dtype_quant(dst->dtype))
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "dst.dtype is %s: must be int8, fp8_e4m3 or fp8_e5m2",
                       fa_dtype_name(dst->dtype));
    if (src->batch != dst->batch || src->seqlen != dst->seqlen || src->heads != dst->heads ||
        src->head_dim != dst->head_dim)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "src and dst must have the same shape");
    if (calibrate != 0 && calibrate != 1) return fa_fail(FLASHATTN_ERR_BAD_PARAM, "calibrate must be 0 or 1");
    if (!rows_distinct(dst)) return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "dst: strides make distinct rows overlap");
    return check_scale_tensor(scale, dst, kind, "scale", 1, calibrate && kind != FLASHATTN_SCALE_PER_TOKEN);
}

/* The cache's k and v, their layout, the lengths and the block table, for
 * nseq sequences. */
static flashattn_status check_cache(const flashattn_kv_cache *c, const flashattn_tensor *q,
                                    int64_t nseq, int appending, fa_decode_problem *dp,
                                    int64_t *capacity) {
    flashattn_status s;
    if (!c) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "cache is NULL");
    if (c->struct_size != sizeof *c && c->struct_size != FA_KV_CACHE_V1_SIZE &&
        c->struct_size != FA_KV_CACHE_V3_SIZE)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM,
                       "cache.struct_size is %zu: initialise it with flashattn_kv_cache_init()",
                       c->struct_size);
    flashattn_kv_cache all; /* an older caller's struct, the rest off */
    flashattn_kv_cache_init(&all);
    memcpy(&all, c, c->struct_size);
    c = &all;
    if ((s = check_tensor_of(&c->k, "cache.k", 1)) || (s = check_tensor_of(&c->v, "cache.v", 1))) return s;
    if (c->k.dtype != c->v.dtype)
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "cache.k and cache.v must have the same dtype");
    if (c->k.batch != c->v.batch || c->k.seqlen != c->v.seqlen || c->k.heads != c->v.heads)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "cache.k and cache.v must have the same batch, seqlen and heads");
    if (c->k.head_dim != q->head_dim)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "the cache's head_dim must be q's");
    if ((s = check_scales(c, appending, dp))) return s;
    if (appending && (!rows_distinct(&c->k) || !rows_distinct(&c->v)))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE,
                       "cache.k/v: strides make distinct rows overlap, cannot append");
    if (nseq > 0 && !c->seqlens_i32 && !c->seqlens_i64)
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "cache.seqlens_i32 and seqlens_i64 are NULL");
    if (c->seqlens_i32 && c->seqlens_i64)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "set one of cache.seqlens_i32 and seqlens_i64");
    if ((s = check_rotary(c, q->head_dim))) return s;
    dp->base.kv_lens_i32 = c->seqlens_i32;
    dp->base.kv_lens_i64 = c->seqlens_i64;
    dp->base.batch_idx = c->batch_idx;
    dp->base.leftpad = c->leftpad;
    dp->block_table = c->block_table;
    dp->rot_cos = c->rotary_cos;
    dp->rot_sin = c->rotary_sin;
    dp->rot_dim = c->rotary_dim;
    dp->rot_interleaved = c->rotary_interleaved;
    if (!c->block_table) {
        if (!c->batch_idx && c->k.batch != nseq)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "a contiguous cache must have an entry per sequence (batch %lld), "
                           "or a batch_idx", (long long)nseq);
        if (c->batch_idx && nseq > 0 && c->k.batch < 1)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "cache.k has no entry for batch_idx to pick");
        *capacity = c->k.seqlen;
        return FLASHATTN_OK;
    }
    if (c->batch_idx)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "cache.batch_idx works with contiguous caches only");
    size_t entries;
    if (c->k.seqlen < 1)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "paged cache: page_size (cache.k.seqlen) must be >= 1");
    if (c->max_pages_per_seq < 0)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "cache.max_pages_per_seq must be >= 0");
    if (__builtin_mul_overflow(c->max_pages_per_seq, c->k.seqlen, capacity) ||
        !fa_mul_size((size_t)nseq, (size_t)c->max_pages_per_seq, &entries) ||
        !fa_mul_size(entries, sizeof(int32_t), &entries))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "paged cache: capacity or block table overflows");
    dp->max_pages = c->max_pages_per_seq;
    dp->page_size = c->k.seqlen;
    return FLASHATTN_OK;
}

flashattn_status fa_validate_decode(const flashattn_tensor *q, const flashattn_kv_cache *c,
                                    const flashattn_tensor *k_new, const flashattn_tensor *v_new,
                                    const flashattn_tensor *o, float *lse,
                                    const flashattn_params *p, fa_decode_problem *dp) {
    flashattn_status s;
    int64_t capacity = 0;
    memset(dp, 0, sizeof *dp);
    fa_problem *pb = &dp->base;
    if ((s = check_tensor(q, "q")) || (s = check_tensor(o, "o"))) return s;
    if ((k_new == NULL) != (v_new == NULL))
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "give both k_new and v_new, or neither");
    pb->batch = q->batch;
    pb->seq_q = q->seqlen;
    if (p->varlen && (s = check_varlen(p->varlen, 1, q, NULL, pb))) return s;
    const int64_t nseq = pb->batch;
    if ((s = check_cache(c, q, nseq, k_new != NULL, dp, &capacity))) return s;
    const int64_t heads_kv = c->k.heads, d = q->head_dim, dv = c->v.head_dim;
    if (o->batch != q->batch || o->seqlen != q->seqlen || o->heads != q->heads ||
        o->head_dim != dv)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "o must have q's batch, seqlen and heads, cache.v's head_dim");
    if (q->heads % heads_kv != 0)
        return fa_fail(FLASHATTN_ERR_BAD_HEADS, "heads_q (%lld) is not a multiple of heads_kv (%lld)",
                       (long long)q->heads, (long long)heads_kv);
    if (!rows_distinct(o))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "o: strides make distinct rows overlap");
    if (k_new) {
        if ((s = check_tensor(k_new, "k_new")) || (s = check_tensor(v_new, "v_new"))) return s;
        const flashattn_tensor *t[2] = {k_new, v_new};
        for (int i = 0; i < 2; i++)
            if (t[i]->batch != q->batch || t[i]->seqlen != k_new->seqlen ||
                t[i]->heads != heads_kv || t[i]->head_dim != (i ? dv : d))
                return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                               "k_new and v_new must be [q's batch, seq_new, the cache's heads, cache.k's "
                               "and cache.v's head_dim]");
        if (pb->cu_q && k_new->seqlen != q->seqlen)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE,
                           "varlen decode: k_new and v_new are packed like q (seqlen total_q = %lld)",
                           (long long)q->seqlen);
        dp->k_new = k_new, dp->v_new = v_new;
        if (pb->cu_q) {
            pb->kv_add_q = 1;
            dp->seq_new = pb->seq_q; /* the longest sequence's */
        } else {
            dp->seq_new = pb->kv_add = k_new->seqlen;
        }
    }
    size_t lse_elems;
    if (!fa_mul_size((size_t)q->batch, (size_t)q->heads, &lse_elems) ||
        !fa_mul_size(lse_elems, (size_t)q->seqlen, &lse_elems) ||
        !fa_mul_size(lse_elems, sizeof(float), &lse_elems))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "lse: byte size overflows size_t");
    if (p->num_splits < 0 || p->num_splits > FLASHATTN_MAX_SPLITS)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.num_splits is %d: must be 0..%d",
                       p->num_splits, FLASHATTN_MAX_SPLITS);
    /* FlashAttention-2's: a window as wide as the cache is no window */
    dp->rot_q_step = p->causal || (p->window_left >= 0 && p->window_left < capacity) ||
                     (p->window_right >= 0 && p->window_right < capacity);
    if ((s = check_seqlens(dp, capacity, c->k.batch, c))) return s;

    pb->q = q, pb->k = &c->k, pb->v = &c->v, pb->o = o, pb->lse = lse;
    pb->seq_k = capacity;
    pb->rows_q = q->seqlen;
    pb->batch_q = q->batch;
    pb->heads_q = q->heads;
    pb->heads_kv = heads_kv;
    if ((s = check_modifiers(p, pb))) return s;
    /* [batch, heads_q, the new rows, keys]: key j is the sequence's j-th
     * key (leftpad rows not counted), query i its i-th new row; keys from
     * the longest sequence's to the capacity */
    int64_t most_keys = 0;
    for (int64_t b = 0; (p->bias || p->mask) && b < pb->batch; b++)
        if (fa_kv_given(pb, b) + fa_kv_added(pb, b) > most_keys) most_keys = fa_kv_given(pb, b) + fa_kv_added(pb, b);
    if ((s = check_score_arrays(p, pb, most_keys))) return s;
    if (p->dropout_p != 0.0f)
        return fa_fail(FLASHATTN_ERR_BAD_PARAM, "params.dropout_p: flashattn_decode takes no dropout");
    if (p->precision != FLASHATTN_PRECISION_EXACT)
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED,
                       "params.precision: flashattn_decode computes only FLASHATTN_PRECISION_EXACT");
    pb->head_dim = d;
    pb->head_dim_pad = (d + FA_COL_ALIGN - 1) / FA_COL_ALIGN * FA_COL_ALIGN;
    pb->head_dim_v = dv;
    pb->head_dim_v_pad = (dv + FA_COL_ALIGN - 1) / FA_COL_ALIGN * FA_COL_ALIGN;
    pb->group = q->heads / heads_kv;
    float scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)d);
    pb->scale_log2 = scale * 1.4426950408889634f;
    pb->top_left = p->align == FLASHATTN_ALIGN_TOP_LEFT;
    /* As in the forward, with the capacity bounding every sequence. */
    pb->left = p->window_left;
    pb->right = p->window_right;
    /* left > seq_q + capacity, which can pass INT64_MAX, as a difference of
     * two sizes */
    if (pb->left - capacity > pb->seq_q) pb->left = -1;
    if (pb->right - capacity > pb->seq_q) pb->right = -1;
    if (p->causal && (pb->right < 0 || pb->right > 0)) pb->right = 0;
    return FLASHATTN_OK;
}

flashattn_status fa_validate_merge(int64_t n, const flashattn_tensor *parts,
                                   const float *const *lse_parts, const flashattn_tensor *o) {
    flashattn_status s;
    if (n < 0) return fa_fail(FLASHATTN_ERR_BAD_PARAM, "n_parts is %lld: must be >= 0", (long long)n);
    if ((s = check_tensor(o, "o"))) return s;
    if (!rows_distinct(o))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "o: strides make distinct rows overlap");
    const int64_t rows = o->batch * o->seqlen * o->heads;
    if (n > 0 && (!parts || !lse_parts))
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "o_parts or lse_parts is NULL");
    for (int64_t i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof name, "o_parts[%lld]", (long long)i);
        if ((s = check_tensor(&parts[i], name))) return s;
        if (parts[i].batch != o->batch || parts[i].seqlen != o->seqlen ||
            parts[i].heads != o->heads || parts[i].head_dim != o->head_dim)
            return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "%s must have o's shape", name);
        if (!lse_parts[i] && rows > 0)
            return fa_fail(FLASHATTN_ERR_NULL_POINTER, "lse_parts[%lld] is NULL", (long long)i);
    }
    size_t bytes;
    if (!fa_mul_size((size_t)rows, sizeof(float), &bytes))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "lse: byte size overflows size_t");
    return FLASHATTN_OK;
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
    if (k->head_dim != q->head_dim)
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "q and k must have the same head_dim");
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
    pb->rows_q = q->seqlen;
    pb->batch_q = q->batch;
    if (p->varlen && (s = check_varlen(p->varlen, 0, q, k, pb))) return s;
    pb->heads_q = q->heads;
    pb->heads_kv = k->heads;
    if ((s = check_modifiers(p, pb))) return s;
    pb->head_dim = q->head_dim;
    pb->head_dim_pad = (q->head_dim + FA_COL_ALIGN - 1) / FA_COL_ALIGN * FA_COL_ALIGN;
    pb->head_dim_v = v->head_dim;
    pb->head_dim_v_pad = (v->head_dim + FA_COL_ALIGN - 1) / FA_COL_ALIGN * FA_COL_ALIGN;
    pb->group = q->heads / k->heads;
    float scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)q->head_dim);
    pb->scale_log2 = scale * 1.4426950408889634f;
    pb->top_left = p->align == FLASHATTN_ALIGN_TOP_LEFT;
    pb->left = p->window_left;
    pb->right = p->window_right;
    /* A bound wider than both sequences is no bound; dropping it also keeps
     * i + diag -/+ bound far from int64 overflow. */
    if (pb->left - pb->seq_k > pb->seq_q) pb->left = -1; /* left > seq_q + seq_k, as above */
    if (pb->right - pb->seq_k > pb->seq_q) pb->right = -1;
    if (p->causal && (pb->right < 0 || pb->right > 0)) pb->right = 0;
    if ((s = check_dropout(p, pb))) return s;
    pb->int8_qk = p->precision != FLASHATTN_PRECISION_EXACT;
    pb->bf16_pv = p->precision == FLASHATTN_PRECISION_INT8_QK_BF16_PV;
    pb->int8_pv = p->precision == FLASHATTN_PRECISION_INT8_QK_INT8_PV;
    return check_score_arrays(p, pb, -1);
}

static int same_shape(const flashattn_tensor *a, const flashattn_tensor *b) {
    return a->batch == b->batch && a->seqlen == b->seqlen && a->heads == b->heads &&
           a->head_dim == b->head_dim;
}

flashattn_status fa_validate_bwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 const flashattn_tensor *dout, const float *lse,
                                 const flashattn_tensor *dq, const flashattn_tensor *dk,
                                 const flashattn_tensor *dv, const flashattn_params *p,
                                 fa_bwd_problem *pb) {
    flashattn_status s;
    if (p->precision != FLASHATTN_PRECISION_EXACT)
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED,
                       "params.precision: flashattn_bwd computes only FLASHATTN_PRECISION_EXACT "
                       "(the 8-bit Q K^T is for inference)");
    if ((s = fa_validate_fwd(q, k, v, o, NULL, p, &pb->f))) return s;
    if (pb->f.seq_k > FLASHATTN_MAX_BWD_SEQ ||
        (pb->f.group > 0 && pb->f.seq_q > FLASHATTN_MAX_BWD_SEQ / pb->f.group))
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED,
                       "backward: a sequence of %lld keys and %.0f query rows per kv-head: at most "
                       "%lld of each (the f32 sums; flashattn.h)",
                       (long long)pb->f.seq_k, (double)pb->f.seq_q * (double)pb->f.group,
                       (long long)FLASHATTN_MAX_BWD_SEQ);
    if ((s = check_tensor(dout, "dout")) || (s = check_tensor(dq, "dq")) ||
        (s = check_tensor(dk, "dk")) || (s = check_tensor(dv, "dv")))
        return s;
    if (!same_shape(dout, o))
        return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "dout must have o's shape");
    if (!same_shape(dq, q)) return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "dq must have q's shape");
    if (!same_shape(dk, k)) return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "dk must have k's shape");
    if (!same_shape(dv, v)) return fa_fail(FLASHATTN_ERR_BAD_SHAPE, "dv must have v's shape");
    if (!rows_distinct(dq) || !rows_distinct(dk) || !rows_distinct(dv))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE, "dq, dk, dv: strides make distinct rows overlap");
    if (!lse && q->batch > 0 && q->seqlen > 0)
        return fa_fail(FLASHATTN_ERR_NULL_POINTER, "lse is NULL: the backward needs the forward's LSE");
    pb->dout = dout, pb->dq = dq, pb->dk = dk, pb->dv = dv;
    pb->lse = lse;
    pb->scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)q->head_dim);
    pb->dsinks = p->sinks ? p->dsinks : NULL;
    pb->dbias = p->dbias;
    return p->dbias ? check_dbias(p->dbias, &pb->f) : FLASHATTN_OK;
}
