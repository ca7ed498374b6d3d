/*
 * flashattn: exact FlashAttention for CPUs.
 *
 * One public header. Every call is pure C, never allocates memory that grows
 * with seq_q * seq_k, never prints, never aborts: errors come back as a
 * flashattn_status with a reason from flashattn_strerror() (and a longer,
 * thread-local message from flashattn_last_error()).
 *
 * Shapes (per tensor, in the descriptor's own dimension order):
 *
 *   Q    [batch, seq_q, heads_q,  head_dim]
 *   K    [batch, seq_k, heads_kv, head_dim]
 *   V    [batch, seq_k, heads_kv, head_dim_v]
 *   O    [batch, seq_q, heads_q,  head_dim_v]        any supported dtype
 *   LSE  [batch, heads_q, seq_q]  float32, contiguous, natural log (optional)
 *
 * Layout is given by element strides, so FlashAttention's [b, s, h, d] and
 * PyTorch's [b, h, s, d] (Ascend BNSD) both work without copies: only the
 * innermost (head_dim) stride must be 1. Strides may be any value from 0
 * (broadcast) to FLASHATTN_MAX_STRIDE elements, that of a dimension of size 1
 * too (larger ones address no memory; a tensor with elements that has one is
 * refused with FLASHATTN_ERR_OVERFLOW), except that O must not alias itself:
 * distinct (b, s, h) coordinates of O must address distinct rows.
 *
 * Semantics are FlashAttention-2's:
 *   O[i] = softmax(scale * Q[i] K^T + mask) V, over the keys row i can see.
 *   - heads_q must be a multiple of heads_kv (GQA; heads_kv = 1 is MQA);
 *     query head h uses KV head h / (heads_q / heads_kv).
 *   - head_dim from 1 to FLASHATTN_MAX_HEAD_DIM; any seq_q, seq_k >= 0.
 *     head_dim_v, V's and O's head size, may differ from head_dim, Q's and
 *     K's (MLA's 576 / 512): it is each descriptor's own head_dim, and
 *     wherever a head_dim of V, O, dO or dV is named below it is
 *     head_dim_v.
 *   - causal and the sliding window (window_left, window_right) restrict the
 *     keys j that query i sees to
 *         i + off - window_left <= j <= i + off + window_right   (window)
 *         j <= i + off                                          (causal)
 *     where off = seq_k - seq_q for FLASHATTN_ALIGN_BOTTOM_RIGHT (the default,
 *     as FlashAttention-2) and off = 0 for FLASHATTN_ALIGN_TOP_LEFT (as
 *     PyTorch's scaled_dot_product_attention with is_causal). A window bound
 *     of -1 is unbounded; causal is window_right = 0.
 *   - A row that sees no key gets O = 0 and LSE = -inf.
 *   - NaN and Inf: every output is the IEEE evaluation of its formula over
 *     what it depends on, with one rule: in every product 0 times anything
 *     (Inf and NaN included) is 0. So nothing reaches a row from a key it
 *     does not see (causal, window, mask, a -inf bias, past seqused_k or
 *     its sequence): that key's weight P is 0, whatever its K and V hold;
 *     nor from a key whose weight rounds to 0 in f32. A NaN among the
 *     scores a row sees (from its Q row, a visible key's K, a bias), or a
 *     +Inf score, makes that row's O and LSE NaN; a NaN or Inf in a
 *     visible key's V propagates into O as the sum P V gives it. The
 *     backward follows the same rule: dQ of a row from what the row sees,
 *     dK and dV of a key from the rows that see it with nonzero weight.
 *     Scores are formed in f32: one beyond its range is +-Inf, and the
 *     rule applies (a +Inf score gives NaN), as in a plain f32 softmax.
 *     Calls with only finite inputs never take the slower path this rule
 *     needs; a call that meets a NaN or Inf may take several times longer.
 *   - f16 and bf16 inputs are computed with f32 products, an f32 softmax and
 *     f32 accumulation; O is rounded to its dtype once, at the end. One
 *     exception: on the paths with a bf16 dot-product instruction ("amx",
 *     and "avx512bf16" when forced: see flashattn_isa), a forward whose q,
 *     k and v are all bf16 runs both products on it, so P is rounded to
 *     bf16 before P.V (sums and softmax still f32), as FlashAttention-2
 *     does on GPUs; the backward runs S and dP there the same way, its
 *     other products in f32. The tests hold these paths to the same bound
 *     as every other: at most twice the error of plain f32 attention
 *     (docs/numerics.md).
 *   - Results are bit-identical whatever the thread count.
 */
#ifndef FLASHATTN_H
#define FLASHATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FLASHATTN_API __declspec(dllexport)
#else
#define FLASHATTN_API __attribute__((visibility("default")))
#endif

#define FLASHATTN_VERSION_MAJOR 0
#define FLASHATTN_VERSION_MINOR 3
#define FLASHATTN_VERSION_PATCH 0

#define FLASHATTN_MAX_HEAD_DIM 576
/* The largest stride, in elements, of any dimension of a tensor (2^56). */
#define FLASHATTN_MAX_STRIDE ((int64_t)1 << 56)
/* The longest sequence flashattn_bwd takes (see there). */
#define FLASHATTN_MAX_BWD_SEQ ((int64_t)1 << 24)

typedef enum flashattn_status {
    FLASHATTN_OK = 0,
    FLASHATTN_ERR_NULL_POINTER,      /* a required pointer is NULL */
    FLASHATTN_ERR_BAD_SHAPE,         /* negative size, or shapes that disagree */
    FLASHATTN_ERR_BAD_HEAD_DIM,      /* head_dim is 0 or above FLASHATTN_MAX_HEAD_DIM */
    FLASHATTN_ERR_BAD_HEADS,         /* heads_q is not a multiple of heads_kv */
    FLASHATTN_ERR_BAD_STRIDE,        /* head_dim stride != 1, negative, or O aliases */
    FLASHATTN_ERR_BAD_DTYPE,         /* unknown dtype, or a dtype not allowed there */
    FLASHATTN_ERR_BAD_PARAM,         /* an option out of its range (window, threads...) */
    FLASHATTN_ERR_BAD_TILE,          /* block_m / block_n the kernels cannot run */
    FLASHATTN_ERR_WORKSPACE_TOO_SMALL,
    FLASHATTN_ERR_OVERFLOW,          /* a byte count does not fit in 64 bits / size_t */
    FLASHATTN_ERR_OUT_OF_MEMORY,     /* the library could not allocate the workspace */
    FLASHATTN_ERR_UNSUPPORTED,       /* valid request, not available on this build/CPU */
    FLASHATTN_STATUS_COUNT
} flashattn_status;

typedef enum flashattn_dtype {
    FLASHATTN_F32 = 0,
    FLASHATTN_F16 = 1,   /* IEEE binary16 */
    FLASHATTN_BF16 = 2,  /* bfloat16 */
    /* KV-cache storage only (flashattn_kv_cache, with scales): */
    FLASHATTN_INT8 = 3,      /* signed 8-bit integer */
    FLASHATTN_FP8_E4M3 = 4,  /* OCP float8 E4M3 ("e4m3fn"): no infinities, max 448 */
    FLASHATTN_FP8_E5M2 = 5,  /* OCP float8 E5M2: the top byte of an f16, max 57344 */
    FLASHATTN_DTYPE_COUNT
} flashattn_dtype;

/* Bytes of one element of dt; 0 for a value that is not a flashattn_dtype. */
FLASHATTN_API size_t flashattn_dtype_size(flashattn_dtype dt);

/* A 4-D tensor view: element strides per dimension, in elements (not bytes). */
typedef struct flashattn_tensor {
    void *data;
    flashattn_dtype dtype;
    int64_t batch, seqlen, heads, head_dim;
    int64_t stride_batch, stride_seq, stride_head, stride_dim; /* stride_dim must be 1 */
} flashattn_tensor;

/* Describe a contiguous [batch, seq, heads, dim] tensor (FlashAttention's
 * layout). A stride whose product overflows int64 comes out INT64_MAX,
 * which the entry points reject (FLASHATTN_ERR_OVERFLOW) unless the tensor
 * is empty. */
FLASHATTN_API flashattn_tensor flashattn_tensor_bshd(void *data, flashattn_dtype dtype,
                                                     int64_t batch, int64_t seqlen,
                                                     int64_t heads, int64_t head_dim);
/* Describe a contiguous [batch, heads, seq, dim] tensor (PyTorch's / BNSD layout). */
FLASHATTN_API flashattn_tensor flashattn_tensor_bhsd(void *data, flashattn_dtype dtype,
                                                     int64_t batch, int64_t seqlen,
                                                     int64_t heads, int64_t head_dim);

typedef enum flashattn_align {
    FLASHATTN_ALIGN_BOTTOM_RIGHT = 0, /* FlashAttention-2: last query sees last key */
    FLASHATTN_ALIGN_TOP_LEFT = 1      /* PyTorch SDPA: query i sees key i */
} flashattn_align;

/*
 * Options. Always start from flashattn_params_default() (or _init) and set
 * what you need: new fields are added at the end with defaults that keep the
 * old behaviour, and struct_size lets the library know which ones you have.
 */
/* params.precision (see "Precision" below). */
typedef enum flashattn_precision {
    FLASHATTN_PRECISION_EXACT = 0,
    FLASHATTN_PRECISION_INT8_QK = 1,
    FLASHATTN_PRECISION_INT8_QK_BF16_PV = 2,
    FLASHATTN_PRECISION_INT8_QK_INT8_PV = 3,
} flashattn_precision;

typedef struct flashattn_params {
    size_t struct_size;      /* sizeof(flashattn_params), set by _init */
    float scale;             /* softmax scale; 0 means 1/sqrt(head_dim) */
    int causal;              /* 0 or 1 */
    int64_t window_left;     /* -1: unbounded */
    int64_t window_right;    /* -1: unbounded */
    flashattn_align align;   /* how the causal/window diagonal is aligned */
    int block_m;             /* query rows per tile; 0: automatic */
    int block_n;             /* keys per tile; 0: automatic */
    int num_threads;         /* the most threads (0: OpenMP default); little work uses fewer */
    int deterministic;       /* forward is always deterministic; used by backward */
    uint32_t reserved_flags; /* must be 0 (room for dropout...) */
    int num_splits;          /* decode: parts each sequence's keys are cut into; 0: automatic */
    const struct flashattn_varlen *varlen; /* NULL: a dense batch; else packed sequences (below) */
    /* Score modifiers (see "Score modifiers" below); 0 / NULL: off. */
    float softcap;                  /* > 0: s = softcap * tanh(s / softcap) */
    const float *alibi_slopes;      /* [heads_q], or [batch][heads_q] (see alibi_batch_stride) */
    int64_t alibi_batch_stride;     /* 0: one slope per query head; heads_q: per sequence too */
    const float *sinks;             /* [heads_q]: a logit per head in every row's softmax */
    float *dsinks;                  /* flashattn_bwd only: [heads_q] written, dL/dsinks */
    const struct flashattn_scores *bias; /* additive bias on the logits (Ascend's pse) */
    const struct flashattn_scores *mask; /* boolean mask: nonzero = attend (SDPA's bool) */
    const struct flashattn_scores *dbias; /* flashattn_bwd only: dL/dbias written (see below) */
    /* Attention dropout (flashattn_fwd and flashattn_bwd; see "Dropout"). */
    float dropout_p;         /* in [0, 1); 0: off */
    uint64_t dropout_seed;   /* the stream: the same seed and offset give the same masks */
    uint64_t dropout_offset; /* advance it per call (or per step) for fresh masks */
    /* How Q K^T is computed (flashattn_fwd only; see "Precision" below). */
    flashattn_precision precision; /* FLASHATTN_PRECISION_EXACT (0, the default) */
} flashattn_params;

/*
 * Precision. FLASHATTN_PRECISION_EXACT computes S = Q K^T in f32 (the
 * rules above). FLASHATTN_PRECISION_INT8_QK, for inference, computes it
 * on 8-bit integers (SageAttention's scheme, on AVX512_VNNI / AVX-VNNI
 * where the CPU has them, else on 16-bit integer multiply-adds), and the
 * softmax and P V in f32 as usual:
 *   - each query row q (scaled by the softmax scale) becomes
 *     sq * q8, sq = max|q| / 127, q8 = round(q * (127 / max|q|)) in
 *     [-127, 127];
 *   - keys are smoothed: each chunk of keys (512, rounded up to the
 *     kernel's panel width, from each sequence's first key) has the mean
 *     of its finite rows, m, taken off, and each key row's rest k - m
 *     becomes sk * k8 the same way;
 *   - S[i][j] = sq_i * sk_j * (q8_i . k8_j) + q_i . m, so the mean comes
 *     back exactly and S, the LSE and every score modifier are those of
 *     the rounded Q and K (not only the softmax, which is blind to the
 *     shift).
 * FLASHATTN_PRECISION_INT8_QK_BF16_PV also rounds P (after the softmax
 * statistics, as the bf16 dot-product route does) and V to bf16, round to
 * nearest even, and sums P V's products in f32: on AMX (TDPBF16PS) or
 * AVX512_BF16 dot products where the kernel table has them (bf16 inputs
 * run there anyway), elsewhere on f32 multiply-adds of the rounded values
 * (no faster than INT8_QK there).
 * FLASHATTN_PRECISION_INT8_QK_INT8_PV computes P V on 8-bit integers too
 * (u8 x int8 dot products on AMX-INT8 or AVX512_VNNI; elsewhere the
 * portable definition, slower than INT8_QK):
 *   - V per channel: each chunk of keys (the same chunks as K's) and
 *     channel c has scale sv = max|v| / 127 over the chunk's rows, and
 *     v8 = round(v * (127 / max|v|)) in [-127, 127];
 *   - P (after the softmax statistics and dropout) per row and kv-block:
 *     sp = max p / 255 over the row's keys in the block, p8 = round(p *
 *     (255 / max p)) in [0, 255], so the largest weight of each block
 *     keeps 8 bits (weights below 1/510 of it become 0);
 *   - O's sum takes sp * sv * (p8 . v8) per block and chunk, the integer
 *     dot product exact; the row sums l and the LSE stay those of the f32 P.
 *   A channel of a chunk holding a NaN or an infinity gets scale NaN and
 *   makes that channel NaN in every row that reads the chunk.
 * Rounding is to nearest even; a Q or K row holding a NaN or an infinity
 * gets scale NaN and makes its scores NaN (the NaN rule above, per row),
 * and is left out of its chunk's mean. The error this adds is reported in
 * docs/precision.md; results are deterministic and the same on every
 * kernel path to the rounding of the f32 softmax. flashattn_bwd and
 * flashattn_decode take only FLASHATTN_PRECISION_EXACT
 * (FLASHATTN_ERR_UNSUPPORTED).
 */

/*
 * Dropout, as FlashAttention-2 defines it: P is multiplied by mask / (1 - p)
 * after the softmax statistics (LSE is that of the undropped P), so
 *     O = (P * Z) V,  Z[i][j] = keep(b, h, i, j) / (1 - dropout_p).
 * keep depends only on (seed, offset, b, h, i, j), with b the sequence, h
 * the query head, i and j the query and key within the sequence: the same
 * for any thread count, tile size or kernel path, and in the backward,
 * which recomputes it (nothing is stored). It is Philox4x32-10: element j
 * is kept when the 16-bit half j % 2 (0: the low half) of word (j / 2) % 4
 * of philox(counter = {j / 8, i, offset low, offset high}, key = {seed low,
 * seed high ^ (b * heads_q + h) * 0x9E3779B9}) is at least
 * min(round(dropout_p * 2^16), 2^16 - 1): the keep rate is 1 - dropout_p
 * to within 2^-17 (FlashAttention-2 draws 8 bits). Sizes: i < 2^32,
 * j < 2^34, batch * heads_q <= 2^32 (FLASHATTN_ERR_UNSUPPORTED past them).
 * flashattn_decode takes none (FLASHATTN_ERR_BAD_PARAM). flashattn_dropout_mask
 * gives the mask back.
 */

/*
 * A [batch, heads, seq_q, seq_k] array of per-score values (params.bias,
 * params.mask), element (b, h, i, j) at data + b * stride_batch +
 * h * stride_head + i * stride_q + j * stride_k (elements). Each dimension
 * is the problem's or 1 (broadcast, its index is then 0); strides are
 * >= 0 and any (0 broadcasts too). batch counts sequences (dense: q's
 * batch; varlen: varlen.batch), heads the query heads, seq_q and seq_k
 * the longest sequence's (dense: q's and k's seqlen); sequence b's query i
 * and key j are (b, h, i, j), counted from the sequence's own first row.
 *   bias  dtype f32, f16 or bf16, added to the logits (after softcap and
 *         ALiBi, before the mask); -inf hides a key.
 *   mask  one byte per element, dtype ignored: nonzero attends, 0 hides
 *         (torch's bool attn_mask; Ascend's atten_mask is its negation),
 *         combined with causal and the window by AND. Each forward and
 *         backward call with more than a few query rows first reads the
 *         mask once and sorts every (q-block, kv-block) tile into hidden,
 *         visible and mixed: hidden tiles are never computed, visible ones
 *         skip the per-element mask (decode, and forwards of a few rows
 *         that run on decode's driver, apply it per element).
 * A row whose keys are all hidden gets O = 0, LSE = -inf (or the sink).
 * flashattn_fwd, flashattn_bwd and flashattn_decode take them. In decode
 * seq_q is the new query rows and seq_k anything from the longest
 * sequence's keys (appended rows included) to the cache's capacity: key j
 * is the sequence's j-th key (leftpad rows not counted), query i its i-th
 * new row.
 *   dbias (flashattn_bwd, with a bias): dL/dbias, the gradient of the
 *         logit after the bias (dS = P * (dP - D), 0 where hidden), written
 *         through the descriptor's data (cast to float *): dtype f32,
 *         elements distinct; each dimension the problem's or 1, summing
 *         over a dimension of 1, as a broadcast bias needs. seq_k must be
 *         the problem's; batch 1 only when the problem's batch is 1, heads
 *         1 only when heads_kv is 1 (FLASHATTN_ERR_UNSUPPORTED otherwise:
 *         pass those dimensions whole and sum them yourself). Elements of
 *         no sequence's (query, key) are 0. Deterministic.
 */
typedef struct flashattn_scores {
    const void *data;
    flashattn_dtype dtype;
    int64_t batch, heads, seq_q, seq_k;
    int64_t stride_batch, stride_head, stride_q, stride_k;
} flashattn_scores;

/*
 * Score modifiers, as FlashAttention-2 (softcap, ALiBi) and gpt-oss /
 * StreamingLLM (sinks) compute them. With s = scale * q_i . k_j the
 * scaled logit of query i and key j of a sequence of seq_q queries and
 * seq_k keys, the softmax runs over, in this order:
 *   softcap > 0      s = softcap * tanh(s / softcap)            (Gemma 2)
 *   alibi_slopes     s = s - slope * |i + off - j|              (BLOOM, MPT)
 *                    off = seq_k - seq_q (bottom-right) or 0 (top-left),
 *                    as the mask's diagonal; slope = alibi_slopes[h], or
 *                    alibi_slopes[b * alibi_batch_stride + h]
 *   the causal / window mask (hidden keys drop out)
 *   sinks            sink_h = sinks[h] joins every row's denominator:
 *                    P_ij = exp(s_ij) / (exp(sink_h) + sum_j' exp(s_ij')),
 *                    and adds no value; LSE = log(exp(sink_h) + sum exp(s)).
 *                    A row that sees no key then has LSE = sink_h, O = 0.
 * softcap must be finite and >= 0, slopes and sinks finite. They apply in
 * flashattn_fwd, flashattn_bwd (same params: the backward differentiates
 * through softcap; with sinks it writes dsinks[h] = -sum over the rows of
 * head h of exp(sink_h - LSE_i) * D_i, D_i = rowsum(dO_i * O_i), when
 * dsinks is not NULL) and flashattn_decode.
 */

/* Fill *p with the defaults. size is sizeof(flashattn_params) as the
 * caller was compiled: the macro below passes it, so a library newer than
 * the caller's header writes only the fields the caller has (and one older
 * than it rejects the struct at the call, with BAD_PARAM). */
FLASHATTN_API void flashattn_params_init_size(flashattn_params *p, size_t size);

#ifndef FLASHATTN_ABI_0_2
#define flashattn_params_init(p) flashattn_params_init_size((p), sizeof(flashattn_params))
static inline flashattn_params flashattn_params_default(void) {
    flashattn_params p;
    flashattn_params_init(&p);
    return p;
}
#else
/* The 0.2 entry points, kept for binaries built against 0.2: they fill
 * only 0.2's fields (which end at num_splits). */
struct flashattn_params_0_2 {
    size_t struct_size;
    float scale;
    int causal;
    int64_t window_left, window_right;
    flashattn_align align;
    int block_m, block_n, num_threads, deterministic;
    uint32_t reserved_flags;
    int num_splits;
};
FLASHATTN_API void flashattn_params_init(flashattn_params *p);
FLASHATTN_API struct flashattn_params_0_2 flashattn_params_default(void);
#endif

/* keep[t] = 1 if dropout keeps element (b, h, i, j0 + t) of a problem of
 * heads_q query heads under p's dropout_p, seed and offset, else 0, for
 * t < n (see "Dropout"). For tests and for returning the mask
 * (FlashAttention-2's return_attn_probs). */
FLASHATTN_API flashattn_status flashattn_dropout_mask(const flashattn_params *p, int64_t heads_q,
                                                      int64_t b, int64_t h, int64_t i, int64_t j0,
                                                      int64_t n, uint8_t *keep);

/*
 * Variable-length batches: packed sequences, as FlashAttention-2's varlen
 * functions (cu_seqlens) and Ascend's TND layout (actual_seq_qlen/kvlen).
 * Set params.varlen to describe them; every call then reads its tensors as
 * one batch entry holding the sequences one after another:
 *
 *   Q, O  [1, total_q, heads_q, head_dim]     (dQ likewise)
 *   K, V  [1, total_k, heads_kv, head_dim]    (dK, dV likewise)
 *   LSE   [heads_q, total_q] float32, contiguous (FlashAttention-2's varlen layout)
 *
 * Sequence b has the queries cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 and
 * the keys cu_seqlens_k[b] .. cu_seqlens_k[b] + n_b - 1, where n_b =
 * seqused_k[b] when seqused_k is given (keys past it are never read), else
 * cu_seqlens_k[b + 1] - cu_seqlens_k[b]. Each sequence is computed exactly
 * as a dense call with its own seq_q and seq_k: causal and window aligned
 * to its own lengths, GQA, empty sequences, rows that see no key (O = 0,
 * LSE = -inf). Work is built from the real lengths: padding costs nothing.
 * With the same block_m and block_n given, each sequence's O, LSE and
 * gradients are bit-identical to a dense call on that sequence alone. With
 * automatic tiles and no boolean mask the forward gives each sequence the
 * tiles a dense call on it would choose, so its O and LSE are that call's
 * too (unless that call runs as a decode: few query rows, see
 * flashattn_fwd); otherwise the two may choose different tiles and differ
 * by rounding within the usual bound. The deterministic flag keeps its
 * guarantee.
 *
 * cu_seqlens_q and cu_seqlens_k start at 0, never decrease, and end at
 * total_q (q's seqlen) and total_k (k's seqlen); seqused_k[b] is in
 * 0 .. cu_seqlens_k[b + 1] - cu_seqlens_k[b]. Anything else is
 * FLASHATTN_ERR_BAD_SHAPE, nothing written. The workspace depends on the
 * longest sequence (it is O(max_seqlen * head_dim) plus per-thread tiles),
 * so flashattn_*_workspace_size reads cu_seqlens too.
 *
 * In flashattn_decode, cu_seqlens_q packs the queries the same way (each
 * sequence brings its own number of new query rows: chunked prefill,
 * speculative decoding), k_new and v_new, when given, are packed like q
 * ([1, total_q, heads_kv, head_dim]: sequence b appends its own
 * cu_seqlens_q[b + 1] - cu_seqlens_q[b] rows), the cache's seqlens give
 * the keys, and cu_seqlens_k and seqused_k must be NULL.
 */
typedef struct flashattn_varlen {
    size_t struct_size;          /* sizeof(flashattn_varlen), set by _init */
    int64_t batch;               /* number of sequences */
    const int32_t *cu_seqlens_q; /* [batch + 1] */
    const int32_t *cu_seqlens_k; /* [batch + 1]; NULL in flashattn_decode */
    const int32_t *seqused_k;    /* [batch] or NULL */
} flashattn_varlen;

FLASHATTN_API void flashattn_varlen_init_size(flashattn_varlen *v, size_t size);
#define flashattn_varlen_init(v) flashattn_varlen_init_size((v), sizeof(flashattn_varlen))

/*
 * Forward attention, two-phase (as Ascend's aclnn GetWorkspaceSize + run):
 *
 *   size_t ws;
 *   flashattn_fwd_workspace_size(&q, &k, &v, &o, lse, &p, &ws);
 *   flashattn_fwd(&q, &k, &v, &o, lse, &p, buffer_of_ws_bytes, ws);
 *
 * The workspace is O((seq_k + threads * block) * head_dim) bytes, never
 * O(seq_q * seq_k). Passing workspace = NULL makes flashattn_fwd allocate
 * and free it itself (workspace_bytes is then ignored); its fresh pages are
 * then paid on every call, a visible share of a short one, so callers that
 * call repeatedly keep one workspace, as the Python package does per
 * thread (and one more for flashattn_bwd: the two calls lay the workspace
 * out differently, and on several threads each would find its lines last
 * written by another core). The workspace need not be zeroed; 64-byte
 * alignment is best but not required.
 * lse may be NULL. On any error nothing is written to o or lse.
 * With few query rows per kv-head (seq_q * heads_q / heads_kv up to 64,
 * or up to 256 with at least 8 keys a row) and no tile size given, the
 * call runs as a decode against K and V (read where they lie, keys split
 * in a count that depends on the sizes only). Below 16 such rows a call
 * with lse = NULL sums S = Q K^T in another order than flashattn_bwd
 * recomputes it (in SIMD lanes, faster there), so o may differ in
 * rounding between calls with and without lse; a call with lse always
 * gives the S and LSE that flashattn_bwd expects.
 */
FLASHATTN_API flashattn_status flashattn_fwd_workspace_size(
    const flashattn_tensor *q, const flashattn_tensor *k, const flashattn_tensor *v,
    const flashattn_tensor *o, const float *lse, const flashattn_params *p,
    size_t *workspace_bytes);

FLASHATTN_API flashattn_status flashattn_fwd(
    const flashattn_tensor *q, const flashattn_tensor *k, const flashattn_tensor *v,
    const flashattn_tensor *o, float *lse, const flashattn_params *p,
    void *workspace, size_t workspace_bytes);

/* ---- Decode: attention against a KV cache (inference) -------------------
 *
 * One generation step (or a chunk of prompt) against a cache of keys and
 * values, as FlashAttention-2's flash_attn_with_kvcache.
 *
 * The cache, contiguous or paged (initialise with flashattn_kv_cache_init):
 *   contiguous (block_table == NULL):
 *     k, v   [batch, capacity, heads_kv, head_dim (k) / head_dim_v (v)], any
 *            strides (stride_dim 1)
 *   paged (block_table != NULL), as vLLM's and FlashAttention-2's paged KV:
 *     k, v   the page pool [num_pages, page_size, heads_kv, head_dim (v:
 *            head_dim_v)]
 *            (its batch dimension counts pages, its seqlen is the page size)
 *     block_table  int32 [batch, max_pages_per_seq], row-major: row j of
 *            sequence b lives in page block_table[b][j / page_size], slot
 *            j % page_size. Only the entries covering a sequence's rows
 *            (after the append) are read; each must be in [0, num_pages).
 *     capacity = max_pages_per_seq * page_size
 *   seqlens_i32 or seqlens_i64 (exactly one) [batch]: rows already valid in
 *     each sequence, before this call's append. The call does not change
 *     them: add seq_new yourself afterwards.
 *   k and v share one dtype and one shape: f32, f16, bf16, or a quantised
 *     one (int8, fp8 e4m3 or e5m2) with k_scale and v_scale (see
 *     flashattn_scale_kind; each of k and v has its own kind). The
 *     attention is the exact one over the dequantised cache (element *
 *     scale, in f32), computed without writing that cache out: the kernels
 *     widen 8-bit rows in registers, per-token scales multiply the scores
 *     (K) and the weights P (V), fixed ones fold into q (K) and into O (V).
 *     Appending quantises each new row: x is stored as narrow(x / scale),
 *     round to nearest even, saturating at the dtype's largest finite value
 *     (int8 +-127, e4m3 +-448, e5m2 +-57344; infinities too); NaN stays NaN
 *     in fp8, becomes 0 in int8. A per-token scale is max|x| / that largest
 *     value (0 for an all-zero row; NaN for a row holding NaN or Inf, which
 *     then reads as NaN).
 */
/* How a quantised cache's scales are laid out: element e of the cache
 * stands for e * scale.
 *   PER_TOKEN    k_scale / v_scale [batch, seqlen, heads_kv, 1] like the
 *                cache tensor (paged: [num_pages, page_size, ...]), any
 *                strides: one scale per (row, kv-head), which the append
 *                computes and writes for the rows it adds.
 *   PER_CHANNEL  [1, 1, heads_kv, head_dim] (v: head_dim_v): one scale per
 *                (kv-head, channel), fixed (calibrated beforehand, as KIVI
 *                does for K, whose outliers sit in a few channels).
 *   PER_HEAD     [1, 1, heads_kv, 1]: one per kv-head, fixed (stride_head 0
 *                gives vLLM's one scale per tensor).
 * Fixed scales must be finite and > 0, and the append quantises with them. */
typedef enum flashattn_scale_kind {
    FLASHATTN_SCALE_PER_TOKEN = 0,
    FLASHATTN_SCALE_PER_CHANNEL = 1,
    FLASHATTN_SCALE_PER_HEAD = 2
} flashattn_scale_kind;

typedef struct flashattn_kv_cache {
    size_t struct_size; /* sizeof(flashattn_kv_cache), set by _init */
    flashattn_tensor k, v;
    const int32_t *block_table; /* NULL: contiguous cache */
    int64_t max_pages_per_seq;  /* paged only */
    const int32_t *seqlens_i32;
    const int64_t *seqlens_i64;
    /* Optional (NULL: off), as FlashAttention-2's flash_attn_with_kvcache: */
    const int32_t *batch_idx; /* [batch]: sequence b uses cache entry batch_idx[b] (contiguous only) */
    const int32_t *leftpad;   /* [batch]: sequence b's keys start at cache row leftpad[b] */
    /* Rotary embedding of q and k_new: cos and sin [rotary_len, rotary_dim / 2]
     * float32, row-major; rotary_dim even, <= head_dim (see flashattn_decode). */
    const float *rotary_cos, *rotary_sin;
    int64_t rotary_len, rotary_dim;
    int rotary_interleaved;   /* 1: rotate pairs (0,1), (2,3)...; 0: halves (GPT-NeoX) */
    /* Quantised caches (k and v of dtype FLASHATTN_INT8, FP8_E4M3 or
     * FP8_E5M2): the scales, float32, and how they are laid out (below). */
    flashattn_tensor k_scale, v_scale;
    flashattn_scale_kind k_scale_kind, v_scale_kind;
} flashattn_kv_cache;

/* Fill *c with the defaults (size: as flashattn_params_init_size). */
FLASHATTN_API void flashattn_kv_cache_init_size(flashattn_kv_cache *c, size_t size);
#ifndef FLASHATTN_ABI_0_2
#define flashattn_kv_cache_init(c) flashattn_kv_cache_init_size((c), sizeof(flashattn_kv_cache))
#else
FLASHATTN_API void flashattn_kv_cache_init(flashattn_kv_cache *c); /* 0.2's fields only */
#endif

/* Most parts params.num_splits may ask for. */
#define FLASHATTN_MAX_SPLITS 128

/*
 * Decode, two-phase like the forward:
 *   q       [batch, seq_q, heads_q, head_dim]   any dtype
 *   k_new, v_new  [batch, seq_new, heads_kv, head_dim (v_new: head_dim_v)], any dtype, or both
 *           NULL: written in place into each sequence's cache rows
 *           seqlens[b] .. seqlens[b] + seq_new - 1 (converted to the cache's
 *           dtype, round to nearest even) before the attention, which then
 *           covers them.
 *   o       [batch, seq_q, heads_q, head_dim_v] any dtype
 *   lse     [batch, heads_q, seq_q] float32, natural log, or NULL
 * Sequence b attends over its len_b = seqlens[b] + seq_new rows exactly as
 * flashattn_fwd does with seq_k = len_b: causal and window are aligned to
 * each sequence's own length (bottom-right: the last query is row len_b - 1;
 * top-left: query i is row i). len_b = 0 gives O = 0 and LSE = -inf.
 * params.varlen packs q (and k_new) by sequence instead (see
 * flashattn_varlen): seq_new is then each sequence's own query count.
 *
 * The cache's optional fields, as FlashAttention-2's:
 *   batch_idx  sequence b reads and appends cache entry batch_idx[b], in
 *              0 .. k.batch - 1 (contiguous caches only; entries must not
 *              repeat when appending, not checked).
 *   leftpad    sequence b's keys are cache rows leftpad[b] .. seqlens[b] +
 *              seq_new - 1 (seqlens[b] stays the row where the append
 *              starts): len_b = seqlens[b] - leftpad[b] + seq_new, and
 *              0 <= leftpad[b] <= seqlens[b].
 *   rotary     before the attention, q's rows and k_new's rows are rotated
 *              (rotary embedding on their first rotary_dim elements) at
 *              positions p that are cache rows, as FlashAttention-2's
 *              (with leftpad too):
 *                k_new row j            p = seqlens[b] + j
 *                q row i, causal or a window narrower than the capacity
 *                                       p = seqlens[b] + i
 *                q row i, otherwise     p = seqlens[b] (every row)
 *              For the pair (x1, x2) of a row, c = rotary_cos[p][t], s =
 *              rotary_sin[p][t]: x1' = x1 c - x2 s, x2' = x1 s + x2 c, with
 *              the pair (2t, 2t + 1) interleaved, else (t, t + rotary_dim/2).
 *              Every position used must be < rotary_len. q is rotated in
 *              f32 and never written back; k_new is rotated into the cache.
 *
 * The query heads sharing a kv-head are processed together, so each cache
 * element is read once per kv-head, not once per query head. When
 * batch * heads_kv gives the threads few work items (the automatic choice
 * aims at 8 a thread, so that a thread slowed by other work leaves its
 * items to the others), each sequence's keys are split into
 * params.num_splits parts (0: automatic; 1..FLASHATTN_MAX_SPLITS) computed in
 * parallel and merged exactly as flashattn_merge does. Results are
 * bit-identical whatever the thread count for a given num_splits; the
 * automatic choice follows the thread count, so set num_splits when you need
 * bitwise reproducibility across thread counts. block_n: keys per step
 * (0: automatic); block_m: query rows per kv-head in a work item, whole
 * query positions of heads_q / heads_kv rows each (0: automatic).
 *
 * The workspace depends on shapes, capacity and params, never on the seqlens
 * values, so one workspace serves every step of a generation.
 * On any error nothing is written, neither to the cache nor to o and lse:
 * seqlens < 0 or beyond the capacity, an append that would overflow it,
 * block-table entries out of range, a workspace too small... Not checked:
 * two sequences appending into the same page, or a cache that overlaps q,
 * o or k_new.
 */
FLASHATTN_API flashattn_status flashattn_decode_workspace_size(
    const flashattn_tensor *q, const flashattn_kv_cache *cache, const flashattn_tensor *k_new,
    const flashattn_tensor *v_new, const flashattn_tensor *o, const float *lse,
    const flashattn_params *p, size_t *workspace_bytes);

FLASHATTN_API flashattn_status flashattn_decode(
    const flashattn_tensor *q, const flashattn_kv_cache *cache, const flashattn_tensor *k_new,
    const flashattn_tensor *v_new, const flashattn_tensor *o, float *lse,
    const flashattn_params *p, void *workspace, size_t workspace_bytes);

/*
 * Quantise a float K or V tensor into an 8-bit cache tensor (a cache
 * filled once from a prompt's keys, say) by the append's rule (see
 * flashattn_kv_cache):
 *   src    [batch, seq, heads, head_dim]  f32, f16 or bf16
 *   dst    the same shape, FLASHATTN_INT8, FP8_E4M3 or FP8_E5M2, any strides
 *   scale  float32, laid out for `kind` against dst's shape
 *          (flashattn_scale_kind). PER_TOKEN: written, one per row.
 *          PER_CHANNEL / PER_HEAD: with calibrate = 1 written first, as
 *          max|x| over every row of src per channel (per head) divided by
 *          the dtype's largest value (the smallest normal float where that
 *          is 0, so that the scale stays > 0); with calibrate = 0 read (each
 *          finite and > 0).
 *   num_threads  0: the OpenMP default.
 * Calibrating on a src that holds a NaN or an infinity is
 * FLASHATTN_ERR_BAD_PARAM. On any error nothing is written.
 */
FLASHATTN_API flashattn_status flashattn_quantize(const flashattn_tensor *src, const flashattn_tensor *dst,
                                                  const flashattn_tensor *scale, flashattn_scale_kind kind,
                                                  int calibrate, int num_threads);

/*
 * Merge partial results over disjoint sets of keys into the result over
 * their union, exactly (split-KV, long contexts processed in pieces,
 * sequence-parallel and ring attention across processes):
 *     LSE = log sum_n exp(LSE_n)      O = sum_n exp(LSE_n - LSE) O_n
 *   o_parts[n]    [batch, seq, heads, head_dim], any dtype (f32 partials keep
 *                 the merge exact to f32 rounding)
 *   lse_parts[n]  [batch, heads, seq] float32, natural log, as flashattn_fwd
 *                 writes it; finite or -inf (NaN, from a part that met a
 *                 NaN, makes the row's O and LSE NaN)
 *   o             same shape, any dtype; lse [batch, heads, seq] or NULL
 * A part whose LSE is -inf for a row contributes nothing to that row (its O
 * row is not read); a row whose parts are all -inf gets O = 0, LSE = -inf.
 * o may be o_parts[k] with the same strides and lse may be lse_parts[k]
 * (accumulating in place): each row is read in full before it is written.
 * p may be NULL; only num_threads is used.
 */
FLASHATTN_API flashattn_status flashattn_merge(int64_t n_parts, const flashattn_tensor *o_parts,
                                               const float *const *lse_parts,
                                               const flashattn_tensor *o, float *lse,
                                               const flashattn_params *p);

/* ---- Backward: gradients for training ----------------------------------
 *
 * FlashAttention-2's backward pass, two-phase like the forward:
 *
 *   flashattn_bwd_workspace_size(&q, &k, &v, &o, &dout, lse, &dq, &dk, &dv, &p, &ws);
 *   flashattn_bwd(&q, &k, &v, &o, &dout, lse, &dq, &dk, &dv, &p, buffer, ws);
 *
 * Inputs:
 *   q, k, v, p  as given to flashattn_fwd (same options: causal, window,
 *               align, scale, GQA/MQA, seq_q != seq_k, any lengths)
 *   o, lse      what flashattn_fwd returned for them; lse is required here
 *               ([batch, heads_q, seq_q] float32, natural log)
 *   dout        dL/dO, o's shape, any dtype
 * Outputs, each any dtype, rounded once at the end from f32:
 *   dq          dL/dQ, q's shape
 *   dk, dv      dL/dK, dL/dV, k's shape; under GQA/MQA each sums the
 *               gradients of every query head of its kv-head's group
 * All arithmetic is f32. P is recomputed tile by tile as exp(scale Q K^T -
 * LSE), never stored whole; D = rowsum(dO * O) uses o as given. A row whose
 * lse is -inf (it saw no key) contributes nothing and gets dq = 0; keys no
 * query sees get dk = dv = 0. Its sums run in f32 chains as long as a
 * sequence, which stop taking terms near 2^24 of them, so the backward
 * takes at most FLASHATTN_MAX_BWD_SEQ keys and as many query rows per
 * kv-head (seq_q * heads_q / heads_kv) a sequence: longer ones get
 * FLASHATTN_ERR_UNSUPPORTED. (The forward and decode fold their sums into
 * double every 65536 keys and take any length.)
 *
 * Work is parallel over (batch, kv-head, block of block_n keys); each work
 * item owns its dk/dv rows, so dk and dv are always bit-identical whatever
 * the thread count. dq gathers contributions from every key block:
 *   params.deterministic = 1: the key blocks are dealt into at most 8 fixed
 *     chunks, each accumulating dq in its own f32 buffer, summed in chunk
 *     order: dq is bit-identical across runs and thread counts. Costs up to
 *     8 f32 copies of dq instead of one for the kv-heads in flight (fewer
 *     when 8 would pass a 128 MiB budget) and keeps at most (kv-heads in
 *     flight x chunks) threads busy.
 *   params.deterministic = 0 (default): one f32 dq buffer shared by all work
 *     items, added to under a lock per block of queries: with more than one
 *     thread the order of the additions varies, so dq may differ in its
 *     last bits from run to run.
 * block_n: keys per work item (0: automatic, at most 4096); block_m: query
 * rows per tile (0: automatic, at most 4096), rounded up to a multiple of
 * the kernel path's column tile (16 floats scalar and avx2, 32 avx512).
 *
 * The workspace is O(seq * head_dim) per kv-head in flight plus per-thread
 * tiles, never O(seq_q * seq_k); NULL makes flashattn_bwd allocate it. dq,
 * dk and dv must not overlap each other or the inputs (not checked, except
 * that each gives its rows distinct memory). On any error nothing is written
 * to dq, dk or dv.
 */
FLASHATTN_API flashattn_status flashattn_bwd_workspace_size(
    const flashattn_tensor *q, const flashattn_tensor *k, const flashattn_tensor *v,
    const flashattn_tensor *o, const flashattn_tensor *dout, const float *lse,
    const flashattn_tensor *dq, const flashattn_tensor *dk, const flashattn_tensor *dv,
    const flashattn_params *p, size_t *workspace_bytes);

FLASHATTN_API flashattn_status flashattn_bwd(
    const flashattn_tensor *q, const flashattn_tensor *k, const flashattn_tensor *v,
    const flashattn_tensor *o, const flashattn_tensor *dout, const float *lse,
    const flashattn_tensor *dq, const flashattn_tensor *dk, const flashattn_tensor *dv,
    const flashattn_params *p, void *workspace, size_t workspace_bytes);

/* Short reason for a status code (never NULL). */
FLASHATTN_API const char *flashattn_strerror(flashattn_status s);
/* Details of the last error on this thread ("" if none), e.g. which tensor. */
FLASHATTN_API const char *flashattn_last_error(void);

/* "0.3.0" */
FLASHATTN_API const char *flashattn_version(void);
/* Name of the kernel path in use: "scalar" (portable C), "avx2", "avx512",
 * "avx512bf16" (AVX-512 with bf16 inputs on VDPBF16PS), "amx" (AVX-512
 * with bf16 inputs on AMX tiles), and on 64-bit Arm "neon" (Advanced
 * SIMD) or "sve" (SVE at the CPU's vector length). It is chosen once, as
 * the best of scalar, avx2, avx512, amx and neon that the CPU and OS run;
 * FLASHATTN_ISA=scalar|avx2|avx512|avx512bf16|amx|neon|sve forces one (a
 * path the CPU lacks falls back to the automatic choice), and is the only
 * way to get avx512bf16, which is slower than widening bf16 wherever
 * measured, or sve, which no run on a CPU has measured (docs/arm.md). On
 * Linux, choosing amx asks the kernel once for the process's AMX tile
 * state (arch_prctl), which enlarges its signal frames;
 * FLASHATTN_ISA=avx512 keeps the library from asking. */
FLASHATTN_API const char *flashattn_isa(void);

/* What `flashattn info` prints, for bug reports: version, the kernel path
 * in use and those this CPU runs, the instruction FLASHATTN_PRECISION_INT8_QK's
 * scores run on, the CPU, its caches as the tile planner
 * sees them, the thread count; lines ending in '\n'. The text stays valid
 * until this thread's next call. */
FLASHATTN_API const char *flashattn_info(void);

#ifdef __cplusplus
}
#endif
#endif /* FLASHATTN_H */
