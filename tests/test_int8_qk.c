/*
 * The forward's 8-bit Q K^T (params.precision FLASHATTN_PRECISION_INT8_QK)
 * on every ISA path:
 *   - against the FP64 reference of the attention it claims to compute:
 *     S = sq sk (q8 . k8) + q . m from the same quantisation (core/quant.h,
 *     redone here), fed to fa_reference_fwd_f64 as f32 rows whose products
 *     are exact (each scale cut in two halves of 12 bits), so the
 *     reference's masks, modifiers and varlen come along; O and the LSE
 *     within the f32 rule (test_forward's), every dtype, GQA, causal and
 *     window in both alignments, softcap, ALiBi, sinks, bias and mask
 *     arrays, dropout, varlen with seqused_k, head_dim not a multiple of 4,
 *     several smoothing chunks;
 *   - INT8_QK_INT8_PV likewise, with V rounded per channel and chunk in the
 *     reference and O held to the f32 rule plus, row by row, the most
 *     that P's u8 rounding can move it (pv8_excess);
 *   - the same bits on 1 and 2 threads, and whatever block_m;
 *   - its error against the exact FP64 attention on Gaussian inputs and on
 *     K with outlier channels held to the measured bounds
 *     (docs/precision.md): cosine similarity and max error over max |O|;
 *   - the NaN rule per row: a NaN in one key reaches only the rows that
 *     see it, and stays out of its chunk's mean;
 *   - bad input: an unknown precision, flashattn_bwd and flashattn_decode
 *     with INT8_QK: a status, nothing written.
 * gemm_i8, gemm_u8 and quant_u8 themselves are checked against the portable
 * kernels in test_kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/forward.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref.h"
#include "plan/tiles.h"
#include "reference/attn_f64.h"
#include "reference/compare.h"
#include "testutil.h"

#define LN2 0.6931471805599453

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    flashattn_dtype dt;
    int causal, top_left;
    int64_t wl, wr;
    float softcap;
    int alibi, sinks, bias, mask, varlen, block_m;
    float dropout;
} icase;

/* A sequence's key rows: batch entry kb, rows [k0, k0 + n). */
typedef struct {
    int64_t kb, k0, n, qb, q0, nq;
} span;

/* x as hi + lo, each of at most 12 significant bits, so that hi * q and
 * lo * q are exact in f32 for |q| <= 127. */
static void split12(float x, float *hi, float *lo) {
    if (!isfinite(x) || x == 0.0f) {
        *hi = x, *lo = isfinite(x) ? 0.0f : x;
        return;
    }
    int e;
    frexpf(x, &e);
    const float unit = ldexpf(1.0f, e - 12);
    *hi = rintf(x / unit) * unit;
    *lo = x - *hi;
}

static void put(tt_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c, float x) {
    const flashattn_tensor *d = &t->t;
    ((float *)d->data)[b * d->stride_batch + s * d->stride_seq + h * d->stride_head + c] = x;
}

/* One row of a hat: f[p] * r8 in columns [p d, (p + 1) d), tail in [4 d, 5 d). */
static void put_hat(tt_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d, const int8_t *r8,
                    const float f[4], const float *tail) {
    for (int64_t c = 0; c < d; c++) {
        for (int p = 0; p < 4; p++) put(t, b, s, h, p * d + c, f[p] * r8[c]);
        put(t, b, s, h, 4 * d + c, tail[c]);
    }
}

/* The reference's Q^ and K^ (f32, 5 d): Q^ = [sh q8, sh q8, sl q8, sl q8, q],
 * K^ = [kh k8, kl k8, kh k8, kl k8, m], so Q^ . K^ = sq sk q8 . k8 + q . m
 * exactly in the reference's double sums. */
static void hats(const icase *c, const fa_kernels *kern, const tt_tensor *q, const tt_tensor *k,
                 const span *seqs, int64_t nseq, float scale_log2, tt_tensor *qh, tt_tensor *kh) {
    const int64_t d = c->d, chunk = fa_pack_chunk(kern);
    float x[FLASHATTN_MAX_HEAD_DIM], mean[FLASHATTN_MAX_HEAD_DIM], s, hi, lo;
    double sum[FLASHATTN_MAX_HEAD_DIM];
    int8_t q8[FLASHATTN_MAX_HEAD_DIM];
    for (int64_t z = 0; z < nseq; z++) {
        const span *sp = &seqs[z];
        for (int64_t i = 0; i < sp->nq; i++)
            for (int64_t h = 0; h < c->hq; h++) {
                for (int64_t t = 0; t < d; t++)
                    x[t] = (float)fa_tensor_get(&q->t, sp->qb, sp->q0 + i, h, t) * scale_log2;
                fa_i8_row(x, d, q8, &s);
                split12(s, &hi, &lo);
                put_hat(qh, sp->qb, sp->q0 + i, h, d, q8, (const float[4]){hi, hi, lo, lo}, x);
            }
        for (int64_t h = 0; h < c->hkv; h++)
            for (int64_t j0 = 0; j0 < sp->n; j0 += chunk) {
                const int64_t j1 = j0 + chunk < sp->n ? j0 + chunk : sp->n;
                int64_t count = 0;
                memset(sum, 0, sizeof sum);
                for (int64_t j = j0; j < j1; j++) {
                    for (int64_t t = 0; t < d; t++) x[t] = (float)fa_tensor_get(&k->t, sp->kb, sp->k0 + j, h, t);
                    fa_i8_mean_add(sum, &count, x, d);
                }
                fa_i8_mean_get(mean, sum, count, d);
                for (int64_t j = j0; j < j1; j++) {
                    for (int64_t t = 0; t < d; t++)
                        x[t] = (float)fa_tensor_get(&k->t, sp->kb, sp->k0 + j, h, t) - mean[t];
                    fa_i8_row(x, d, q8, &s);
                    split12(s, &hi, &lo);
                    put_hat(kh, sp->kb, sp->k0 + j, h, d, q8, (const float[4]){hi, lo, hi, lo}, mean);
                }
            }
    }
}

/* INT8_QK_INT8_PV's V (core/quant.h), in place in vf (f32, V's values):
 * each sequence's chunks of keys per kv-head, each channel as sv * v8
 * (the product rounded to f32 once, well inside the f32 rule). */
static void v_hats(const icase *c, const fa_kernels *kern, const span *seqs, int64_t nseq, tt_tensor *vf) {
    const int64_t d = c->d, chunk = fa_pack_chunk(kern);
    uint32_t amax[FLASHATTN_MAX_HEAD_DIM];
    float inv[FLASHATTN_MAX_HEAD_DIM], sv[FLASHATTN_MAX_HEAD_DIM];
    for (int64_t z = 0; z < nseq; z++) {
        const span *sp = &seqs[z];
        for (int64_t h = 0; h < c->hkv; h++)
            for (int64_t j0 = 0; j0 < sp->n; j0 += chunk) {
                const int64_t j1 = j0 + chunk < sp->n ? j0 + chunk : sp->n;
                for (int64_t t = 0; t < d; t++) amax[t] = 0;
                for (int64_t j = j0; j < j1; j++)
                    for (int64_t t = 0; t < d; t++) {
                        const uint32_t u = fa_f32_bits((float)fa_tensor_get(&vf->t, sp->kb, sp->k0 + j, h, t)) & 0x7fffffffu;
                        if (u > amax[t]) amax[t] = u;
                    }
                for (int64_t t = 0; t < d; t++) sv[t] = fa_i8_col_scale(amax[t], &inv[t]);
                for (int64_t j = j0; j < j1; j++)
                    for (int64_t t = 0; t < d; t++) {
                        const float x = (float)fa_tensor_get(&vf->t, sp->kb, sp->k0 + j, h, t);
                        put(vf, sp->kb, sp->k0 + j, h, t, (float)((double)fa_i8_put(x, amax[t], inv[t]) * sv[t]));
                    }
            }
    }
}

typedef struct {
    tt_tensor q, k, v;
    int32_t cu_q[9], cu_k[9], used[8];
    flashattn_varlen vl;
    span seqs[8];
    int64_t nseq, rows_q, rows_k;
    float slopes[64], sinks[16];
    flashattn_scores bias, mask;
    float *bias_mem;
    uint8_t *mask_mem;
} inputs;

static void make_inputs(const icase *c, inputs *in, uint64_t *rng, double outliers) {
    memset(in, 0, sizeof *in);
    const int64_t B = c->varlen ? 1 : c->b;
    if (c->varlen) { /* c->b sequences of lengths up to sq / sk, one empty */
        in->cu_q[0] = in->cu_k[0] = 0;
        for (int64_t z = 0; z < c->b; z++) {
            const int64_t nq = z == 1 ? 0 : 1 + (int64_t)(tt_rand_u64(rng) % (uint64_t)c->sq);
            const int64_t nk = z == 1 ? 0 : 1 + (int64_t)(tt_rand_u64(rng) % (uint64_t)c->sk);
            in->cu_q[z + 1] = in->cu_q[z] + (int32_t)nq, in->cu_k[z + 1] = in->cu_k[z] + (int32_t)nk;
            in->used[z] = (int32_t)(nk - (nk > 3 ? nk / 3 : 0));
            in->seqs[z] = (span){0, in->cu_k[z], in->used[z], 0, in->cu_q[z], nq};
        }
        in->nseq = c->b;
        in->rows_q = in->cu_q[c->b], in->rows_k = in->cu_k[c->b];
        flashattn_varlen_init(&in->vl);
        in->vl.batch = c->b, in->vl.cu_seqlens_q = in->cu_q, in->vl.cu_seqlens_k = in->cu_k;
        in->vl.seqused_k = in->used;
    } else {
        for (int64_t z = 0; z < c->b; z++) in->seqs[z] = (span){z, 0, c->sk, z, 0, c->sq};
        in->nseq = c->b, in->rows_q = c->sq, in->rows_k = c->sk;
    }
    in->q = tt_alloc(c->dt, B, in->rows_q, c->hq, c->d, 1, 0);
    in->k = tt_alloc(c->dt, B, in->rows_k, c->hkv, c->d, 1, 3);
    in->v = tt_alloc(c->dt, B, in->rows_k, c->hkv, c->d, 0, 0);
    tt_fill_normal(&in->q, rng, 1.0), tt_fill_normal(&in->k, rng, 1.0), tt_fill_normal(&in->v, rng, 1.0);
    if (outliers > 0) { /* a shared offset on every channel and big channels, as real K has */
        const flashattn_tensor *t = &in->k.t;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < in->rows_k; j++)
                for (int64_t h = 0; h < c->hkv; h++)
                    for (int64_t x = 0; x < c->d; x++) {
                        char *e = (char *)t->data + (size_t)(b * t->stride_batch + j * t->stride_seq +
                                                             h * t->stride_head + x) * flashattn_dtype_size(c->dt);
                        double v = fa_widen_ref(e, c->dt, 0) + 0.5 * sin(0.7 * (double)x + (double)h);
                        if (x % 16 == 3) v = v * outliers + 2.0 * outliers;
                        fa_store_ref(e, c->dt, &(float){(float)v}, 1, 1.0f);
                    }
    }
    for (int x = 0; x < 64; x++) in->slopes[x] = 0.05f * (float)(1 + x % 7);
    for (int x = 0; x < 16; x++) in->sinks[x] = 0.3f * (float)(x % 5) - 0.5f;
    const int64_t nb = c->varlen ? c->b : c->b, sq = c->sq, sk = c->sk;
    if (c->bias) {
        in->bias_mem = malloc((size_t)(nb * c->hq * sq * sk) * sizeof(float));
        for (int64_t x = 0; x < nb * c->hq * sq * sk; x++) in->bias_mem[x] = (float)tt_rand_normal(rng);
        in->bias = (flashattn_scores){in->bias_mem, FLASHATTN_F32, nb, c->hq, sq, sk,
                                      c->hq * sq * sk, sq * sk, sk, 1};
    }
    if (c->mask) {
        in->mask_mem = malloc((size_t)(nb * sq * sk));
        for (int64_t x = 0; x < nb * sq * sk; x++) in->mask_mem[x] = tt_rand_u64(rng) % 5 != 0;
        in->mask = (flashattn_scores){in->mask_mem, FLASHATTN_F32, nb, 1, sq, sk, sq * sk, 0, sk, 1};
    }
}

static void free_inputs(inputs *in) {
    tt_free(&in->q), tt_free(&in->k), tt_free(&in->v);
    free(in->bias_mem), free(in->mask_mem);
}

/* The option under test: INT8_QK, then INT8_QK_BF16_PV. */
static flashattn_precision g_precision = FLASHATTN_PRECISION_INT8_QK;
static int g_bf16_differs; /* whether a BF16_PV case came out other than INT8_QK */
static int g_pv8_differs;  /* whether an INT8_PV case came out other than INT8_QK */

static flashattn_params params_of(const icase *c, inputs *in) {
    flashattn_params p = flashattn_params_default();
    p.scale = 0.125f;
    p.causal = c->causal;
    p.align = c->top_left ? FLASHATTN_ALIGN_TOP_LEFT : FLASHATTN_ALIGN_BOTTOM_RIGHT;
    p.window_left = c->wl, p.window_right = c->wr;
    p.softcap = c->softcap;
    if (c->alibi) p.alibi_slopes = in->slopes;
    if (c->sinks) p.sinks = in->sinks;
    if (c->bias) p.bias = &in->bias;
    if (c->mask) p.mask = &in->mask;
    if (c->varlen) p.varlen = &in->vl;
    p.block_m = c->block_m;
    p.dropout_p = c->dropout, p.dropout_seed = 7;
    p.precision = g_precision;
    return p;
}

/* Runs the case on kern; o gets O, lse the LSE. */
static flashattn_status run(const icase *c, inputs *in, const fa_kernels *kern, flashattn_params p,
                            tt_tensor *o, float *lse) {
    size_t ws = 0;
    flashattn_status s = fa_fwd_workspace_size_ex(&in->q.t, &in->k.t, &in->v.t, &o->t, lse, &p, kern, &ws);
    if (s) return s;
    void *mem = malloc(ws ? ws : 1);
    s = fa_fwd_ex(&in->q.t, &in->k.t, &in->v.t, &o->t, lse, &p, mem, ws, kern);
    free(mem);
    (void)c;
    return s;
}

static const char *dtn(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

/* The FP64 reference of the case on the hats qh, kh and values vt (any
 * head_dim): ref [B][rows_q][hq][vt's head_dim], rlse (may be NULL) as the
 * library writes the LSE. */
static void reference(const icase *c, const inputs *in, const tt_tensor *qh, const tt_tensor *kh,
                      const tt_tensor *vt, flashattn_params pr, double *ref, double *rlse) {
    const int64_t dv = vt->t.head_dim;
    if (!c->varlen) {
        TT_CHECK(fa_reference_fwd_f64(&qh->t, &kh->t, &vt->t, &pr, ref, rlse) == FLASHATTN_OK, "reference: %s",
                 flashattn_last_error());
        return;
    }
    /* the reference is dense: sequence by sequence, LSE into [heads_q, total_q] */
    pr.varlen = NULL;
    for (int64_t z = 0; z < in->nseq; z++) {
        const span *sp = &in->seqs[z];
        flashattn_tensor qz = qh->t, kz = kh->t, vz = vt->t;
        qz.data = (float *)qh->t.data + sp->q0 * qh->t.stride_seq, qz.seqlen = sp->nq;
        kz.data = (float *)kh->t.data + sp->k0 * kh->t.stride_seq, kz.seqlen = sp->n;
        vz.data = (float *)vt->t.data + sp->k0 * vt->t.stride_seq, vz.seqlen = sp->n;
        double *zl = malloc((size_t)(c->hq * sp->nq + 1) * sizeof(double));
        TT_CHECK(fa_reference_fwd_f64(&qz, &kz, &vz, &pr, ref + sp->q0 * c->hq * dv, zl) == FLASHATTN_OK,
                 "reference of sequence %lld: %s", (long long)z, flashattn_last_error());
        if (rlse)
            for (int64_t h = 0; h < c->hq; h++)
                for (int64_t i = 0; i < sp->nq; i++) rlse[h * in->rows_q + sp->q0 + i] = zl[h * sp->nq + i];
        free(zl);
    }
}

/* INT8_QK_INT8_PV: the largest excess of a row's error in O over what P's
 * u8 rounding may add to it. In a row's final units (weights w_j of the
 * kv-blocks, after dropout, over l), a block's largest weight is at most
 * the row's, w_max, and each weight moves by at most half a step, w_max /
 * 510, or by itself when it rounds to 0: so O moves by at most max |V|
 * sum_j min(w_j, w_max / 510) / l. The weights w_j / l are the reference's
 * O on one-hot values, 64 keys a call. */
static double pv8_excess(const icase *c, const inputs *in, const tt_tensor *qh, const tt_tensor *kh,
                         flashattn_params pr, const tt_tensor *o, const double *ref, double vmax) {
    const int64_t B = c->varlen ? 1 : c->b, rows = B * in->rows_q * c->hq, nk = in->rows_k, D = 64;
    double *w = malloc((size_t)(rows * nk + 1) * sizeof(double));
    double *part = malloc((size_t)(rows * D + 1) * sizeof(double));
    tt_tensor e = tt_alloc(FLASHATTN_F32, B, nk, c->hkv, D, 1, 0);
    for (int64_t c0 = 0; c0 < nk; c0 += D) {
        memset(e.mem, 0, e.bytes);
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = c0; j < c0 + D && j < nk; j++)
                for (int64_t h = 0; h < c->hkv; h++) put(&e, b, j, h, j - c0, 1.0f);
        reference(c, in, qh, kh, &e, pr, part, NULL);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = c0; j < c0 + D && j < nk; j++) w[r * nk + j] = part[r * D + j - c0];
    }
    double excess = -INFINITY;
    for (int64_t r = 0; r < rows; r++) {
        double wmax = 0.0, moved = 0.0, err = 0.0;
        for (int64_t j = 0; j < nk; j++) wmax = fmax(wmax, w[r * nk + j]);
        for (int64_t j = 0; j < nk; j++) moved += fmin(w[r * nk + j], wmax / 510.0);
        const int64_t h = r % c->hq, i = r / c->hq % in->rows_q, b = r / c->hq / in->rows_q;
        for (int64_t t = 0; t < c->d; t++)
            err = fmax(err, fabs(fa_tensor_get(&o->t, b, i, h, t) - ref[r * c->d + t]));
        /* 1.001: the step is of the f32 weights, within the f32 rule of these */
        excess = fmax(excess, err - 1.001 * vmax * moved);
    }
    tt_free(&e);
    free(w), free(part);
    return excess;
}

/* The case against the reference of its own quantisation on kern. */
static void check_case(const icase *c, const fa_kernels *kern, uint64_t seed) {
    if (getenv("FLASHATTN_TEST_VERBOSE")) fprintf(stderr, "case %llu on %s\n", (unsigned long long)seed, kern->isa);
    uint64_t rng = seed;
    inputs in;
    make_inputs(c, &in, &rng, 0.0);
    const int64_t B = c->varlen ? 1 : c->b, d = c->d;
    flashattn_params p = params_of(c, &in);
    tt_tensor o = tt_alloc(c->dt, B, in.rows_q, c->hq, d, 1, 0);
    const size_t nlse = (size_t)(B * c->hq * in.rows_q);
    float *lse = malloc((nlse ? nlse : 1) * sizeof(float));
    const flashattn_status s = run(c, &in, kern, p, &o, lse);
    TT_CHECK(s == FLASHATTN_OK, "%s int8 run: status %d (%s)", kern->isa, s, flashattn_last_error());

    tt_tensor qh = tt_alloc(FLASHATTN_F32, B, in.rows_q, c->hq, 5 * d, 1, 0);
    tt_tensor kh = tt_alloc(FLASHATTN_F32, B, in.rows_k, c->hkv, 5 * d, 1, 0);
    memset(qh.mem, 0, qh.bytes), memset(kh.mem, 0, kh.bytes);
    hats(c, kern, &in.q, &in.k, in.seqs, in.nseq, p.scale * 1.4426950408889634f, &qh, &kh);
    flashattn_params pr = p;
    pr.precision = FLASHATTN_PRECISION_EXACT;
    pr.scale = (float)LN2;
    const size_t n = (size_t)(B * in.rows_q * c->hq * d);
    double *ref = malloc((n ? n : 1) * sizeof(double)), *rlse = malloc((nlse ? nlse : 1) * sizeof(double));
    /* the reference's inputs share a dtype: V widened (exactly) to f32 */
    tt_tensor vf = tt_alloc(FLASHATTN_F32, B, in.rows_k, c->hkv, d, 1, 0);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < in.rows_k; j++)
            for (int64_t h = 0; h < c->hkv; h++)
                for (int64_t t = 0; t < d; t++) {
                    float x = (float)fa_tensor_get(&in.v.t, b, j, h, t);
                    if (g_precision == FLASHATTN_PRECISION_INT8_QK_BF16_PV) x = fa_bf16_to_f32(fa_f32_to_bf16(x));
                    put(&vf, b, j, h, t, x);
                }
    if (g_precision == FLASHATTN_PRECISION_INT8_QK_INT8_PV) v_hats(c, kern, in.seqs, in.nseq, &vf);
    reference(c, &in, &qh, &kh, &vf, pr, ref, rlse);
    pr.varlen = NULL; /* the f32 rule's bound: the packed rows as one dense batch */
    double bound = tt_fwd_bound(c->dt, &qh.t, &kh.t, &vf.t, &pr, ref, n);
    double err = tt_max_abs_err(&o, ref);
    if (g_precision != FLASHATTN_PRECISION_INT8_QK) {
        double vmax = 0.0;
        for (size_t x = 0; x < vf.bytes / sizeof(float); x++) vmax = fmax(vmax, fabs(((float *)vf.mem)[x]));
        if (g_precision == FLASHATTN_PRECISION_INT8_QK_BF16_PV)
            /* P rounded to bf16 moves each weight by at most 2^-9 of itself,
             * so O by at most 2^-9 max |V| (V's own rounding is in the
             * reference) */
            bound += ldexp(vmax, -9);
        else { /* P's u8 rounding, row by row (V's own rounding is in the reference) */
            err = pv8_excess(c, &in, &qh, &kh, pr, &o, ref, vmax);
            /* and on 96-key blocks, which straddle V's 512-key chunks (the
             * rule's 512-key blocks never do): P's blocks change, the bound
             * (w_max of the whole row) does not */
            tt_tensor o96 = tt_alloc(c->dt, B, in.rows_q, c->hq, d, 1, 0);
            flashattn_params p96 = p;
            p96.block_n = 96;
            err = run(c, &in, kern, p96, &o96, NULL) == FLASHATTN_OK
                      ? fmax(err, pv8_excess(c, &in, &qh, &kh, pr, &o96, ref, vmax))
                      : INFINITY;
            tt_free(&o96);
        }
        /* and P V was not INT8_QK's (the option reached the kernels) */
        tt_tensor o1 = tt_alloc(c->dt, B, in.rows_q, c->hq, d, 1, 0);
        flashattn_params p1 = p;
        p1.precision = FLASHATTN_PRECISION_INT8_QK;
        if (run(c, &in, kern, p1, &o1, NULL) == FLASHATTN_OK && memcmp(o.mem, o1.mem, o.bytes) != 0)
            *(g_precision == FLASHATTN_PRECISION_INT8_QK_BF16_PV ? &g_bf16_differs : &g_pv8_differs) = 1;
        tt_free(&o1);
    }
    double lerr = 0.0;
    for (size_t x = 0; x < nlse; x++)
        if (!(isinf(rlse[x]) && lse[x] == rlse[x])) lerr = fmax(lerr, fabs(lse[x] - rlse[x]) / fmax(1.0, fabs(rlse[x])));
    TT_CHECK(err <= bound && lerr <= 1e-5,
             "%s %s b%lld sq%lld sk%lld h%lld/%lld d%lld causal%d tl%d w%lld,%lld cap%g alibi%d sinks%d bias%d "
             "mask%d varlen%d bm%d drop%g: O err %.3g (bound %.3g), LSE err %.3g",
             kern->isa, dtn(c->dt), (long long)c->b, (long long)c->sq, (long long)c->sk, (long long)c->hq,
             (long long)c->hkv, (long long)d, c->causal, c->top_left, (long long)c->wl, (long long)c->wr,
             (double)c->softcap, c->alibi, c->sinks, c->bias, c->mask, c->varlen, c->block_m,
             (double)c->dropout, err, bound, lerr);

    /* the same bits on 2 threads and another block_m */
    tt_tensor o2 = tt_alloc(c->dt, B, in.rows_q, c->hq, d, 1, 0);
    flashattn_params p2 = p;
    p2.num_threads = 2;
    p2.block_m = c->block_m ? 0 : 24;
    TT_CHECK(run(c, &in, kern, p2, &o2, NULL) == FLASHATTN_OK && memcmp(o.mem, o2.mem, o.bytes) == 0,
             "%s: 2 threads / block_m %d changed bits", kern->isa, p2.block_m);
    tt_free(&o2);
    free(ref), free(rlse), free(lse);
    tt_free(&o), tt_free(&qh), tt_free(&kh), tt_free(&vf);
    free_inputs(&in);
}

static void reference_cases(void) {
    const fa_kernels *isas[16];
    const int n = tt_isas(isas, 16);
    const icase cases[] = {
        /* b  sq   sk   hq hkv d   dt             causal tl wl  wr  cap  al si bi ma vl bm drop */
        {2, 33, 47, 4, 2, 16, FLASHATTN_F32, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 64, 64, 2, 2, 64, FLASHATTN_F32, 1, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 40, 1200, 2, 1, 70, FLASHATTN_F32, 1, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 17, 1100, 3, 1, 5, FLASHATTN_F32, 0, 0, 300, 40, 0, 0, 0, 0, 0, 0, 32, 0},
        {2, 50, 30, 2, 1, 32, FLASHATTN_F16, 1, 1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 48, 80, 2, 2, 64, FLASHATTN_BF16, 0, 0, 20, 20, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 30, 60, 4, 2, 32, FLASHATTN_F32, 1, 0, -1, -1, 20.0f, 1, 1, 0, 0, 0, 0, 0},
        {2, 31, 45, 2, 1, 24, FLASHATTN_F32, 0, 0, -1, -1, 0, 0, 0, 1, 1, 0, 0, 0},
        {1, 40, 70, 2, 2, 16, FLASHATTN_F32, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0.2f},
        {4, 40, 700, 4, 2, 48, FLASHATTN_F32, 1, 0, -1, -1, 0, 0, 0, 0, 0, 1, 0, 0},
        {3, 25, 90, 2, 1, 20, FLASHATTN_BF16, 0, 1, 10, 5, 10.0f, 0, 1, 0, 0, 1, 0, 0},
        {1, 1, 9, 1, 1, 112, FLASHATTN_F32, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    for (int x = 0; x < n; x++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) check_case(&cases[c], isas[x], 100 + c);
    /* P and V in bf16: on the tables with bf16 dot products too (amx, and
     * AVX512_BF16 / AMX emulated), where P V runs on gemm_bf16 */
    const fa_kernels *dots[16];
    const int nd = tt_isas_dot(dots, 16);
    g_precision = FLASHATTN_PRECISION_INT8_QK_BF16_PV;
    for (int x = 0; x < nd; x++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) check_case(&cases[c], dots[x], 100 + c);
    TT_CHECK(g_bf16_differs, "INT8_QK_BF16_PV gave INT8_QK's bits in every case: P and V were not rounded");
    /* P and V on 8 bits, on every path, and on the AMX-INT8 tiles emulated */
    g_precision = FLASHATTN_PRECISION_INT8_QK_INT8_PV;
    for (int x = 0; x < n; x++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) check_case(&cases[c], isas[x], 100 + c);
    for (int x = 0; x < nd; x++)
        if (strstr(dots[x]->isa, "amx"))
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) check_case(&cases[c], dots[x], 100 + c);
    TT_CHECK(g_pv8_differs, "INT8_QK_INT8_PV gave INT8_QK's bits in every case: P V was not on 8 bits");
    g_precision = FLASHATTN_PRECISION_INT8_QK;
}

/* Against the exact attention: cosine and max |err| / max |O| per input
 * kind, held to the measured bounds. */
static void accuracy(void) {
    const fa_kernels *isas[16];
    const int n = tt_isas(isas, 16);
    for (int kind = 0; kind < 4; kind++) {
        const int pv8 = kind >= 2; /* INT8_QK, then INT8_QK_INT8_PV */
        const icase c = {1, 256, 1024, 4, 2, 128, FLASHATTN_F32, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t rng = 42;
        inputs in;
        make_inputs(&c, &in, &rng, kind & 1 ? 8.0 : 0.0);
        flashattn_params p = params_of(&c, &in);
        p.scale = 1.0f / sqrtf(128.0f);
        if (pv8) p.precision = FLASHATTN_PRECISION_INT8_QK_INT8_PV;
        const size_t nel = (size_t)(c.sq * c.hq * c.d);
        tt_tensor o = tt_alloc(FLASHATTN_F32, 1, c.sq, c.hq, c.d, 1, 0);
        double *ref = malloc(nel * sizeof(double));
        flashattn_params pe = p;
        pe.precision = FLASHATTN_PRECISION_EXACT;
        fa_reference_fwd_f64(&in.q.t, &in.k.t, &in.v.t, &pe, ref, NULL);
        for (int x = 0; x < n; x++) {
            TT_CHECK(run(&c, &in, isas[x], p, &o, NULL) == FLASHATTN_OK, "accuracy run");
            double dot = 0, na = 0, nb = 0, emax = 0, omax = 0;
            const float *got = (const float *)o.mem;
            for (size_t e = 0; e < nel; e++) {
                dot += got[e] * ref[e], na += (double)got[e] * got[e], nb += ref[e] * ref[e];
                emax = fmax(emax, fabs(got[e] - ref[e])), omax = fmax(omax, fabs(ref[e]));
            }
            const double cosine = dot / sqrt(na * nb), rel = emax / omax;
            /* measured on these inputs (docs/precision.md), the same on
             * every path: INT8_QK Gaussian 0.999956 / 1.78e-2, outlier
             * channels 0.999390 / 4.08e-2; INT8_QK_INT8_PV (P's scale
             * per row and 512-key block, the rule's block_n) Gaussian
             * 0.999872 / 2.59e-2, outlier channels 0.999287 / 3.95e-2 */
            const double min_cos[4] = {0.99993, 0.9992, 0.99985, 0.9991}, max_rel[4] = {2.5e-2, 5e-2, 3e-2, 5e-2};
            TT_CHECK(cosine >= min_cos[kind] && rel <= max_rel[kind], "%s %s%s: cosine %.6f, max err / max |O| %.3g",
                     isas[x]->isa, kind & 1 ? "outliers" : "gaussian", pv8 ? " (int8 p v)" : "", cosine, rel);
            if (getenv("FLASHATTN_TEST_VERBOSE"))
                printf("%s %s%s: cosine %.6f, max err / max |O| %.3g\n", isas[x]->isa,
                       kind & 1 ? "outliers" : "gaussian", pv8 ? " (int8 p v)" : "", cosine, rel);
        }
        free(ref), tt_free(&o), free_inputs(&in);
    }
}

/* A NaN in one key: only the rows that see it are NaN, the others are the
 * reference's with that key left out of its chunk's mean. */
static void nan_rule(void) {
    const fa_kernels *isas[16];
    const int n = tt_isas(isas, 16);
    const icase c = {1, 20, 20, 1, 1, 16, FLASHATTN_F32, 1, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int x = 0; x < n; x++) {
        uint64_t rng = 9;
        inputs in;
        make_inputs(&c, &in, &rng, 0.0);
        ((float *)in.k.mem)[(c.sk - 1) * in.k.t.stride_seq + 3] = NAN; /* the last key: the last row sees it */
        flashattn_params p = params_of(&c, &in);
        tt_tensor o = tt_alloc(FLASHATTN_F32, 1, c.sq, 1, c.d, 1, 0);
        TT_CHECK(run(&c, &in, isas[x], p, &o, NULL) == FLASHATTN_OK, "nan run");
        tt_tensor qh = tt_alloc(FLASHATTN_F32, 1, c.sq, 1, 5 * c.d, 1, 0);
        tt_tensor kh = tt_alloc(FLASHATTN_F32, 1, c.sk, 1, 5 * c.d, 1, 0);
        hats(&c, isas[x], &in.q, &in.k, in.seqs, 1, p.scale * 1.4426950408889634f, &qh, &kh);
        for (int64_t t = 0; t < 5 * c.d; t++) put(&kh, 0, c.sk - 1, 0, t, 0.0f); /* hidden from the rest */
        flashattn_params pr = p;
        pr.precision = FLASHATTN_PRECISION_EXACT, pr.scale = (float)LN2;
        double ref[20 * 16];
        fa_reference_fwd_f64(&qh.t, &kh.t, &in.v.t, &pr, ref, NULL);
        const float *got = (const float *)o.mem;
        double err = 0;
        int last_nan = 1;
        for (int64_t i = 0; i < c.sq; i++)
            for (int64_t t = 0; t < c.d; t++) {
                if (i == c.sq - 1) last_nan &= isnan(got[i * c.d + t]);
                else err = fmax(err, fabs(got[i * c.d + t] - ref[i * c.d + t]));
            }
        TT_CHECK(last_nan && err <= 1e-5, "%s: NaN key: last row NaN %d, the others' err %.3g", isas[x]->isa,
                 last_nan, err);
        tt_free(&o), tt_free(&qh), tt_free(&kh), free_inputs(&in);
    }
}

static void bad_input(void) {
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0), o = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0);
    tt_tensor g = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0);
    uint64_t rng = 5;
    tt_fill_normal(&q, &rng, 1.0);
    float lse[16];
    flashattn_params p = flashattn_params_default();
    p.precision = (flashattn_precision)7;
    tt_fill_sentinel(o.mem, o.bytes), tt_fill_sentinel(lse, sizeof lse);
    flashattn_status s = flashattn_fwd(&q.t, &q.t, &q.t, &o.t, lse, &p, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_PARAM && tt_untouched(o.mem, o.bytes) && tt_untouched(lse, sizeof lse),
             "precision 7: status %d, or output written", s);
    p.precision = FLASHATTN_PRECISION_INT8_QK;
    TT_CHECK(flashattn_fwd(&q.t, &q.t, &q.t, &o.t, lse, &p, NULL, 0) == FLASHATTN_OK, "int8 forward");
    tt_fill_sentinel(g.mem, g.bytes);
    s = flashattn_bwd(&q.t, &q.t, &q.t, &o.t, &o.t, lse, &g.t, &g.t, &g.t, &p, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_UNSUPPORTED && tt_untouched(g.mem, g.bytes), "int8 backward: status %d", s);
    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = q.t, cache.v = q.t;
    const int32_t lens[1] = {8};
    cache.seqlens_i32 = lens;
    tt_tensor q1 = tt_alloc(FLASHATTN_F32, 1, 1, 2, 16, 1, 0), o1 = tt_alloc(FLASHATTN_F32, 1, 1, 2, 16, 1, 0);
    tt_fill_normal(&q1, &rng, 1.0), tt_fill_sentinel(o1.mem, o1.bytes);
    s = flashattn_decode(&q1.t, &cache, NULL, NULL, &o1.t, NULL, &p, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_UNSUPPORTED && tt_untouched(o1.mem, o1.bytes), "int8 decode: status %d", s);
    tt_free(&q), tt_free(&o), tt_free(&g), tt_free(&q1), tt_free(&o1);
}

int main(void) {
    bad_input();
    nan_rule();
    accuracy();
    reference_cases();
    return tt_finish("test_int8_qk");
}
