/*
 * libFuzzer harness over the C API: flashattn_fwd, flashattn_bwd,
 * flashattn_decode and flashattn_merge (through their _ex forms, on a
 * kernel table the input picks), with shapes, layouts, options, score
 * modifiers, dropout, packed sequences, caches and workspaces read from
 * the fuzzer's bytes, then up to three hostile edits of the call (a field
 * set to a value that is wrong, huge, negative or merely unusual, a
 * pointer made NULL).
 * Inputs are finite and small; every buffer holds exactly what its
 * descriptor reaches. The properties (docs/reliability.md lists them in
 * full):
 *   - no call crashes, hangs or trips ASan/UBSan, whatever it is given;
 *   - a call that fails returns a status, and leaves every output (o, lse,
 *     dq, dk, dv, dsinks, the cache) byte for byte as it was;
 *   - a call the header forbids (a negative size or stride, a bad dtype,
 *     shapes that disagree, a non-finite scale...) fails, and one built
 *     without edits succeeds;
 *   - the workspace query fails for what the call refuses, and a workspace
 *     one byte short is refused as too small (or, with nothing to compute,
 *     taken without being written past);
 *   - a call that succeeds matches the FP64 reference (src/reference) under
 *     the unit tests' rules: test_forward's for O and LSE (decode's per
 *     sequence over its cache rows, the appended rows rounded into the
 *     cache and nothing else of it changed), test_backward's for dQ, dK,
 *     dV (fa_bwd_pass_bounds), test_modifiers' for dsinks, test_merge's for
 *     a merge; with dropout too (the plain f32 yardsticks apply the same
 *     keep mask); an 8-bit cache's rows dequantised (element * scale).
 * The first byte picks the entry point; every later choice reads on.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/decode.h"
#include "api/forward.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "fuzz.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_f64.h"
#include "reference/attn_std_f32.h"
#include "reference/compare.h"
#include "reference/random.h"
#include "testutil.h"

#define MAXB 4   /* sequences */
#define MAXH 12  /* query heads */

typedef struct {
    fz_in in;
    uint64_t rng;
    const fa_kernels *kern;
    int edits;      /* hostile edits made: 0, a valid call, must succeed */
    int tiles;      /* block_m or block_n given (which the kernels may refuse) */
    int invalid;    /* an edit the header forbids: the call must fail */
    int compare;    /* a success is held to the reference */
    char ctx[1024];
} fz;

static void note(fz *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(fz *f, const char *fmt, ...) {
    const size_t at = strlen(f->ctx);
    if (at + 2 >= sizeof f->ctx) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->ctx + at, sizeof f->ctx - at, fmt, ap);
    va_end(ap);
}

static flashattn_dtype pick_dtype(fz *f) { return (flashattn_dtype)fz_below(&f->in, 3); }

/* Strides for t's sizes: 0 [b,s,h,d], 1 [b,h,s,d], 2 and 3 the same with
 * rows padded, 4 batch broadcast (stride 0), 5 heads broadcast. Outputs
 * take 0..3 only (a broadcast output aliases its rows). */
static void lay_out(flashattn_tensor *t, int lay) {
    const int64_t s = t->seqlen, h = t->heads, row = t->head_dim + (lay == 2 ? 3 : lay == 3 ? 1 : 0);
    t->stride_dim = 1;
    if (lay == 1 || lay == 3) {
        t->stride_seq = row, t->stride_head = row * s, t->stride_batch = row * s * h;
    } else {
        t->stride_head = row, t->stride_seq = row * h, t->stride_batch = row * h * s;
    }
    if (lay == 4) t->stride_batch = 0;
    if (lay == 5) t->stride_head = 0, t->stride_seq = row, t->stride_batch = row * s;
}

static flashattn_tensor shape(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d, int lay) {
    flashattn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = fz_unallocated;
    t.dtype = dt;
    t.batch = b, t.seqlen = s, t.heads = h, t.head_dim = d;
    lay_out(&t, lay);
    return t;
}

/* ---- hostile edits ------------------------------------------------------- */

/* a + b and a * b saturated at the int64 range (an earlier edit may have
 * left a field at either end). */
static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}

/* Set one field of one of the n tensors to a value the fuzzer picks
 * (whether the call is then one the header forbids is judged from the
 * final state: a later edit may set the field again). */
static void edit_tensor(fz *f, flashattn_tensor **ts, const char *const *names, int n) {
    const int which = (int)fz_below(&f->in, (unsigned)n);
    flashattn_tensor *t = ts[which];
    const int field = (int)fz_below(&f->in, 10);
    int64_t *sizes[4] = {&t->batch, &t->seqlen, &t->heads, &t->head_dim};
    int64_t *strides[4] = {&t->stride_batch, &t->stride_seq, &t->stride_head, &t->stride_dim};
    if (field == 0) {
        t->dtype = (flashattn_dtype)FZ_PICK(&f->in, -1, 3, 7, 1 << 30, 0, 1, 2);
        note(f, " edit:%s.dtype=%d", names[which], (int)t->dtype);
    } else if (field == 1) {
        t->data = NULL;
        note(f, " edit:%s.data=NULL", names[which]);
    } else if (field < 6) {
        int64_t *x = sizes[field - 2];
        *x = FZ_PICK(&f->in, -1, INT64_MIN, 0, sat_add(*x, 1), sat_add(*x, -1), (int64_t)1 << 40, INT64_MAX,
                     (int64_t)1 << 62, 257, 1);
        note(f, " edit:%s.size%d=%lld", names[which], field - 2, (long long)*x);
    } else {
        int64_t *x = strides[field - 6];
        *x = FZ_PICK(&f->in, -1, sat_mul(*x, -1), 0, sat_add(*x, 1), sat_add(sat_mul(*x, 2), 3),
                     (int64_t)1 << 62, INT64_MAX, INT64_MIN, 1, 2);
        note(f, " edit:%s.stride%d=%lld", names[which], field - 6, (long long)*x);
    }
}

/* Whether the header forbids t in any call: an unknown dtype, a negative
 * size or stride, no head, a head_dim out of range, stride_dim not 1, an
 * extent past int64, no data for elements it has. The 8-bit dtypes are a
 * KV cache's only (cache_tensor_forbidden). */
static int any_tensor_forbidden(const flashattn_tensor *t, int cache) {
    if (!(fa_dtype_float(t->dtype) || (cache && fa_dtype_quant(t->dtype))) || t->batch < 0 || t->seqlen < 0 || t->heads < 1 || t->head_dim < 1 ||
        t->head_dim > FLASHATTN_MAX_HEAD_DIM || t->stride_dim != 1 || t->stride_batch < 0 || t->stride_seq < 0 ||
        t->stride_head < 0)
        return 1;
    const int64_t ext = fz_extent(t);
    const int far = t->stride_batch > FLASHATTN_MAX_STRIDE || t->stride_seq > FLASHATTN_MAX_STRIDE ||
                    t->stride_head > FLASHATTN_MAX_STRIDE; /* (refused unless the tensor is empty) */
    return ext < 0 || (ext > 0 && (!t->data || far));
}

static int tensor_forbidden(const flashattn_tensor *t) { return any_tensor_forbidden(t, 0); }
static int cache_tensor_forbidden(const flashattn_tensor *t) { return any_tensor_forbidden(t, 1); }

/* Whether every (b, s, h) row of t has memory of its own (what an output
 * needs): sorted by stride, each dimension steps over all inside it. */
static int rows_own_memory(const flashattn_tensor *t) {
    int64_t size[3] = {t->batch, t->seqlen, t->heads}, stride[3] = {t->stride_batch, t->stride_seq, t->stride_head};
    for (int a = 0; a < 3; a++)
        if (size[a] == 0) return 1;
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (stride[b] < stride[a]) {
                const int64_t x = stride[a], n = size[a];
                stride[a] = stride[b], size[a] = size[b], stride[b] = x, size[b] = n;
            }
    int64_t reach = t->head_dim;
    for (int a = 0; a < 3; a++) {
        if (size[a] <= 1) continue;
        if (stride[a] < reach) return 0;
        reach = stride[a] * (size[a] - 1) + reach;
    }
    return 1;
}

/* Whether the header forbids these params, fields past struct_size unread
 * (so at their defaults); decode takes no dropout and at most
 * FLASHATTN_MAX_SPLITS splits. */
static int params_forbidden(const flashattn_params *user, int decode) {
    if (user->struct_size > sizeof *user) return 1;
    flashattn_params p;
    flashattn_params_init(&p);
    memcpy(&p, user, user->struct_size < sizeof p ? user->struct_size : sizeof p);
    return !isfinite(p.scale) || (p.causal != 0 && p.causal != 1) || p.window_left < -1 ||
           p.window_right < -1 || (p.align != FLASHATTN_ALIGN_BOTTOM_RIGHT && p.align != FLASHATTN_ALIGN_TOP_LEFT) ||
           p.block_m < 0 || p.block_n < 0 || p.num_threads < 0 || p.reserved_flags != 0 ||
           !(p.softcap >= 0.0f) || isinf(p.softcap) || !(p.dropout_p >= 0.0f && p.dropout_p < 1.0f) ||
           (decode && (p.dropout_p != 0.0f || p.num_splits < 0 || p.num_splits > FLASHATTN_MAX_SPLITS));
}

/* Whether the library reads params.varlen (it lies within struct_size). */
static int reads_varlen(const flashattn_params *p) {
    return p->struct_size >= offsetof(flashattn_params, varlen) + sizeof p->varlen;
}

static int same_dims(const flashattn_tensor *a, const flashattn_tensor *b) {
    return a->batch == b->batch && a->seqlen == b->seqlen && a->heads == b->heads && a->head_dim == b->head_dim;
}

/* Whether the header forbids these shapes in a forward: o is q's shape, v
 * k's, the batches and head_dims agree, heads_q a multiple of heads_kv,
 * q, k and v one dtype; packed sequences in one batch entry. */
static int fwd_shapes_forbidden(const flashattn_tensor *q, const flashattn_tensor *k, const flashattn_tensor *v,
                                const flashattn_tensor *o, int varlen) {
    return !same_dims(q, o) || !same_dims(k, v) || q->batch != k->batch || q->head_dim != k->head_dim ||
           k->heads < 1 || q->heads % k->heads != 0 || q->dtype != k->dtype || q->dtype != v->dtype ||
           (varlen && q->batch != 1);
}

/* One field of the params. */
static void edit_params(fz *f, flashattn_params *p) {
    switch (fz_below(&f->in, 13)) {
    case 12: {
        static const float v[] = {NAN, -0.1f, 1.0f, 1.5f, 0.25f, 0x1p-32f};
        p->dropout_p = v[fz_below(&f->in, sizeof v / sizeof v[0])];
        note(f, " edit:dropout_p=%g", (double)p->dropout_p);
        break;
    }
    case 0:
        p->struct_size = (size_t)FZ_PICK(&f->in, 0, 8, (int64_t)offsetof(flashattn_params, num_splits),
                                         (int64_t)offsetof(flashattn_params, varlen), (int64_t)sizeof *p + 8,
                                         (int64_t)sizeof *p + 4096, -1);
        note(f, " edit:struct_size=%zu", p->struct_size);
        break;
    case 1: {
        static const float v[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, -1e-30f, 1e-40f, -2.0f, 64.0f};
        p->scale = v[fz_below(&f->in, sizeof v / sizeof v[0])];
        note(f, " edit:scale=%g", (double)p->scale);
        break;
    }
    case 2:
        p->causal = (int)FZ_PICK(&f->in, 2, -1, 100, 1, 0);
        note(f, " edit:causal=%d", p->causal);
        break;
    case 3:
    case 4: {
        int64_t *w = fz_chance(&f->in, 2) ? &p->window_left : &p->window_right;
        *w = FZ_PICK(&f->in, -2, INT64_MIN, INT64_MAX, INT64_MAX - 1, (int64_t)1 << 62, 0, 1, 1000);
        note(f, " edit:window=(%lld,%lld)", (long long)p->window_left, (long long)p->window_right);
        break;
    }
    case 5:
        p->align = (flashattn_align)FZ_PICK(&f->in, 2, -1, 7);
        note(f, " edit:align=%d", (int)p->align);
        break;
    case 6: {
        int *b = fz_chance(&f->in, 2) ? &p->block_m : &p->block_n;
        *b = (int)FZ_PICK(&f->in, -1, 1, 3, 8, 15, 16, 17, 31, 48, 96, 4096, 4097, 1 << 20, INT32_MAX, INT32_MIN);
        f->tiles = 1;
        note(f, " edit:block=(%d,%d)", p->block_m, p->block_n);
        break;
    }
    case 7:
        p->num_threads = (int)FZ_PICK(&f->in, -1, INT32_MIN, 5, 8);
        note(f, " edit:threads=%d", p->num_threads);
        break;
    case 8:
        p->reserved_flags = (uint32_t)FZ_PICK(&f->in, 1, 0x80000000);
        note(f, " edit:reserved_flags=%u", p->reserved_flags);
        break;
    case 9:
        p->num_splits = (int)FZ_PICK(&f->in, -1, 129, INT32_MAX, 128, 1, 7);
        note(f, " edit:num_splits=%d", p->num_splits);
        break;
    case 10: {
        static const float v[] = {-1.0f, NAN, INFINITY, 1e-30f, 1e30f};
        p->softcap = v[fz_below(&f->in, sizeof v / sizeof v[0])];
        note(f, " edit:softcap=%g", (double)p->softcap);
        break;
    }
    default:
        p->alibi_batch_stride = FZ_PICK(&f->in, -1, 1, 1000, INT64_MAX);
        note(f, " edit:alibi_batch_stride=%lld", (long long)p->alibi_batch_stride);
        break;
    }
}

/* ---- the forward and its reference ------------------------------------ */

/* The largest |q| |k| sum a logit can reach, times the scale: past about
 * FLT_MAX the f32 logits overflow (issue 24 item 9, not held to the
 * reference here). */
static double logit_bound(const flashattn_tensor *q, const flashattn_tensor *k, const flashattn_params *p) {
    double mq = 0, mk = 0;
    for (int64_t b = 0; b < q->batch; b++)
        for (int64_t s = 0; s < q->seqlen; s++)
            for (int64_t h = 0; h < q->heads; h++)
                for (int64_t c = 0; c < q->head_dim; c++) mq = fmax(mq, fabs(fa_tensor_get(q, b, s, h, c)));
    for (int64_t b = 0; b < k->batch; b++)
        for (int64_t s = 0; s < k->seqlen; s++)
            for (int64_t h = 0; h < k->heads; h++)
                for (int64_t c = 0; c < k->head_dim; c++) mk = fmax(mk, fabs(fa_tensor_get(k, b, s, h, c)));
    const double scale = !p || p->scale == 0.0f ? 1.0 / sqrt((double)q->head_dim) : fabs((double)p->scale);
    return mq * mk * (double)q->head_dim * scale;
}

/* Error of x against ref beyond one unit in the last place of dt: a single
 * rounding to a 16-bit output flipped by f32 noise, which the unit tests'
 * maxima over thousands of elements never isolate but a one-element call
 * does. Exact for f32 (no allowance). */
static double beyond_rounding(double x, double ref, flashattn_dtype dt) {
    const double e = fabs(x - ref);
    return e != e ? e : fmax(0.0, e - fz_ulp(dt, ref));
}

/* Whether a call runs with dropout (a dropout_p within struct_size). */
static int dropout_on(const flashattn_params *p) {
    return p && p->struct_size >= offsetof(flashattn_params, dropout_p) + sizeof p->dropout_p &&
           p->dropout_p != 0.0f;
}

/* One dense problem's O and LSE against the FP64 reference, by
 * test_forward's rule: f32 out, max error <= max(1e-5, twice plain f32
 * attention's); 16-bit out, <= twice plain f32's rounded to the dtype (past
 * one rounding); LSE within 1e-5 (f32 inputs, else 1e-4) of the
 * reference's magnitude (at least 1), -inf exactly where it is -inf.
 * lse: element (b, h, i) at lse[b * lsb + h * lsh + i], or NULL. */
/* A contiguous [b, s, h, d] buffer of the harness's own (contents to fill). */
static fz_buf dense(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d) {
    fz_buf x;
    memset(&x, 0, sizeof x);
    x.t = shape(dt, b, s, h, d, 0);
    x.bytes = (size_t)(b * s * h * d) * fz_esize(dt);
    x.mem = malloc(x.bytes + 4);
    x.t.data = x.mem;
    x.covered = 1;
    return x;
}

/* t's elements, same dtype, in a contiguous [b, s, h, d] buffer: the
 * references validate q as they would o, so a broadcast q is refused there. */
static fz_buf contiguous(const flashattn_tensor *t) {
    fz_buf x = dense(t->dtype, t->batch, t->seqlen, t->heads, t->head_dim);
    const size_t es = fz_esize(t->dtype);
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++) {
                const size_t from = (size_t)(b * t->stride_batch + s * t->stride_seq + h * t->stride_head) * es;
                const size_t to = (size_t)(((b * t->seqlen + s) * t->heads + h) * t->head_dim) * es;
                memcpy(x.mem + to, (const char *)t->data + from, (size_t)t->head_dim * es);
            }
    return x;
}

static void check_fwd(fz *f, const flashattn_tensor *q_given, const flashattn_tensor *k,
                      const flashattn_tensor *v, const flashattn_tensor *o, const float *lse,
                      int64_t lsb, int64_t lsh, const flashattn_params *p, int f32_inputs,
                      const char *what) {
    fz_buf qc = contiguous(q_given);
    const flashattn_tensor *q = &qc.t;
    const size_t n = (size_t)(q->batch * q->seqlen * q->heads * q->head_dim);
    const size_t ln = (size_t)(q->batch * q->heads * q->seqlen);
    double *ref = malloc((n + 1) * sizeof(double)), *plain = malloc((n + 1) * sizeof(double));
    double *ref_lse = malloc((ln + 1) * sizeof(double));
    flashattn_status s = fa_reference_fwd_f64(q, k, v, p, ref, ref_lse);
    if (s) fz_fail(f->ctx, "%s: the library accepted a call the reference refuses (%d)", what, s);
    fa_reference_std_f32(q, k, v, p, o->dtype, plain);
    double eplain = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) eplain = fmax(eplain, fabs(plain[i] - ref[i]));
    const double bound = o->dtype == FLASHATTN_F32 ? fmax(1e-5, 2.0 * eplain) : 2.0 * eplain;
    for (int64_t b = 0; b < q->batch; b++)
        for (int64_t i = 0; i < q->seqlen; i++)
            for (int64_t h = 0; h < q->heads; h++)
                for (int64_t c = 0; c < q->head_dim; c++) {
                    const double r = ref[((b * q->seqlen + i) * q->heads + h) * q->head_dim + c];
                    const double e = beyond_rounding(fa_tensor_get(o, b, i, h, c), r, o->dtype);
                    if (!(e <= bound))
                        fz_fail(f->ctx, "%s: O[%lld,%lld,%lld,%lld] = %.9g, reference %.9g: error %.3g "
                                "past one rounding > bound %.3g (plain f32 %.3g)", what, (long long)b,
                                (long long)i, (long long)h, (long long)c, fa_tensor_get(o, b, i, h, c), r,
                                e, bound, eplain);
                    err = fmax(err, e);
                }
    const double lbound = f32_inputs ? 1e-5 : 1e-4;
    for (int64_t b = 0; lse && b < q->batch; b++)
        for (int64_t h = 0; h < q->heads; h++)
            for (int64_t i = 0; i < q->seqlen; i++) {
                const double r = ref_lse[(b * q->heads + h) * q->seqlen + i], got = lse[b * lsb + h * lsh + i];
                const int ok = isinf(r) ? got == r : fabs(got - r) <= lbound * fmax(1.0, fabs(r));
                if (!ok)
                    fz_fail(f->ctx, "%s: LSE[%lld,%lld,%lld] = %.9g, reference %.9g", what, (long long)b,
                            (long long)h, (long long)i, got, r);
            }
    free(ref), free(plain), free(ref_lse);
    fz_buf_free(&qc);
}

/* A [batch, heads, seq_q, seq_k] bias or mask over a buffer of exactly its
 * extent; each dimension the problem's or 1, the fuzzer picks which. */
typedef struct {
    flashattn_scores s;
    unsigned char *mem;
} fz_scores;

static void make_scores(fz *f, fz_scores *x, int is_bias, const int64_t dims[4]) {
    memset(x, 0, sizeof *x);
    const unsigned bcast = fz_byte(&f->in);
    int64_t d[4];
    for (int i = 0; i < 4; i++) d[i] = bcast >> i & 1 ? 1 : dims[i];
    const flashattn_dtype dt = is_bias ? pick_dtype(f) : FLASHATTN_F32;
    const size_t es = is_bias ? (size_t)fa_dtype_bytes(dt) : 1;
    /* row-major over the kept dimensions, broadcast ones stride 0, or
     * (bit 4) seq_k outermost */
    int64_t st[4] = {0, 0, 0, 0}, step = 1;
    const int order[2][4] = {{3, 2, 1, 0}, {2, 1, 0, 3}};
    for (int i = 0; i < 4; i++) {
        const int a = order[bcast >> 4 & 1][i];
        if (d[a] > 1) st[a] = step, step *= d[a];
    }
    x->s.dtype = dt;
    x->s.batch = d[0], x->s.heads = d[1], x->s.seq_q = d[2], x->s.seq_k = d[3];
    x->s.stride_batch = st[0], x->s.stride_head = st[1], x->s.stride_q = st[2], x->s.stride_k = st[3];
    const int64_t count = d[0] * d[1] * d[2] * d[3];
    x->mem = malloc((size_t)(count ? count : 1) * es);
    for (int64_t i = 0; i < count; i++) {
        if (!is_bias) {
            x->mem[i] = fz_below(&f->in, 4) != 0; /* mostly attend */
            continue;
        }
        /* N(0, 1), and now and then -inf, which hides the key */
        const double val = fz_chance(&f->in, 16) ? -INFINITY : fa_rand_normal(&f->rng);
        const float v32 = (float)val;
        uint16_t v16 = dt == FLASHATTN_F16 ? fa_f32_to_f16(v32) : fa_f32_to_bf16(v32);
        if (dt == FLASHATTN_F32) memcpy(x->mem + 4 * i, &v32, 4);
        else memcpy(x->mem + 2 * i, &v16, 2);
    }
    x->s.data = x->mem;
    note(f, " %s(%lldx%lldx%lldx%lld dt%d)", is_bias ? "bias" : "mask", (long long)d[0],
         (long long)d[1], (long long)d[2], (long long)d[3], (int)dt);
}

/* The modifiers of a forward or decode call: softcap, ALiBi, sinks (and,
 * with scores, bias and mask); the arrays live in `keep`. */
typedef struct {
    float slopes[MAXB * MAXH], sinks[MAXH], dsinks[MAXH];
    fz_scores bias, mask;
} fz_mods;

static void make_mods(fz *f, fz_mods *m, flashattn_params *p, int64_t nseq, int64_t hq,
                      const int64_t score_dims[4]) {
    memset(m, 0, sizeof *m);
    const unsigned which = fz_byte(&f->in);
    if (which & 1) {
        p->softcap = (float)FZ_PICK(&f->in, 1, 5, 30, 50) / (float)(1 + fz_below(&f->in, 4));
        note(f, " softcap=%g", (double)p->softcap);
    }
    if (which & 2 && hq <= MAXH && nseq <= MAXB) {
        const int per_seq = fz_chance(&f->in, 2);
        for (int64_t i = 0; i < (per_seq ? nseq : 1) * hq; i++)
            m->slopes[i] = (float)fz_below(&f->in, 64) / 64.0f;
        p->alibi_slopes = m->slopes;
        p->alibi_batch_stride = per_seq ? hq : 0;
        note(f, " alibi%s", per_seq ? "/seq" : "");
    }
    if (which & 4 && hq <= MAXH) {
        for (int64_t h = 0; h < hq; h++) m->sinks[h] = (float)((int)fz_below(&f->in, 64) - 32) / 8.0f;
        p->sinks = m->sinks;
        note(f, " sinks");
    }
    if (score_dims && which & 8) {
        make_scores(f, &m->bias, 1, score_dims);
        p->bias = &m->bias.s;
    }
    if (score_dims && which & 16) {
        make_scores(f, &m->mask, 0, score_dims);
        p->mask = &m->mask.s;
    }
}

static void free_mods(fz_mods *m) { free(m->bias.mem), free(m->mask.mem); }

/* Causal, window, alignment, scale, threads, tiles: all valid. */
static void base_params(fz *f, flashattn_params *p, int64_t sq, int64_t sk) {
    flashattn_params_init(p);
    const unsigned m = fz_byte(&f->in);
    p->causal = m & 1;
    p->align = m >> 1 & 1 ? FLASHATTN_ALIGN_TOP_LEFT : FLASHATTN_ALIGN_BOTTOM_RIGHT;
    if (m & 4) p->window_left = fz_below(&f->in, (unsigned)(sq + sk + 3));
    if (m & 8) p->window_right = fz_below(&f->in, (unsigned)(sq + sk + 3));
    if (m & 16) p->scale = (float)((int)fz_below(&f->in, 64) - 24) / 16.0f; /* 0: the default */
    p->num_threads = (int)fz_below(&f->in, 4);
    if (m & 32) p->block_m = (int)FZ_PICK(&f->in, 16, 32, 64, 8, 1);
    if (m & 64) p->block_n = (int)FZ_PICK(&f->in, 16, 32, 64, 8, 1);
    f->tiles = p->block_m || p->block_n;
    note(f, " causal=%d align=%d win=(%lld,%lld) scale=%g threads=%d tile=(%d,%d)", p->causal,
         (int)p->align, (long long)p->window_left, (long long)p->window_right, (double)p->scale,
         p->num_threads, p->block_m, p->block_n);
}

/* The workspace for a call: NULL (the library allocates), the size the
 * query gave, one byte less (must be refused as too small), or more. */
typedef struct {
    void *mem;
    size_t bytes;
    int mode;
} fz_ws;

static void make_ws(fz *f, fz_ws *w, flashattn_status size_status, size_t need) {
    w->mode = (int)fz_below(&f->in, 4);
    w->mem = NULL, w->bytes = 0;
    if (size_status != FLASHATTN_OK || w->mode == 0 || need > ((size_t)1 << 28)) {
        w->mode = 0;
        return;
    }
    if (w->mode == 2 && need == 0) w->mode = 1;
    w->bytes = w->mode == 1 ? need : w->mode == 2 ? need - 1 : need + 64;
    w->mem = malloc(w->bytes ? w->bytes : 1);
    memset(w->mem, 0xff, w->bytes); /* NaN in every float slot: nothing may use what it did not write */
    note(f, " ws=%d(%zu of %zu)", w->mode, w->bytes, need);
}

/* Floats of an LSE for q's sizes, -1 past FZ_MAX_ELEMS (or negative
 * sizes: an edit made them so). */
static int64_t lse_count(const flashattn_tensor *q) {
    int64_t n;
    if (q->batch < 0 || q->heads < 0 || q->seqlen < 0 || __builtin_mul_overflow(q->batch, q->heads, &n) ||
        __builtin_mul_overflow(n, q->seqlen, &n) || n > FZ_MAX_ELEMS)
        return -1;
    return n;
}

/* The status rules every call obeys. */
static void check_status(fz *f, flashattn_status size_status, flashattn_status s, const fz_ws *w) {
    if ((unsigned)s >= FLASHATTN_STATUS_COUNT) fz_fail(f->ctx, "status %d is not a flashattn_status", (int)s);
    if (f->invalid && s == FLASHATTN_OK) fz_fail(f->ctx, "a call the header forbids succeeded");
    if (!f->edits && w->mode != 2 && s != FLASHATTN_OK && !(s == FLASHATTN_ERR_BAD_TILE && f->tiles))
        fz_fail(f->ctx, "a valid call failed with status %d", (int)s);
    if (size_status != FLASHATTN_OK && s == FLASHATTN_OK)
        fz_fail(f->ctx, "the workspace query failed (%d) but the call succeeded", size_status);
    /* (a call with nothing to compute may take it: ASan sees any use past its end) */
    if (w->mode == 2 && s != FLASHATTN_ERR_WORKSPACE_TOO_SMALL && s != FLASHATTN_OK)
        fz_fail(f->ctx, "a workspace one byte short gave status %d, not WORKSPACE_TOO_SMALL", (int)s);
}

static void untouched(fz *f, const void *now, const unsigned char *before, size_t n, const char *name) {
    if (n && memcmp(now, before, n)) fz_fail(f->ctx, "the call failed but wrote to %s", name);
}

/* A dense or packed forward problem: its tensors (q, k, v, o), the LSE,
 * packed-sequence boundaries and the modifiers. */
enum { Q, K, V, O, NFWD };
typedef struct {
    fz_buf t[NFWD];
    float *lse;
    size_t lse_n;
    flashattn_params p;
    int use_params;
    int varlen;
    int64_t nseq, hq, total_q, total_k;
    int32_t cu_q[MAXB + 1], cu_k[MAXB + 1], used[MAXB];
    flashattn_varlen vl;
    fz_mods mods;
} fwd_call;

static void build_fwd(fz *f, fwd_call *c) {
    memset(c, 0, sizeof *c);
    const flashattn_dtype dt = pick_dtype(f);
    const flashattn_dtype odt = fz_chance(&f->in, 4) ? pick_dtype(f) : dt;
    const int64_t hkv = 1 + fz_below(&f->in, 3), hq = hkv * (1 + fz_below(&f->in, 3));
    const int64_t d = fz_chance(&f->in, 8) ? FZ_PICK(&f->in, 64, 80, 128, 256) : 1 + fz_below(&f->in, 33);
    c->hq = hq;
    c->varlen = fz_chance(&f->in, 4);
    int64_t b, sq, sk;
    if (c->varlen) {
        /* packed: sequences of 0 .. 20 rows, seqused_k now and then */
        c->nseq = fz_below(&f->in, MAXB + 1);
        for (int64_t i = 0; i < c->nseq; i++) {
            c->cu_q[i + 1] = c->cu_q[i] + (int32_t)fz_below(&f->in, 21);
            c->cu_k[i + 1] = c->cu_k[i] + (int32_t)fz_below(&f->in, 21);
        }
        const int with_used = fz_chance(&f->in, 3);
        int64_t most_q = 0, most_k = 0;
        for (int64_t i = 0; i < c->nseq; i++) {
            const int32_t nk = c->cu_k[i + 1] - c->cu_k[i];
            c->used[i] = with_used ? (int32_t)fz_below(&f->in, (unsigned)nk + 1) : nk;
            if (c->cu_q[i + 1] - c->cu_q[i] > most_q) most_q = c->cu_q[i + 1] - c->cu_q[i];
            if (c->used[i] > most_k) most_k = c->used[i];
        }
        flashattn_varlen_init(&c->vl);
        c->vl.batch = c->nseq;
        c->vl.cu_seqlens_q = c->cu_q, c->vl.cu_seqlens_k = c->cu_k;
        c->vl.seqused_k = with_used ? c->used : NULL;
        b = 1, sq = c->cu_q[c->nseq], sk = c->cu_k[c->nseq];
        base_params(f, &c->p, most_q, most_k);
        c->p.varlen = &c->vl;
        const int64_t sd[4] = {c->nseq, hq, most_q, most_k};
        make_mods(f, &c->mods, &c->p, c->nseq, hq, sd);
        note(f, " varlen nseq=%lld", (long long)c->nseq);
    } else {
        b = fz_below(&f->in, 3);
        sq = fz_chance(&f->in, 8) ? 40 + fz_below(&f->in, 100) : fz_below(&f->in, 20);
        sk = fz_chance(&f->in, 8) ? 40 + fz_below(&f->in, 100) : fz_below(&f->in, 20);
        c->nseq = b;
        base_params(f, &c->p, sq, sk);
        if (fz_chance(&f->in, 4)) {
            /* (dense only: the mask follows the sequence index, which a packed
             * sequence's dense reference would not have) */
            c->p.dropout_p = (float)FZ_PICK(&f->in, 10, 50, 90, 1) / 100.0f;
            c->p.dropout_seed = fa_rand_u64(&f->rng), c->p.dropout_offset = fz_below(&f->in, 1000);
            note(f, " dropout=%g", (double)c->p.dropout_p);
        }
        const int64_t sd[4] = {b, hq, sq, sk};
        make_mods(f, &c->mods, &c->p, b, hq, sd);
    }
    c->total_q = sq, c->total_k = sk;
    c->t[Q].t = shape(dt, b, sq, hq, d, (int)fz_below(&f->in, 6));
    c->t[K].t = shape(dt, b, sk, hkv, d, (int)fz_below(&f->in, 6));
    c->t[V].t = shape(dt, b, sk, hkv, d, (int)fz_below(&f->in, 6));
    c->t[O].t = shape(odt, b, sq, hq, d, (int)fz_below(&f->in, 4));
    c->use_params = !fz_chance(&f->in, 16) || c->varlen || c->p.bias || c->p.mask;
    note(f, " dt=%d odt=%d b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld", (int)dt, (int)odt,
         (long long)b, (long long)sq, (long long)sk, (long long)hq, (long long)hkv, (long long)d);
}

static void alloc_fwd(fz *f, fwd_call *c, int want_lse, double sigma) {
    for (int i = 0; i < NFWD; i++) fz_buf_alloc(&c->t[i], &f->rng, i == V ? 1.0 : sigma);
    fz_buf_sentinel(&c->t[O]);
    const int64_t ln = lse_count(&c->t[Q].t);
    c->lse_n = want_lse && ln >= 0 ? (size_t)ln : 0; /* (0 without one) */
    if (want_lse) {
        c->lse = malloc((c->lse_n ? c->lse_n : 1) * sizeof(float));
        memset(c->lse, 0x5a, c->lse_n * sizeof(float));
    }
}

static void free_fwd(fwd_call *c) {
    for (int i = 0; i < NFWD; i++) fz_buf_free(&c->t[i]);
    free(c->lse);
    free_mods(&c->mods);
}

/* Rows r0 .. r0 + n - 1 of a packed tensor, as a one-sequence tensor. */
static flashattn_tensor rows_of(const flashattn_tensor *t, int64_t r0, int64_t n) {
    flashattn_tensor x = *t;
    x.data = (char *)t->data + (size_t)(r0 * t->stride_seq) * fz_esize(t->dtype);
    x.seqlen = n;
    return x;
}

/* Sequence b of a packed call's bias or mask, as a dense call's. */
static flashattn_scores scores_of(const flashattn_scores *s, int is_bias, int64_t b, int64_t sq, int64_t sk) {
    flashattn_scores x = *s;
    const size_t es = is_bias ? (size_t)fa_dtype_bytes(s->dtype) : 1;
    x.data = (const char *)s->data + (size_t)((s->batch > 1 ? b : 0) * s->stride_batch) * es;
    x.batch = 1;
    if (x.seq_q > 1) x.seq_q = sq;
    if (x.seq_k > 1) x.seq_k = sk;
    return x;
}

/* A successful forward against the reference, sequence by sequence when
 * packed (the header: each as a dense call on its own). */
static void check_fwd_call(fz *f, fwd_call *c) {
    const flashattn_params *p = c->use_params ? &c->p : NULL;
    if (!c->varlen) {
        check_fwd(f, &c->t[Q].t, &c->t[K].t, &c->t[V].t, &c->t[O].t, c->lse,
                  c->t[Q].t.heads * c->t[Q].t.seqlen, c->t[Q].t.seqlen, p,
                  c->t[Q].t.dtype == FLASHATTN_F32, "forward");
        return;
    }
    flashattn_params pd = c->p;
    pd.varlen = NULL;
    for (int64_t b = 0; b < c->nseq; b++) {
        const int64_t nq = c->cu_q[b + 1] - c->cu_q[b], nk = c->used[b];
        flashattn_tensor q = rows_of(&c->t[Q].t, c->cu_q[b], nq), o = rows_of(&c->t[O].t, c->cu_q[b], nq);
        flashattn_tensor k = rows_of(&c->t[K].t, c->cu_k[b], nk), v = rows_of(&c->t[V].t, c->cu_k[b], nk);
        flashattn_scores bias, mask;
        if (c->p.bias) bias = scores_of(c->p.bias, 1, b, nq, nk), pd.bias = &bias;
        if (c->p.mask) mask = scores_of(c->p.mask, 0, b, nq, nk), pd.mask = &mask;
        if (c->p.alibi_slopes) {
            pd.alibi_slopes = c->p.alibi_slopes + b * c->p.alibi_batch_stride;
            pd.alibi_batch_stride = 0;
        }
        char what[48];
        snprintf(what, sizeof what, "packed sequence %lld", (long long)b);
        check_fwd(f, &q, &k, &v, &o, c->lse ? c->lse + c->cu_q[b] : NULL, 0, c->total_q, &pd,
                  q.dtype == FLASHATTN_F32, what);
    }
}

static void edit_fwd(fz *f, fwd_call *c, flashattn_tensor **ptrs) {
    static const char *const names[] = {"q", "k", "v", "o"};
    const int edits = fz_chance(&f->in, 2) ? 1 + (int)fz_below(&f->in, 3) : 0;
    for (int e = 0; e < edits; e++) {
        const unsigned kind = fz_below(&f->in, 8);
        if (kind < 4) {
            flashattn_tensor *ts[NFWD] = {&c->t[Q].t, &c->t[K].t, &c->t[V].t, &c->t[O].t};
            edit_tensor(f, ts, names, NFWD);
        } else if (kind < 7) {
            edit_params(f, &c->p);
            c->use_params = 1;
        } else {
            const int which = (int)fz_below(&f->in, NFWD);
            ptrs[which] = NULL;
            note(f, " edit:%s=NULL", names[which]);
        }
    }
    f->edits = edits;
    if (edits) f->compare = f->compare && !c->varlen; /* (sequences of edited packed tensors: not rebuilt) */
    for (int i = 0; i < NFWD; i++)
        if (!ptrs[i] || tensor_forbidden(ptrs[i])) f->invalid = 1;
    if (c->use_params && params_forbidden(&c->p, 0)) f->invalid = 1;
    if (!f->invalid && fwd_shapes_forbidden(ptrs[Q], ptrs[K], ptrs[V], ptrs[O], c->use_params && c->varlen &&
                                            reads_varlen(&c->p)))
        f->invalid = 1;
}

/* Whether the harness can make this call: every tensor's memory is there,
 * or the header makes the call invalid (then the library must refuse it
 * before reading). */
static int can_call(fz *f, const fz_buf *t, int n) {
    for (int i = 0; i < n; i++)
        if (!t[i].covered && !f->invalid) return 0;
    return 1;
}

static void fuzz_fwd(fz *f) {
    fwd_call c;
    build_fwd(f, &c);
    flashattn_tensor *ptrs[NFWD] = {&c.t[Q].t, &c.t[K].t, &c.t[V].t, &c.t[O].t};
    edit_fwd(f, &c, ptrs);
    const double sigma = fz_chance(&f->in, 4) ? 3.0 : 1.0;
    alloc_fwd(f, &c, !fz_chance(&f->in, 4), sigma);
    if (!can_call(f, c.t, NFWD)) return free_fwd(&c);
    const flashattn_params *p = c.use_params ? &c.p : NULL;
    size_t need = 0;
    const flashattn_status ss = fa_fwd_workspace_size_ex(ptrs[Q], ptrs[K], ptrs[V], ptrs[O], c.lse, p, f->kern, &need);
    fz_ws w;
    make_ws(f, &w, ss, need);
    unsigned char *o0 = fz_copy(c.t[O].mem, c.t[O].bytes), *l0 = fz_copy(c.lse, c.lse_n * sizeof(float));
    const flashattn_status s = fa_fwd_ex(ptrs[Q], ptrs[K], ptrs[V], ptrs[O], c.lse, p, w.mem, w.bytes, f->kern);
    check_status(f, ss, s, &w);
    if (s != FLASHATTN_OK) {
        untouched(f, c.t[O].mem, o0, c.t[O].bytes, "o");
        untouched(f, c.lse, l0, c.lse_n * sizeof(float), "lse");
    } else if (f->compare && logit_bound(&c.t[Q].t, &c.t[K].t, p) < FLT_MAX / 64) {
        check_fwd_call(f, &c);
    }
    free(o0), free(l0), free(w.mem);
    free_fwd(&c);
}

/* ---- the backward ------------------------------------------------------- */

enum { DO, DQ, DK, DV, NBWD };

/* dQ, dK, dV against the FP64 reference gradients by test_backward's rule
 * (fa_bwd_pass_bounds from plain f32's errors), past one rounding of a
 * 16-bit output as for the forward. */
static void check_bwd(fz *f, const fwd_call *c, const fz_buf *g, const flashattn_params *p) {
    fz_buf qc = contiguous(&c->t[Q].t), dc = contiguous(&g[DO].t);
    fz_buf kc = contiguous(&c->t[K].t), vc = contiguous(&c->t[V].t);
    const flashattn_tensor *q = &qc.t, *k = &kc.t, *v = &vc.t, *dout = &dc.t;
    const size_t nq = (size_t)(q->batch * q->seqlen * q->heads * q->head_dim);
    const size_t nk = (size_t)(k->batch * k->seqlen * k->heads * k->head_dim);
    const size_t cnt[3] = {nq, nk, nk};
    double *ref[3], *plain[3];
    for (int i = 0; i < 3; i++) {
        ref[i] = malloc((cnt[i] + 1) * sizeof(double));
        plain[i] = malloc((cnt[i] + 1) * sizeof(double));
    }
    flashattn_status s = fa_reference_bwd_f64(q, k, v, dout, p, ref[0], ref[1], ref[2]);
    if (s) fz_fail(f->ctx, "backward: the library accepted a call the reference refuses (%d)", s);
    static const char *name[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        double terms[3] = {0, 0, 0}, *junk[3];
        const flashattn_tensor *out = &g[DQ + i].t;
        for (int j = 0; j < 3; j++) junk[j] = j == i ? plain[i] : malloc((cnt[j] + 1) * sizeof(double));
        fa_reference_bwd_std_f32(q, k, v, &c->t[O].t, dout, c->lse, p, out->dtype, junk[0],
                                 junk[1], junk[2], terms);
        for (int j = 0; j < 3; j++)
            if (j != i) free(junk[j]);
        double perr = 0, psq = 0, emax = 0, esq = 0, worst_got = 0, worst_ref = 0;
        int64_t worst[4] = {0, 0, 0, 0};
        for (size_t e = 0; e < cnt[i]; e++) {
            const double d = fabs(plain[i][e] - ref[i][e]);
            perr = fmax(perr, d), psq += d * d;
        }
        const int64_t S = out->seqlen, H = out->heads, D = out->head_dim;
        for (int64_t b = 0; b < out->batch; b++)
            for (int64_t r = 0; r < S; r++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t e = 0; e < D; e++) {
                        const double rv = ref[i][((b * S + r) * H + h) * D + e], got = fa_tensor_get(out, b, r, h, e);
                        const double x = beyond_rounding(got, rv, out->dtype);
                        if (x != x) fz_fail(f->ctx, "backward: %s[%lld,%lld,%lld,%lld] is NaN", name[i],
                                            (long long)b, (long long)r, (long long)h, (long long)e);
                        if (x > emax) {
                            emax = x, worst_got = got, worst_ref = rv;
                            worst[0] = b, worst[1] = r, worst[2] = h, worst[3] = e;
                        }
                        esq += x * x;
                    }
        const double n = cnt[i] ? (double)cnt[i] : 1.0;
        const fa_bwd_bounds bd = fa_bwd_pass_bounds(out->dtype, perr, sqrt(psq / n), terms[i]);
        if (!(emax <= bd.max_bound && sqrt(esq / n) <= bd.rms_bound))
            fz_fail(f->ctx, "backward: %s max error %.3g (bound %.3g, plain %.3g), rms %.3g (bound %.3g), terms %.3g; "
                    "worst %s[%lld,%lld,%lld,%lld] = %.9g, reference %.9g", name[i], emax, bd.max_bound, perr,
                    sqrt(esq / n), bd.rms_bound, terms[i], name[i], (long long)worst[0], (long long)worst[1],
                    (long long)worst[2], (long long)worst[3], worst_got, worst_ref);
    }
    for (int i = 0; i < 3; i++) free(ref[i]), free(plain[i]);
    fz_buf_free(&qc), fz_buf_free(&dc), fz_buf_free(&kc), fz_buf_free(&vc);
}


/* x's memory again when an edit made its descriptor reach further than it
 * holds (new values; outputs take the sentinel again). */
static void refit(fz *f, fz_buf *x, int output) {
    const int64_t ext = fz_extent(&x->t);
    if (ext >= 0 && (size_t)ext * fz_esize(x->t.dtype) <= x->bytes && x->covered) return;
    fz_buf_free(x); /* (t.data keeps its old value: NULL stays NULL, the rest points at the new mem) */
    fz_buf_alloc(x, &f->rng, 1.0);
    if (output) fz_buf_sentinel(x);
}

/* dsinks against the reference's by test_modifiers' rule: within eps (by
 * o's dtype) of the sum of the terms, plus 1e-7. */
static void check_dsinks(fz *f, const fwd_call *c, const fz_buf *g, const flashattn_params *p) {
    fz_buf qc = contiguous(&c->t[Q].t), dc = contiguous(&g[DO].t);
    const flashattn_tensor *q = &qc.t, *dout = &dc.t;
    const int64_t B = q->batch, S = q->seqlen, H = q->heads, D = q->head_dim;
    double *ro = malloc((size_t)(B * S * H * D + 1) * sizeof(double));
    double *rl = malloc((size_t)(B * H * S + 1) * sizeof(double)), rs[MAXH];
    if (fa_reference_fwd_f64(q, &c->t[K].t, &c->t[V].t, p, ro, rl) ||
        fa_reference_dsinks_f64(q, &c->t[K].t, &c->t[V].t, dout, p, rs))
        fz_fail(f->ctx, "dsinks: the reference refused the call");
    const flashattn_dtype odt = c->t[O].t.dtype;
    const double eps = odt == FLASHATTN_F32 ? 1e-5 : odt == FLASHATTN_F16 ? 2e-3 : 1.6e-2;
    for (int64_t h = 0; h < H; h++) {
        double terms = 0.0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < S; i++) {
                double dsum = 0.0;
                for (int64_t x = 0; x < D; x++)
                    dsum += fabs(fa_tensor_get(dout, b, i, h, x) * ro[((b * S + i) * H + h) * D + x]);
                terms += exp((double)p->sinks[h] - rl[(b * H + h) * S + i]) * dsum;
            }
        if (!(fabs(p->dsinks[h] - rs[h]) <= eps * terms + 1e-7))
            fz_fail(f->ctx, "dsinks[%lld] = %.7g, reference %.7g (terms %.3g)", (long long)h,
                    (double)p->dsinks[h], rs[h], terms);
    }
    free(ro), free(rl);
    fz_buf_free(&qc), fz_buf_free(&dc);
}

static void fuzz_bwd(fz *f) {
    fwd_call c;
    build_fwd(f, &c);
    fz_buf g[NBWD];
    memset(g, 0, sizeof g);
    const flashattn_tensor *q = &c.t[Q].t, *k = &c.t[K].t;
    const flashattn_dtype gdt = fz_chance(&f->in, 4) ? pick_dtype(f) : q->dtype;
    g[DO].t = shape(fz_chance(&f->in, 4) ? pick_dtype(f) : c.t[O].t.dtype, q->batch, q->seqlen,
                    q->heads, q->head_dim, (int)fz_below(&f->in, 6));
    g[DQ].t = shape(gdt, q->batch, q->seqlen, q->heads, q->head_dim, (int)fz_below(&f->in, 4));
    g[DK].t = shape(gdt, k->batch, k->seqlen, k->heads, k->head_dim, (int)fz_below(&f->in, 4));
    g[DV].t = shape(gdt, k->batch, k->seqlen, k->heads, k->head_dim, (int)fz_below(&f->in, 4));
    c.p.deterministic = fz_chance(&f->in, 2);
    note(f, " gdt=%d det=%d", (int)gdt, c.p.deterministic);
    alloc_fwd(f, &c, 1, fz_chance(&f->in, 4) ? 3.0 : 1.0);
    for (int i = 0; i < NBWD; i++) {
        fz_buf_alloc(&g[i], &f->rng, 1.0);
        if (i != DO) fz_buf_sentinel(&g[i]);
    }
    if (c.p.sinks) {
        c.p.dsinks = c.mods.dsinks;
        memset(c.mods.dsinks, 0x5a, sizeof c.mods.dsinks);
    }
    /* O and LSE from the library's forward, as a caller would have them */
    flashattn_params *p = c.use_params ? &c.p : NULL;
    flashattn_status s = fa_fwd_ex(q, k, &c.t[V].t, &c.t[O].t, c.lse, p, NULL, 0, f->kern);
    if (s != FLASHATTN_OK && !(s == FLASHATTN_ERR_BAD_TILE && (c.p.block_m || c.p.block_n)))
        fz_fail(f->ctx, "the forward of a valid call failed (%d)", (int)s);
    if (s != FLASHATTN_OK) goto done;
    /* then the edits, on the backward's call only */
    const float *lse = c.lse;
    flashattn_tensor *ptrs[8] = {&c.t[Q].t, &c.t[K].t, &c.t[V].t, &c.t[O].t, &g[DO].t, &g[DQ].t, &g[DK].t, &g[DV].t};
    static const char *const names[8] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
    const int edits = fz_chance(&f->in, 2) ? 1 + (int)fz_below(&f->in, 3) : 0;
    for (int e = 0; e < edits; e++) {
        const unsigned kind = fz_below(&f->in, 8);
        if (kind < 4) {
            flashattn_tensor *ts[8] = {&c.t[Q].t, &c.t[K].t, &c.t[V].t, &c.t[O].t,
                                       &g[DO].t, &g[DQ].t, &g[DK].t, &g[DV].t};
            edit_tensor(f, ts, names, 8);
        } else if (kind < 6) {
            edit_params(f, &c.p);
            p = &c.p;
        } else if (kind == 6) {
            lse = NULL; /* (refused when q has rows: below) */
            note(f, " edit:lse=NULL");
        } else {
            const int which = (int)fz_below(&f->in, 8);
            ptrs[which] = NULL;
            note(f, " edit:%s=NULL", names[which]);
        }
    }
    f->edits = edits;
    for (int i = 0; i < 8; i++)
        if (!ptrs[i] || tensor_forbidden(ptrs[i])) f->invalid = 1;
    if (p && params_forbidden(p, 0)) f->invalid = 1;
    if (!f->invalid && (fwd_shapes_forbidden(ptrs[0], ptrs[1], ptrs[2], ptrs[3], c.varlen && p && reads_varlen(p)) ||
                        !same_dims(ptrs[4], ptrs[3]) || !same_dims(ptrs[5], ptrs[0]) ||
                        !same_dims(ptrs[6], ptrs[1]) || !same_dims(ptrs[7], ptrs[2])))
        f->invalid = 1;
    if (!lse && ptrs[0] && ptrs[0]->batch > 0 && ptrs[0]->seqlen > 0) f->invalid = 1;
    f->compare = f->compare && !edits && !c.varlen;
    for (int i = 0; i < NFWD; i++) refit(f, &c.t[i], 0);
    for (int i = 0; i < NBWD; i++) refit(f, &g[i], i != DO);
    if (!can_call(f, c.t, NFWD) || !can_call(f, g, NBWD)) goto done;
    size_t need = 0;
    const flashattn_status ss = fa_bwd_workspace_size_ex(ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], lse,
                                                         ptrs[5], ptrs[6], ptrs[7], p, f->kern, &need);
    fz_ws w;
    make_ws(f, &w, ss, need);
    unsigned char *before[3], *ds0 = fz_copy(c.mods.dsinks, sizeof c.mods.dsinks);
    for (int i = 0; i < 3; i++) before[i] = fz_copy(g[DQ + i].mem, g[DQ + i].bytes);
    s = fa_bwd_ex(ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], lse, ptrs[5], ptrs[6], ptrs[7], p, w.mem,
                  w.bytes, f->kern);
    check_status(f, ss, s, &w);
    if (s != FLASHATTN_OK) {
        static const char *const gn[3] = {"dq", "dk", "dv"};
        for (int i = 0; i < 3; i++) untouched(f, g[DQ + i].mem, before[i], g[DQ + i].bytes, gn[i]);
        untouched(f, c.mods.dsinks, ds0, sizeof c.mods.dsinks, "dsinks");
    } else if (f->compare && logit_bound(q, k, p) < FLT_MAX / 64) {
        check_bwd(f, &c, g, p);
        if (p && p->sinks && p->dsinks && !dropout_on(p)) check_dsinks(f, &c, g, p);
    }
    for (int i = 0; i < 3; i++) free(before[i]);
    free(ds0), free(w.mem);
done:
    for (int i = 0; i < NBWD; i++) fz_buf_free(&g[i]);
    free_fwd(&c);
}

/* ---- decode ------------------------------------------------------------- */

#define MAXPAGES 64

typedef struct {
    fz_buf q, o, kn, vn, kc, vc;
    float *lse;
    size_t lse_n;
    flashattn_kv_cache cache;
    flashattn_params p;
    fz_mods mods;
    int64_t nseq, hq, hkv, d, seq_new, capacity, page, max_pages;
    int paged, has_new, varlen, rotary, bad_table;
    /* (room past MAXB: an edited batch makes the library read on, zeros) */
    int64_t lens64[MAXB + 8];
    int32_t lens32[MAXB + 8], bidx[MAXB + 8], leftpad[MAXB + 8], cu_q[MAXB + 9], table[(MAXB + 8) * MAXPAGES];
    flashattn_varlen vl;
    float *rot_cos, *rot_sin;
    /* an 8-bit cache: its scale buffers (cache.k_scale, v_scale describe
     * them); and an edit of one scale value, set once they are filled */
    int quant;
    fz_buf ks, vs;
    int value_edit; /* 0 none, 1 k's first scale, 2 v's */
    float edited_value;
} dec_call;

static int64_t dec_len(const dec_call *c, int64_t b) {
    return c->cache.seqlens_i64 ? c->lens64[b] : c->lens32[b];
}

static int64_t dec_rows_q(const dec_call *c, int64_t b) {
    return c->varlen ? c->cu_q[b + 1] - c->cu_q[b] : c->q.t.seqlen;
}

static int64_t dec_added(const dec_call *c, int64_t b) {
    return !c->has_new ? 0 : c->varlen ? dec_rows_q(c, b) : c->seq_new;
}

/* Element offset of cache row j, kv-head h of sequence b. */
static int64_t cache_at(const dec_call *c, const flashattn_tensor *t, int64_t b, int64_t j, int64_t h) {
    int64_t entry = c->cache.batch_idx ? c->bidx[b] : b, slot = j;
    if (c->paged) entry = c->table[b * c->max_pages + j / c->page], slot = j % c->page;
    return entry * t->stride_batch + slot * t->stride_seq + h * t->stride_head;
}

/* A scale tensor of `kind` for the 8-bit cache kv (flashattn_scale_kind). */
static flashattn_tensor scale_shape(fz *f, const flashattn_tensor *kv, flashattn_scale_kind kind) {
    if (kind == FLASHATTN_SCALE_PER_TOKEN)
        return shape(FLASHATTN_F32, kv->batch, kv->seqlen, kv->heads, 1, (int)fz_below(&f->in, 4));
    if (kind == FLASHATTN_SCALE_PER_CHANNEL)
        return shape(FLASHATTN_F32, 1, 1, kv->heads, kv->head_dim, fz_chance(&f->in, 2) ? 0 : 2);
    flashattn_tensor t = shape(FLASHATTN_F32, 1, 1, kv->heads, 1, 0);
    if (fz_chance(&f->in, 3)) t.stride_head = 0; /* one scale for every kv-head, as vLLM's */
    return t;
}

/* The cache as an 8-bit one (int8, fp8 e4m3 or e5m2) with a scale kind
 * each for k and v. */
static void make_quant(fz *f, dec_call *c) {
    const flashattn_dtype dt =
        (flashattn_dtype)FZ_PICK(&f->in, FLASHATTN_INT8, FLASHATTN_FP8_E4M3, FLASHATTN_FP8_E5M2);
    c->quant = 1;
    c->cache.k.dtype = c->cache.v.dtype = dt;
    c->cache.k_scale_kind = (flashattn_scale_kind)fz_below(&f->in, 3);
    c->cache.v_scale_kind = (flashattn_scale_kind)fz_below(&f->in, 3);
    c->cache.k_scale = scale_shape(f, &c->cache.k, c->cache.k_scale_kind);
    c->cache.v_scale = scale_shape(f, &c->cache.v, c->cache.v_scale_kind);
    note(f, " quant=%d kinds=(%d,%d)", (int)dt, (int)c->cache.k_scale_kind, (int)c->cache.v_scale_kind);
}

static void build_dec(fz *f, dec_call *c) {
    memset(c, 0, sizeof *c);
    const flashattn_dtype qdt = pick_dtype(f), cdt = pick_dtype(f);
    const flashattn_dtype odt = fz_chance(&f->in, 2) ? qdt : pick_dtype(f);
    const flashattn_dtype ndt = fz_chance(&f->in, 2) ? cdt : pick_dtype(f);
    c->hkv = 1 + fz_below(&f->in, 3), c->hq = c->hkv * (1 + fz_below(&f->in, 4));
    c->d = fz_chance(&f->in, 8) ? FZ_PICK(&f->in, 64, 128) : 1 + fz_below(&f->in, 33);
    c->nseq = fz_below(&f->in, MAXB + 1);
    c->varlen = fz_chance(&f->in, 4);
    c->has_new = fz_chance(&f->in, 2);
    int64_t sq = 0, total = 0, most_q = 0;
    if (c->varlen) {
        for (int64_t b = 0; b < c->nseq; b++) c->cu_q[b + 1] = c->cu_q[b] + (int32_t)fz_below(&f->in, 6);
        total = c->cu_q[c->nseq];
        for (int64_t b = 0; b < c->nseq; b++)
            if (c->cu_q[b + 1] - c->cu_q[b] > most_q) most_q = c->cu_q[b + 1] - c->cu_q[b];
        flashattn_varlen_init(&c->vl);
        c->vl.batch = c->nseq, c->vl.cu_seqlens_q = c->cu_q;
    } else {
        sq = fz_below(&f->in, 6);
        c->seq_new = c->has_new ? fz_below(&f->in, 5) : 0;
        most_q = sq;
    }
    int64_t most = 0;
    for (int64_t b = 0; b < c->nseq; b++) {
        c->lens64[b] = fz_chance(&f->in, 6) ? 0 : fz_below(&f->in, 40);
        c->lens32[b] = (int32_t)c->lens64[b];
        c->leftpad[b] = fz_chance(&f->in, 4) ? (int32_t)fz_below(&f->in, (unsigned)c->lens64[b] + 1) : 0;
        const int64_t add = !c->has_new ? 0 : c->varlen ? c->cu_q[b + 1] - c->cu_q[b] : c->seq_new;
        if (c->lens64[b] + add > most) most = c->lens64[b] + add;
    }
    flashattn_kv_cache_init(&c->cache);
    c->paged = fz_chance(&f->in, 2);
    const int lay = (int)fz_below(&f->in, 4);
    int64_t entries = c->nseq;
    if (c->paged) {
        c->page = 1 + fz_below(&f->in, 8);
        c->max_pages = (most + fz_below(&f->in, 8) + c->page - 1) / c->page;
        if (c->max_pages > MAXPAGES) c->max_pages = MAXPAGES;
        if (c->max_pages * c->page < most) c->max_pages = (most + c->page - 1) / c->page;
        c->capacity = c->max_pages * c->page;
        /* each sequence's pages, shuffled over a pool with spare pages;
         * entries past a sequence's rows -1 (they are never read) */
        int64_t used = 0, pool;
        for (int64_t b = 0; b < c->nseq; b++) used += (dec_len(c, b) + dec_added(c, b) + c->page - 1) / c->page;
        pool = used + fz_below(&f->in, 4);
        int32_t perm[MAXB * MAXPAGES + 4];
        for (int64_t i = 0; i < pool; i++) perm[i] = (int32_t)i;
        for (int64_t i = pool - 1; i > 0; i--) {
            const int64_t r = (int64_t)(fa_rand_u64(&f->rng) % (uint64_t)(i + 1));
            const int32_t t = perm[i];
            perm[i] = perm[r], perm[r] = t;
        }
        int64_t next = 0;
        for (int64_t b = 0; b < c->nseq; b++) {
            const int64_t need = (dec_len(c, b) + dec_added(c, b) + c->page - 1) / c->page;
            for (int64_t i = 0; i < c->max_pages; i++) c->table[b * c->max_pages + i] = i < need ? perm[next++] : -1;
        }
        entries = pool;
        c->cache.block_table = c->table;
        c->cache.max_pages_per_seq = c->max_pages;
        c->cache.k = shape(cdt, pool, c->page, c->hkv, c->d, lay);
    } else {
        c->capacity = most + fz_below(&f->in, 6);
        if (fz_chance(&f->in, 4) && c->nseq > 0) {
            /* batch_idx: entries of a larger cache, distinct (appends may not share one) */
            entries = c->nseq + fz_below(&f->in, 3);
            int32_t perm[MAXB + 2];
            for (int64_t i = 0; i < entries; i++) perm[i] = (int32_t)i;
            for (int64_t i = entries - 1; i > 0; i--) {
                const int64_t r = (int64_t)(fa_rand_u64(&f->rng) % (uint64_t)(i + 1));
                const int32_t t = perm[i];
                perm[i] = perm[r], perm[r] = t;
            }
            for (int64_t b = 0; b < c->nseq; b++) c->bidx[b] = perm[b];
            c->cache.batch_idx = c->bidx;
        }
        c->cache.k = shape(cdt, entries, c->capacity, c->hkv, c->d, lay);
    }
    c->cache.v = c->cache.k;
    if (fz_chance(&f->in, 2)) c->cache.seqlens_i64 = c->lens64;
    else c->cache.seqlens_i32 = c->lens32;
    if (fz_chance(&f->in, 3)) c->cache.leftpad = c->leftpad;
    const int64_t qrows = c->varlen ? total : sq, qb = c->varlen ? 1 : c->nseq;
    c->q.t = shape(qdt, qb, qrows, c->hq, c->d, (int)fz_below(&f->in, 6));
    c->o.t = shape(odt, qb, qrows, c->hq, c->d, (int)fz_below(&f->in, 4));
    if (c->has_new) {
        const int64_t nrows = c->varlen ? total : c->seq_new;
        c->kn.t = shape(ndt, qb, nrows, c->hkv, c->d, (int)fz_below(&f->in, 6));
        c->vn.t = shape(ndt, qb, nrows, c->hkv, c->d, (int)fz_below(&f->in, 6));
    }
    base_params(f, &c->p, most_q, c->capacity);
    c->p.num_splits = (int)fz_below(&f->in, 9);
    if (c->varlen) c->p.varlen = &c->vl;
    make_mods(f, &c->mods, &c->p, c->nseq, c->hq, NULL);
    if (c->d >= 2 && fz_chance(&f->in, 6)) {
        /* rotary, positions up to the last row any sequence uses */
        c->rotary = 1;
        c->cache.rotary_dim = 2 * (1 + fz_below(&f->in, (unsigned)(c->d / 2)));
        c->cache.rotary_len = c->capacity + most_q + fz_below(&f->in, 3);
        c->cache.rotary_interleaved = fz_chance(&f->in, 2);
        const size_t n = (size_t)(c->cache.rotary_len * c->cache.rotary_dim / 2);
        c->rot_cos = malloc((n + 1) * sizeof(float)), c->rot_sin = malloc((n + 1) * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            c->rot_cos[i] = (float)cos(0.1 * (double)i);
            c->rot_sin[i] = (float)sin(0.1 * (double)i);
        }
        c->cache.rotary_cos = c->rot_cos, c->cache.rotary_sin = c->rot_sin;
    }
    note(f, " qdt=%d cdt=%d odt=%d ndt=%d nseq=%lld hq=%lld hkv=%lld d=%lld %s%s cap=%lld page=%lld "
         "new=%d splits=%d%s%s%s", (int)qdt, (int)cdt, (int)odt, (int)ndt, (long long)c->nseq,
         (long long)c->hq, (long long)c->hkv, (long long)c->d, c->varlen ? "varlen" : "dense",
         c->cache.batch_idx ? " batch_idx" : "", (long long)c->capacity, (long long)c->page, c->has_new,
         c->p.num_splits, c->cache.leftpad ? " leftpad" : "", c->rotary ? " rotary" : "",
         c->cache.seqlens_i64 ? " i64" : " i32");
    if (fz_chance(&f->in, 3)) make_quant(f, c);
}

/* One field of the cache (or of the lengths, block table or batch_idx it
 * points at); cache_forbidden judges the result. */
static void edit_cache(fz *f, dec_call *c) {
    flashattn_kv_cache *kc = &c->cache;
    const int64_t b = c->nseq ? fz_below(&f->in, (unsigned)c->nseq) : 0;
    static float never_read[1] = {1.0f};
    switch (fz_below(&f->in, 12)) {
    case 0:
        /* the first release's struct has no batch_idx, leftpad, rotary: the
         * call then runs without them */
        kc->struct_size = (size_t)FZ_PICK(&f->in, 0, 8, (int64_t)sizeof *kc + 8,
                                          (int64_t)offsetof(flashattn_kv_cache, batch_idx));
        f->compare = 0;
        note(f, " edit:cache.struct_size=%zu", kc->struct_size);
        break;
    case 1:
        if (!c->nseq) break;
        c->lens64[b] = FZ_PICK(&f->in, -1, INT64_MIN, c->capacity + 1, INT64_MAX, (int64_t)1 << 40);
        c->lens32[b] = (int32_t)(c->lens64[b] < INT32_MIN   ? INT32_MIN
                                 : c->lens64[b] > INT32_MAX ? INT32_MAX
                                                            : c->lens64[b]);
        note(f, " edit:seqlens[%lld]=%lld", (long long)b, (long long)dec_len(c, b));
        break;
    case 2:
        if (fz_chance(&f->in, 2)) kc->seqlens_i32 = c->lens32, kc->seqlens_i64 = c->lens64;
        else kc->seqlens_i32 = NULL, kc->seqlens_i64 = NULL;
        note(f, " edit:seqlens pointers %s", kc->seqlens_i32 ? "both" : "none");
        break;
    case 3:
        if (!c->nseq) break;
        c->leftpad[b] = (int32_t)FZ_PICK(&f->in, -1, INT32_MAX, (int64_t)c->lens32[b] + 1);
        kc->leftpad = c->leftpad;
        note(f, " edit:leftpad[%lld]=%d", (long long)b, c->leftpad[b]);
        break;
    case 4:
        if (c->paged) {
            const int64_t rows = sat_add(dec_len(c, b), dec_added(c, b));
            if (!c->nseq || rows <= 0) break;
            const int64_t last = (rows - 1) / c->page;
            if (last >= c->max_pages) break; /* (an earlier edit of the lengths: past the table) */
            c->table[b * c->max_pages + last] = (int32_t)FZ_PICK(&f->in, -1, INT32_MIN, kc->k.batch, INT32_MAX);
            c->bad_table = 1; /* (the page holding the last row: always read) */
            note(f, " edit:block_table[%lld][%lld]=%d", (long long)b, (long long)last,
                 c->table[b * c->max_pages + last]);
        } else if (kc->batch_idx) {
            c->bidx[b] = (int32_t)FZ_PICK(&f->in, -1, INT32_MIN, kc->k.batch, INT32_MAX);
            note(f, " edit:batch_idx[%lld]=%d", (long long)b, c->bidx[b]);
        }
        break;
    case 5:
        if (!c->paged) {
            kc->batch_idx = kc->batch_idx ? NULL : c->bidx; /* (given: zeros, every sequence entry 0) */
            f->compare = 0;
            note(f, " edit:batch_idx %s", kc->batch_idx ? "given" : "dropped");
        } else {
            /* with one sequence only its row of the table is read: any width */
            kc->max_pages_per_seq = c->nseq == 1 ? FZ_PICK(&f->in, INT64_MAX / c->page, (int64_t)1 << 40, INT64_MAX)
                                                 : FZ_PICK(&f->in, -1, INT64_MIN);
            note(f, " edit:max_pages_per_seq=%lld", (long long)kc->max_pages_per_seq);
        }
        break;
    case 6:
        kc->rotary_dim = FZ_PICK(&f->in, 0, 1, 3, c->d + 1, c->d + 2, -2, INT64_MAX);
        if (!kc->rotary_cos) kc->rotary_cos = kc->rotary_sin = c->mods.sinks; /* (never read: the dim is refused) */
        note(f, " edit:rotary_dim=%lld", (long long)kc->rotary_dim);
        break;
    case 7:
        /* shorter than the positions used must be refused (the tables hold the old length) */
        if (!c->rotary) break;
        kc->rotary_len = FZ_PICK(&f->in, -1, 0, 1, c->capacity / 2);
        f->compare = 0;
        note(f, " edit:rotary_len=%lld", (long long)kc->rotary_len);
        break;
    case 8:
        if (fz_chance(&f->in, 2)) kc->rotary_interleaved = 2;
        else kc->rotary_sin = NULL;
        note(f, " edit:rotary interleaved=%d sin=%s", kc->rotary_interleaved, kc->rotary_sin ? "set" : "NULL");
        break;
    case 9:
        if (c->quant) {
            flashattn_tensor *sc[2] = {&kc->k_scale, &kc->v_scale};
            static const char *const names[2] = {"cache.k_scale", "cache.v_scale"};
            edit_tensor(f, sc, names, 2);
            f->compare = 0;
        } else {
            /* scales given to a float cache */
            kc->k_scale = shape(FLASHATTN_F32, 1, 1, c->hkv, 1, 0);
            kc->k_scale.data = never_read;
            kc->k_scale_kind = FLASHATTN_SCALE_PER_HEAD;
            note(f, " edit:scales on a float cache");
        }
        break;
    case 10:
        if (!c->quant) break;
        if (fz_chance(&f->in, 2)) {
            flashattn_scale_kind *kind = fz_chance(&f->in, 2) ? &kc->k_scale_kind : &kc->v_scale_kind;
            *kind = (flashattn_scale_kind)FZ_PICK(&f->in, -1, 3, 7, 0, 1, 2);
            f->compare = 0;
            note(f, " edit:%s_scale_kind=%d", kind == &kc->k_scale_kind ? "k" : "v", (int)*kind);
        } else {
            /* the first scale value: only positive finite fixed ones are valid */
            c->value_edit = 1 + (int)fz_below(&f->in, 2);
            c->edited_value = (float)FZ_PICK(&f->in, 0, -1, 1, 2) * (fz_chance(&f->in, 2) ? 1.0f : 1e-40f);
            if (fz_chance(&f->in, 3)) c->edited_value = fz_chance(&f->in, 2) ? NAN : INFINITY;
            f->compare = 0;
            note(f, " edit:%s_scale[0]=%g", c->value_edit == 1 ? "k" : "v", (double)c->edited_value);
        }
        break;
    default:
        c->p.bias = &c->mods.bias.s; /* (zeroed: its sizes fit no problem with rows) */
        f->compare = 0;
        note(f, " edit:bias given");
        break;
    }
}

/* Whether the header forbids the cache as edited (fields past its
 * struct_size unread), against q's head_dim and the sequences' appends. */
static int cache_forbidden(const dec_call *c) {
    flashattn_kv_cache v;
    const flashattn_kv_cache *kc = &c->cache;
    if (kc->struct_size != sizeof v && kc->struct_size != offsetof(flashattn_kv_cache, batch_idx)) return 1;
    flashattn_kv_cache_init(&v);
    memcpy(&v, kc, kc->struct_size);
    if (cache_tensor_forbidden(&v.k) || cache_tensor_forbidden(&v.v) || !same_dims(&v.k, &v.v) ||
        v.k.dtype != v.v.dtype)
        return 1;
    for (int t = 0; t < 2; t++) {
        const flashattn_tensor *sc = t ? &v.v_scale : &v.k_scale, *kv = t ? &v.v : &v.k;
        const flashattn_scale_kind kind = t ? v.v_scale_kind : v.k_scale_kind;
        if (!fa_dtype_quant(kv->dtype)) {
            if (sc->data) return 1; /* scales are an 8-bit cache's */
            continue;
        }
        if (kind != FLASHATTN_SCALE_PER_TOKEN && kind != FLASHATTN_SCALE_PER_CHANNEL && kind != FLASHATTN_SCALE_PER_HEAD)
            return 1;
        if (!sc->data && kv->batch > 0 && kv->seqlen > 0) return 1;
        if (sc->dtype != FLASHATTN_F32 || tensor_forbidden(sc)) return 1;
        const int token = kind == FLASHATTN_SCALE_PER_TOKEN;
        if (sc->batch != (token ? kv->batch : 1) || sc->seqlen != (token ? kv->seqlen : 1) ||
            sc->heads != kv->heads || sc->head_dim != (kind == FLASHATTN_SCALE_PER_CHANNEL ? kv->head_dim : 1))
            return 1;
        if (token && c->has_new && !rows_own_memory(sc)) return 1; /* the append writes them */
        /* fixed scales must be finite and > 0: an edited first one */
        if (!token && c->value_edit == 1 + t && !(c->edited_value > 0.0f && c->edited_value <= FLT_MAX)) return 1;
    }
    if ((v.seqlens_i32 && v.seqlens_i64) || (!v.seqlens_i32 && !v.seqlens_i64 && c->nseq > 0)) return 1;
    if (v.rotary_cos || v.rotary_sin) {
        if (!v.rotary_cos || !v.rotary_sin || v.rotary_dim < 2 || v.rotary_dim % 2 || v.rotary_dim > c->d ||
            v.rotary_len < 0 || (v.rotary_interleaved != 0 && v.rotary_interleaved != 1))
            return 1;
    }
    int64_t capacity = v.k.seqlen;
    if (v.block_table) {
        if (v.batch_idx || v.max_pages_per_seq < 0 || c->bad_table ||
            __builtin_mul_overflow(v.max_pages_per_seq, v.k.seqlen, &capacity))
            return 1;
    }
    for (int64_t b = 0; b < c->nseq; b++) {
        const int64_t len = v.seqlens_i64 ? c->lens64[b] : c->lens32[b];
        const int64_t pad = v.leftpad ? c->leftpad[b] : 0;
        if (len < 0 || len > capacity || pad < 0 || pad > len || dec_added(c, b) > capacity - len) return 1;
        if (v.batch_idx && (c->bidx[b] < 0 || c->bidx[b] >= v.k.batch)) return 1;
    }
    return 0;
}

/* Scale of element x of cache row j (kv-head h) of sequence b, read from
 * scale bytes `sb` laid out as sc describes for `kind`. */
static float scale_of(const dec_call *c, const flashattn_tensor *sc, flashattn_scale_kind kind,
                      const unsigned char *sb, int64_t b, int64_t j, int64_t h, int64_t x) {
    const int64_t at = kind == FLASHATTN_SCALE_PER_TOKEN ? cache_at(c, sc, b, j, h)
                       : kind == FLASHATTN_SCALE_PER_CHANNEL ? h * sc->stride_head + x
                                                             : h * sc->stride_head;
    float s;
    memcpy(&s, sb + (size_t)at * sizeof(float), sizeof s);
    return s;
}

/* The cache as a successful call must leave it: every byte as it was but
 * the appended rows, which hold k_new / v_new rounded to the cache dtype
 * (an 8-bit one: narrow(x / scale) by core/quant.h's rule, per-token
 * scales of the appended rows written into *sexp). With rotary the
 * appended rows are rotated, so only the rest is known: *mask and *smask
 * mark the bytes to compare. sbuf: the scales of an 8-bit cache, else NULL. */
static unsigned char *expected_cache(const dec_call *c, const fz_buf *cache, const fz_buf *nw, unsigned char **mask,
                                     const fz_buf *sbuf, flashattn_scale_kind kind, unsigned char **sexp,
                                     unsigned char **smask) {
    unsigned char *e = fz_copy(cache->mem, cache->bytes);
    *mask = malloc(cache->bytes ? cache->bytes : 1);
    memset(*mask, 1, cache->bytes);
    const size_t sbytes = sbuf ? sbuf->bytes : 0;
    *sexp = sbuf ? fz_copy(sbuf->mem, sbytes) : NULL;
    *smask = sbuf ? malloc(sbytes ? sbytes : 1) : NULL;
    if (sbuf) memset(*smask, 1, sbytes);
    const flashattn_tensor *t = &cache->t;
    const size_t es = fz_esize(t->dtype);
    float row[FLASHATTN_MAX_HEAD_DIM];
    for (int64_t b = 0; b < c->nseq && c->has_new; b++)
        for (int64_t j = 0; j < dec_added(c, b); j++)
            for (int64_t h = 0; h < c->hkv; h++) {
                const int64_t at = cache_at(c, t, b, dec_len(c, b) + j, h);
                for (int64_t x = 0; x < c->d; x++)
                    row[x] = (float)(c->varlen ? fa_tensor_get(&nw->t, 0, c->cu_q[b] + j, h, x)
                                               : fa_tensor_get(&nw->t, b, j, h, x));
                if (sbuf && kind == FLASHATTN_SCALE_PER_TOKEN) {
                    const float s = fa_quant_token_scale(row, c->d, t->dtype);
                    const size_t sat = (size_t)cache_at(c, &sbuf->t, b, dec_len(c, b) + j, h) * sizeof(float);
                    memcpy(*sexp + sat, &s, sizeof s);
                    if (c->rotary) memset(*smask + sat, 0, sizeof s);
                }
                for (int64_t x = 0; x < c->d; x++) {
                    const double v = row[x];
                    unsigned char *dst = e + (size_t)(at + x) * es;
                    if (sbuf) {
                        fa_quant_put(dst, t->dtype, 0, row[x],
                                     scale_of(c, &sbuf->t, kind, *sexp, b, dec_len(c, b) + j, h, x));
                    } else if (t->dtype == FLASHATTN_F32) {
                        const float v32 = (float)v;
                        memcpy(dst, &v32, 4);
                    } else {
                        const uint16_t v16 =
                            t->dtype == FLASHATTN_F16 ? fa_f32_to_f16((float)v) : fa_f32_to_bf16((float)v);
                        memcpy(dst, &v16, 2);
                    }
                    if (c->rotary) memset(*mask + (size_t)(at + x) * es, 0, es);
                }
            }
    return e;
}

static int same_where(const unsigned char *a, const unsigned char *b, const unsigned char *mask, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (mask[i] && a[i] != b[i]) return 0;
    return 1;
}

/* Rows of sequence b's keys (cache rows leftpad .. len + added - 1) out of
 * the expected cache, widened exactly to f32 [1, n, hkv, d]; an 8-bit
 * cache's dequantised (element * scale, one f32 product) with the
 * expected scales sb laid out as sc describes. */
static fz_buf gather(const dec_call *c, const fz_buf *cache, const unsigned char *bytes, int64_t b,
                     const flashattn_tensor *sc, flashattn_scale_kind kind, const unsigned char *sb) {
    const int64_t pad = c->cache.leftpad ? c->leftpad[b] : 0, n = dec_len(c, b) + dec_added(c, b) - pad;
    fz_buf w = dense(FLASHATTN_F32, 1, n, c->hkv, c->d);
    flashattn_tensor src = cache->t;
    src.data = (void *)bytes;
    for (int64_t j = 0; j < n; j++)
        for (int64_t h = 0; h < c->hkv; h++) {
            const int64_t at = cache_at(c, &src, b, pad + j, h);
            for (int64_t x = 0; x < c->d; x++) {
                flashattn_tensor one = src;
                one.batch = one.seqlen = one.heads = 1;
                one.data = (char *)bytes + (size_t)(at + x) * fz_esize(src.dtype);
                float v = (float)fa_tensor_get(&one, 0, 0, 0, 0);
                if (sb) v *= scale_of(c, sc, kind, sb, b, pad + j, h, x);
                memcpy(w.mem + (size_t)((j * c->hkv + h) * c->d + x) * 4, &v, 4);
            }
        }
    return w;
}

/* Query rows of sequence b, widened exactly to f32 [1, rows, hq, d]. */
static fz_buf widen_rows(const flashattn_tensor *t, int64_t batch, int64_t r0, int64_t n) {
    fz_buf w = dense(FLASHATTN_F32, 1, n, t->heads, t->head_dim);
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < t->heads; h++)
            for (int64_t x = 0; x < t->head_dim; x++) {
                const float v = (float)fa_tensor_get(t, batch, r0 + i, h, x);
                memcpy(w.mem + (size_t)((i * t->heads + h) * t->head_dim + x) * 4, &v, 4);
            }
    return w;
}

/* Each sequence's O and LSE against the reference over its expected
 * cache rows (dequantised for an 8-bit cache, with the expected scales
 * ksexp, vsexp): the all-f32 rule when q, the cache and k_new are f32, or
 * the cache 8-bit (docs/quantised-cache.md). */
static void check_dec(fz *f, const dec_call *c, const unsigned char *kexp, const unsigned char *vexp,
                      const unsigned char *ksexp, const unsigned char *vsexp) {
    const int f32 = c->q.t.dtype == FLASHATTN_F32 && (c->cache.k.dtype == FLASHATTN_F32 || c->quant) &&
                    (!c->has_new || c->kn.t.dtype == FLASHATTN_F32);
    flashattn_params pd = c->p;
    pd.varlen = NULL;
    for (int64_t b = 0; b < c->nseq; b++) {
        const int64_t rows = dec_rows_q(c, b), r0 = c->varlen ? c->cu_q[b] : 0, qb = c->varlen ? 0 : b;
        fz_buf q = widen_rows(&c->q.t, qb, r0, rows);
        fz_buf k = gather(c, &c->kc, kexp, b, &c->ks.t, c->cache.k_scale_kind, ksexp);
        fz_buf v = gather(c, &c->vc, vexp, b, &c->vs.t, c->cache.v_scale_kind, vsexp);
        if (c->quant && !(logit_bound(&q.t, &k.t, &c->p) < FLT_MAX / 64)) {
            fz_buf_free(&q), fz_buf_free(&k), fz_buf_free(&v);
            continue;
        }
        flashattn_tensor o = c->o.t;
        o.data = (char *)o.data + (size_t)(qb * o.stride_batch + r0 * o.stride_seq) * fz_esize(o.dtype);
        o.batch = 1, o.seqlen = rows;
        if (c->p.alibi_slopes)
            pd.alibi_slopes = c->p.alibi_slopes + b * c->p.alibi_batch_stride, pd.alibi_batch_stride = 0;
        const float *lse = !c->lse ? NULL : c->varlen ? c->lse + r0 : c->lse + b * c->hq * rows;
        char what[48];
        snprintf(what, sizeof what, "decode sequence %lld", (long long)b);
        check_fwd(f, &q.t, &k.t, &v.t, &o, lse, 0, c->varlen ? c->q.t.seqlen : rows, &pd, f32, what);
        fz_buf_free(&q), fz_buf_free(&k), fz_buf_free(&v);
    }
}

static void fuzz_dec(fz *f) {
    dec_call c;
    build_dec(f, &c);
    flashattn_tensor *ptrs[6] = {&c.q.t, &c.o.t, &c.cache.k, &c.cache.v, &c.kn.t, &c.vn.t};
    static const char *const names[6] = {"q", "o", "cache.k", "cache.v", "k_new", "v_new"};
    const int edits = fz_chance(&f->in, 2) ? 1 + (int)fz_below(&f->in, 3) : 0;
    int new_null = !c.has_new, edited_tensor = 0, cache_null = 0;
    for (int e = 0; e < edits; e++) {
        const unsigned kind = fz_below(&f->in, 10);
        if (kind < 3) {
            edit_tensor(f, ptrs, names, c.has_new ? 6 : 4);
            edited_tensor = 1;
        } else if (kind < 6) {
            edit_params(f, &c.p);
        } else if (kind < 9) {
            edit_cache(f, &c);
        } else {
            /* k_new without v_new, or the cache pointer NULL */
            if (fz_chance(&f->in, 2) && c.has_new) new_null = 2;
            else cache_null = 1;
            note(f, " edit:%s", new_null == 2 ? "v_new=NULL" : "cache=NULL");
        }
    }
    {
        const flashattn_tensor *q = &c.q.t, *o = &c.o.t, *kn = &c.kn.t, *vn = &c.vn.t, *ck = &c.cache.k;
        const int varlen = c.varlen && reads_varlen(&c.p);
        f->invalid = cache_null || new_null == 2 || tensor_forbidden(q) || tensor_forbidden(o) ||
                     params_forbidden(&c.p, 1) || (c.has_new && (tensor_forbidden(kn) || tensor_forbidden(vn)));
        if (!f->invalid)
            f->invalid = cache_forbidden(&c) || !same_dims(q, o) || q->head_dim != ck->head_dim ||
                         q->heads % ck->heads != 0 || (varlen && q->batch != 1) ||
                         (!c.cache.block_table && !(c.cache.struct_size == sizeof c.cache && c.cache.batch_idx) &&
                          ck->batch != (varlen ? c.nseq : q->batch)) ||
                         (c.has_new && (!same_dims(kn, vn) || kn->batch != q->batch || kn->heads != ck->heads ||
                                        kn->head_dim != q->head_dim || (varlen && kn->seqlen != q->seqlen)));
    }
    /* descriptor edits land on the buffers the cache struct describes */
    c.kc.t = c.cache.k, c.vc.t = c.cache.v;
    f->edits = edits;
    f->compare = f->compare && !c.rotary && !edited_tensor && !(edits && c.varlen);
    fz_buf *bufs[6] = {&c.q, &c.o, &c.kn, &c.vn, &c.kc, &c.vc};
    for (int i = 0; i < 6; i++) {
        if (i >= 2 && i < 4 && !c.has_new) continue;
        fz_buf_alloc(bufs[i], &f->rng, 1.0);
        if (i == 1) fz_buf_sentinel(bufs[i]);
        if (!bufs[i]->covered && !f->invalid) goto done;
    }
    c.cache.k.data = c.kc.t.data, c.cache.v.data = c.vc.t.data;
    if (c.quant) {
        /* scales as a per-token quantisation of N(0, 1) rows would give, times
         * 2^[-1, 1]; then the edited value, if any */
        c.ks.t = c.cache.k_scale, c.vs.t = c.cache.v_scale;
        fz_buf *sb[2] = {&c.ks, &c.vs};
        for (int t = 0; t < 2; t++) {
            fz_buf_alloc(sb[t], &f->rng, 1.0);
            if (!sb[t]->covered && !f->invalid) goto done;
            if (sb[t]->t.dtype != FLASHATTN_F32) continue;
            const float unit = 3.0f / fa_quant_max(c.cache.k.dtype);
            for (size_t i = 0; i < sb[t]->bytes / sizeof(float); i++) {
                const float x = unit * exp2f((float)(fa_rand_u64(&f->rng) % 2049) / 1024.0f - 1.0f);
                memcpy(sb[t]->mem + i * sizeof(float), &x, sizeof x);
            }
            if (c.value_edit == 1 + t && sb[t]->bytes >= sizeof(float)) memcpy(sb[t]->mem, &c.edited_value, sizeof(float));
        }
        c.cache.k_scale.data = c.ks.t.data, c.cache.v_scale.data = c.vs.t.data;
    }
    {
        const int64_t ln = lse_count(&c.q.t);
        c.lse_n = ln >= 0 ? (size_t)ln : 0;
        if (fz_chance(&f->in, 4)) c.lse_n = 0; /* (no LSE asked for) */
        else {
            c.lse = malloc((c.lse_n + 1) * sizeof(float));
            memset(c.lse, 0x5a, c.lse_n * sizeof(float));
        }
    }
    {
        const flashattn_kv_cache *cp = cache_null ? NULL : &c.cache;
        const flashattn_tensor *kn = new_null == 1 ? NULL : &c.kn.t, *vn = new_null ? NULL : &c.vn.t;
        size_t need = 0;
        const flashattn_status ss =
            fa_decode_workspace_size_ex(ptrs[0], cp, kn, vn, ptrs[1], c.lse, &c.p, f->kern, &need);
        fz_ws w;
        make_ws(f, &w, ss, need);
        unsigned char *o0 = fz_copy(c.o.mem, c.o.bytes), *l0 = fz_copy(c.lse, c.lse_n * sizeof(float));
        unsigned char *k0 = fz_copy(c.kc.mem, c.kc.bytes), *v0 = fz_copy(c.vc.mem, c.vc.bytes);
        unsigned char *ks0 = fz_copy(c.ks.mem, c.ks.bytes), *vs0 = fz_copy(c.vs.mem, c.vs.bytes);
        unsigned char *km = NULL, *vm = NULL, *kexp = NULL, *vexp = NULL;
        unsigned char *ksm = NULL, *vsm = NULL, *ksexp = NULL, *vsexp = NULL;
        /* (what an invalid edit made of the lengths would index past the cache) */
        if (!f->invalid && (f->compare || !edits)) {
            kexp = expected_cache(&c, &c.kc, &c.kn, &km, c.quant ? &c.ks : NULL, c.cache.k_scale_kind, &ksexp, &ksm);
            vexp = expected_cache(&c, &c.vc, &c.vn, &vm, c.quant ? &c.vs : NULL, c.cache.v_scale_kind, &vsexp, &vsm);
        }
        const flashattn_status s = fa_decode_ex(ptrs[0], cp, kn, vn, ptrs[1], c.lse, &c.p, w.mem, w.bytes, f->kern);
        check_status(f, ss, s, &w);
        if (s != FLASHATTN_OK) {
            untouched(f, c.o.mem, o0, c.o.bytes, "o");
            untouched(f, c.lse, l0, c.lse_n * sizeof(float), "lse");
            untouched(f, c.kc.mem, k0, c.kc.bytes, "cache.k");
            untouched(f, c.vc.mem, v0, c.vc.bytes, "cache.v");
            untouched(f, c.ks.mem, ks0, c.ks.bytes, "cache.k_scale");
            untouched(f, c.vs.mem, vs0, c.vs.bytes, "cache.v_scale");
        } else if (kexp) {
            if (!edits && (!same_where(c.kc.mem, kexp, km, c.kc.bytes) || !same_where(c.vc.mem, vexp, vm, c.vc.bytes)))
                fz_fail(f->ctx, "the cache after the call is not the old rows plus the appended ones");
            if (!edits && c.quant &&
                (!same_where(c.ks.mem, ksexp, ksm, c.ks.bytes) || !same_where(c.vs.mem, vsexp, vsm, c.vs.bytes)))
                fz_fail(f->ctx, "the scales after the call are not the old ones plus the appended rows'");
            if (f->compare && (c.quant || logit_bound(&c.q.t, &c.kc.t, &c.p) < FLT_MAX / 64))
                check_dec(f, &c, kexp, vexp, ksexp, vsexp);
        }
        free(o0), free(l0), free(k0), free(v0), free(km), free(vm), free(kexp), free(vexp), free(w.mem);
        free(ks0), free(vs0), free(ksm), free(vsm), free(ksexp), free(vsexp);
    }
done:
    for (int i = 0; i < 6; i++) fz_buf_free(bufs[i]);
    fz_buf_free(&c.ks), fz_buf_free(&c.vs);
    free(c.lse), free(c.rot_cos), free(c.rot_sin);
    free_mods(&c.mods);
}

/* ---- merge -------------------------------------------------------------- */

#define MAXPARTS 5

static void fuzz_merge(fz *f) {
    int64_t n = fz_below(&f->in, MAXPARTS + 1);
    const int64_t B = fz_below(&f->in, 3), S = fz_below(&f->in, 7), H = 1 + fz_below(&f->in, 4);
    const int64_t D = fz_chance(&f->in, 8) ? 128 : 1 + fz_below(&f->in, 33);
    fz_buf part[MAXPARTS + 1], o;
    memset(part, 0, sizeof part), memset(&o, 0, sizeof o);
    float *lp[MAXPARTS + 1] = {NULL};
    const size_t ln = (size_t)(B * H * S);
    flashattn_tensor pt[MAXPARTS + 1];
    const int inplace = n > 0 && fz_chance(&f->in, 4);
    for (int64_t i = 0; i < n; i++) {
        part[i].t = shape(pick_dtype(f), B, S, H, D, (int)fz_below(&f->in, inplace && i == 0 ? 4 : 6));
        fz_buf_alloc(&part[i], &f->rng, 1.0);
        lp[i] = malloc((ln + 1) * sizeof(float));
        for (size_t r = 0; r < ln; r++) {
            const unsigned kind = fz_below(&f->in, 16);
            lp[i][r] = kind < 4 ? -INFINITY : kind == 4 ? 1e30f : kind == 5 ? -1e30f
                                                          : (float)((int)fz_below(&f->in, 256) - 128) / 6.0f;
        }
        /* rows a part did not see hold NaN (unless broadcast layouts share
         * them with rows it saw): they must not be read */
        const flashattn_tensor *t = &part[i].t;
        const int own_rows = (B < 2 || t->stride_batch) && (S < 2 || t->stride_seq) && (H < 2 || t->stride_head);
        for (int64_t r = 0; own_rows && r < (int64_t)ln; r++)
            if (lp[i][r] == -INFINITY) {
                const int64_t b = r / (H * S), h = r / S % H, s = r % S;
                const size_t es = fz_esize(t->dtype);
                memset(part[i].mem + (size_t)(b * t->stride_batch + s * t->stride_seq + h * t->stride_head) * es,
                       0xff, (size_t)D * es);
            }
        pt[i] = part[i].t;
    }
    o.t = inplace ? part[0].t : shape(pick_dtype(f), B, S, H, D, (int)fz_below(&f->in, 4));
    float *lse = NULL;
    const int want_lse = !fz_chance(&f->in, 4);
    flashattn_params p;
    flashattn_params_init(&p);
    p.num_threads = (int)fz_below(&f->in, 4);
    const flashattn_params *pp = fz_chance(&f->in, 4) ? NULL : &p;
    note(f, " merge n=%lld b=%lld s=%lld h=%lld d=%lld inplace=%d odt=%d", (long long)n, (long long)B,
         (long long)S, (long long)H, (long long)D, inplace, (int)o.t.dtype);
    /* the reference, from the parts as given */
    double *ref = malloc((size_t)(B * S * H * D + 1) * sizeof(double)), *rl = malloc((ln + 1) * sizeof(double));
    double pmax = 1.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                const size_t r = (size_t)((b * H + h) * S + s);
                double m = -INFINITY, sum = 0.0;
                for (int64_t i = 0; i < n; i++) m = fmax(m, lp[i][r]);
                for (int64_t i = 0; i < n && m > -INFINITY; i++) sum += exp(lp[i][r] - m);
                rl[r] = m > -INFINITY ? m + log(sum) : -INFINITY;
                for (int64_t x = 0; x < D; x++) {
                    double acc = 0.0;
                    for (int64_t i = 0; i < n && m > -INFINITY; i++)
                        if (lp[i][r] > -INFINITY) {
                            const double v = fa_tensor_get(&part[i].t, b, s, h, x);
                            /* (not exp(lse - LSE): at 1e30 LSE has lost log(sum)) */
                            acc += exp(lp[i][r] - m) / sum * v;
                            pmax = fmax(pmax, fabs(v));
                        }
                    ref[((b * S + s) * H + h) * D + x] = acc;
                }
            }
    if (inplace) {
        o = part[0], lse = want_lse ? lp[0] : NULL;
    } else {
        fz_buf_alloc(&o, &f->rng, 1.0);
        fz_buf_sentinel(&o);
        if (want_lse) {
            lse = malloc((ln + 1) * sizeof(float));
            memset(lse, 0x5a, ln * sizeof(float));
        }
    }
    /* edits */
    const flashattn_tensor *parts_arg = pt;
    const float *lse_given[MAXPARTS + 1];
    for (int64_t i = 0; i <= MAXPARTS; i++) lse_given[i] = lp[i];
    const float *const *lse_arg = lse_given;
    flashattn_tensor *optr = &o.t;
    int64_t n_arg = n;
    const int edits = fz_chance(&f->in, 2) ? 1 + (int)fz_below(&f->in, 2) : 0;
    for (int e = 0; e < edits; e++) {
        switch (fz_below(&f->in, 5)) {
        case 0:
            n_arg = FZ_PICK(&f->in, -1, INT64_MIN);
            note(f, " edit:n_parts=%lld", (long long)n_arg);
            break;
        case 1:
            if (fz_chance(&f->in, 2)) parts_arg = NULL;
            else lse_arg = NULL;
            note(f, " edit:%s=NULL", parts_arg ? "lse_parts" : "o_parts");
            break;
        case 2:
            if (!n) break;
            lse_given[fz_below(&f->in, (unsigned)n)] = NULL;
            note(f, " edit:lse_parts[i]=NULL");
            break;
        case 3: {
            flashattn_tensor *ts[MAXPARTS + 1];
            const char *nm[MAXPARTS + 1] = {"o", "part0", "part1", "part2", "part3", "part4"};
            ts[0] = &o.t;
            for (int64_t i = 0; i < n; i++) ts[i + 1] = &pt[i];
            edit_tensor(f, ts, nm, (int)n + 1);
            f->compare = 0;
            break;
        }
        default:
            optr = NULL;
            note(f, " edit:o=NULL");
            break;
        }
    }
    f->edits = edits;
    f->invalid = !optr || tensor_forbidden(&o.t) || n_arg < 0 || (n_arg > 0 && (!parts_arg || !lse_arg));
    for (int64_t i = 0; !f->invalid && i < n_arg; i++)
        if (tensor_forbidden(&pt[i]) || !same_dims(&pt[i], &o.t) ||
            (!lse_given[i] && o.t.batch > 0 && o.t.seqlen > 0)) /* (rows: o has heads >= 1) */
            f->invalid = 1;
    int covered = 1;
    for (int64_t i = 0; i < n; i++)
        if (fz_extent(&pt[i]) < 0 || (size_t)fz_extent(&pt[i]) * fz_esize(pt[i].dtype) > part[i].bytes) covered = 0;
    if (fz_extent(&o.t) < 0 || (size_t)fz_extent(&o.t) * fz_esize(o.t.dtype) > o.bytes) covered = 0;
    if (covered || f->invalid) {
        unsigned char *o0 = fz_copy(o.mem, o.bytes), *l0 = lse ? fz_copy(lse, ln * sizeof(float)) : NULL;
        const flashattn_status s = fa_merge_ex(n_arg, parts_arg, lse_arg, optr, lse, pp, f->kern);
        const fz_ws none = {NULL, 0, 0};
        check_status(f, FLASHATTN_OK, s, &none);
        if (s != FLASHATTN_OK) {
            untouched(f, o.mem, o0, o.bytes, "o");
            if (lse) untouched(f, lse, l0, ln * sizeof(float), "lse");
        } else if (f->compare) {
            for (int64_t b = 0; b < B; b++)
                for (int64_t s2 = 0; s2 < S; s2++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t x = 0; x < D; x++) {
                            const double r = ref[((b * S + s2) * H + h) * D + x];
                            const double e = beyond_rounding(fa_tensor_get(&o.t, b, s2, h, x), r, o.t.dtype);
                            if (!(e <= 1e-5 * pmax))
                                fz_fail(f->ctx, "merge: O[%lld,%lld,%lld,%lld] = %.9g, reference %.9g",
                                        (long long)b, (long long)s2, (long long)h, (long long)x,
                                        fa_tensor_get(&o.t, b, s2, h, x), r);
                        }
            for (size_t r = 0; lse && r < ln; r++)
                if (!(isinf(rl[r]) ? lse[r] == rl[r] : fabs(lse[r] - rl[r]) <= 1e-5 * fmax(1.0, fabs(rl[r]))))
                    fz_fail(f->ctx, "merge: LSE[%zu] = %.9g, reference %.9g", r, (double)lse[r], rl[r]);
        }
        free(o0), free(l0);
    }
    free(ref), free(rl);
    if (!inplace) {
        fz_buf_free(&o);
        free(lse);
    }
    for (int64_t i = 0; i < n; i++) fz_buf_free(&part[i]);
    for (int64_t i = 0; i <= MAXPARTS; i++) free(lp[i]);
}

/* ---- entry -------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const fa_kernels *isas[8];
    static int nisa;
    if (!nisa) nisa = tt_isas(isas, 8);
    fz f;
    memset(&f, 0, sizeof f);
    f.in.p = data, f.in.n = size;
    f.compare = 1;
    const unsigned entry = fz_byte(&f.in) % 4;
    f.kern = isas[fz_below(&f.in, (unsigned)nisa)];
    for (size_t i = 0; i < 8; i++) f.rng = f.rng << 8 | fz_byte(&f.in);
    static const char *const entries[4] = {"fwd", "bwd", "decode", "merge"};
    note(&f, "%s [%s]", entries[entry], f.kern->isa);
    switch (entry) {
    case 0: fuzz_fwd(&f); break;
    case 1: fuzz_bwd(&f); break;
    case 2: fuzz_dec(&f); break;
    default: fuzz_merge(&f); break;
    }
    return 0;
}
