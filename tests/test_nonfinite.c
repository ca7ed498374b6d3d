/*
 * The rule for NaN and Inf (flashattn.h): IEEE propagation over what an
 * output depends on, 0 times anything is 0, so a key a row does not see
 * gives it nothing. Each case plants one NaN or Inf in Q, K or V and
 * checks, on every ISA path, forward (both drivers: the forward's and
 * decode's, with 1 and 3 splits) and backward, element by element against
 * the FP64 reference, which applies the same rule: NaN exactly where the
 * reference has NaN, the same infinities, the finite rest within test
 * tolerances. The cases are the ones that broke before: a NaN Q row, or a
 * NaN K that is a row's only key, passed for "no key" (O = 0, LSE = -inf,
 * dq = 0), and a NaN or Inf in V at a key hidden by causal, the window, a
 * mask or a -inf bias reached rows sharing its tile (P = 0 times NaN).
 * Also: the merge of a NaN part, and a +Inf score (f32 overflow).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/decode.h"
#include "api/forward.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_f64.h"
#include "testutil.h"

enum { TQ, TK, TV };
enum { HIDE_NONE, HIDE_MASK, HIDE_BIAS };

typedef struct {
    const char *what;
    int64_t sq, sk;
    int causal;
    int64_t wl, wr;
    int tensor; /* where the value goes: TQ, TK or TV */
    int64_t row, col;
    float value;
    int hide; /* HIDE_MASK: a boolean mask hides key `row` from even rows; HIDE_BIAS: a -inf bias, likewise */
    flashattn_dtype dt;
} nf_case;

static const nf_case cases[] = {
    {"NaN in a Q row", 40, 40, 0, -1, -1, TQ, 2, 3, NAN, HIDE_NONE, FLASHATTN_F32},
    {"NaN in the Q row of causal row 0", 40, 40, 1, -1, -1, TQ, 0, 0, NAN, HIDE_NONE, FLASHATTN_F32},
    {"NaN in K, its row's only key (window 0,0)", 24, 24, 0, 0, 0, TK, 5, 1, NAN, HIDE_NONE, FLASHATTN_F32},
    {"NaN in V of the last key (causal)", 70, 70, 1, -1, -1, TV, 69, 4, NAN, HIDE_NONE, FLASHATTN_F32},
    {"NaN in V of the last key (causal, bf16)", 70, 70, 1, -1, -1, TV, 69, 4, NAN, HIDE_NONE, FLASHATTN_BF16},
    {"Inf in V of key 0 (window 3,0)", 50, 50, 0, 3, 0, TV, 0, 7, INFINITY, HIDE_NONE, FLASHATTN_F32},
    {"NaN in K of a key ahead (causal, seq_q < seq_k)", 9, 33, 1, -1, -1, TK, 30, 2, NAN, HIDE_NONE, FLASHATTN_F32},
    {"-Inf in V, key hidden from even rows by a mask", 20, 36, 0, -1, -1, TV, 7, 0, -INFINITY, HIDE_MASK, FLASHATTN_F32},
    {"NaN in K of a key a -inf bias hides", 20, 36, 0, -1, -1, TK, 3, 5, NAN, HIDE_BIAS, FLASHATTN_F32},
    {"NaN in V of a key a -inf bias hides", 20, 36, 0, -1, -1, TV, 3, 5, NAN, HIDE_BIAS, FLASHATTN_F16},
};

/* Per element: NaN exactly where ref is NaN, infinities equal, finite
 * values within tol * (1 + |ref|). Returns the first offending element or -1. */
static int64_t disagree(const flashattn_tensor *t, const double *ref, double tol) {
    int64_t at = 0;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++, at++) {
                    const double x = fa_tensor_get(t, b, s, h, c), r = ref[at];
                    const int ok = isnan(r) ? isnan(x) : isinf(r) ? x == r
                                                       : isfinite(x) && fabs(x - r) <= tol * (1.0 + fabs(r));
                    if (!ok) return at;
                }
    return -1;
}

static int64_t lse_disagree(const float *lse, const double *ref, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const double x = lse[i], r = ref[i];
        if (isnan(r) ? !isnan(x) : isinf(r) ? x != r : !(fabs(x - r) <= 1e-4 * (1.0 + fabs(r)))) return i;
    }
    return -1;
}

static void plant(tt_tensor *x, int64_t row, int64_t col, float value) {
    char *p = (char *)x->t.data + (size_t)(row * x->t.stride_seq + col) * (x->t.dtype == FLASHATTN_F32 ? 4 : 2);
    if (x->t.dtype == FLASHATTN_F32)
        memcpy(p, &value, 4);
    else {
        const uint16_t h = x->t.dtype == FLASHATTN_F16 ? (isnan(value) ? 0x7e00 : value > 0 ? 0x7c00 : 0xfc00)
                                                       : (uint16_t)(fa_f32_bits(value) >> 16);
        memcpy(p, &h, 2);
    }
}

static void run_case(const nf_case *c) {
    const int64_t hq = 2, d = 16, n = c->sq * hq * d;
    uint64_t rng = 77;
    tt_tensor q = tt_alloc(c->dt, 1, c->sq, hq, d, 1, 0), k = tt_alloc(c->dt, 1, c->sk, 1, d, 1, 0);
    tt_tensor v = tt_alloc(c->dt, 1, c->sk, 1, d, 1, 0), dout = tt_alloc(c->dt, 1, c->sq, hq, d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    tt_fill_normal(&dout, &rng, 1.0);
    plant(c->tensor == TQ ? &q : c->tensor == TK ? &k : &v, c->row, c->col, c->value);

    flashattn_params p = flashattn_params_default();
    p.causal = c->causal, p.window_left = c->wl, p.window_right = c->wr;
    uint8_t *mask = NULL;
    float *bias = NULL;
    flashattn_scores sc = {0};
    if (c->hide != HIDE_NONE) {
        sc.batch = 1, sc.heads = 1, sc.seq_q = c->sq, sc.seq_k = c->sk, sc.stride_q = c->sk, sc.stride_k = 1;
        if (c->hide == HIDE_MASK) {
            mask = malloc((size_t)(c->sq * c->sk));
            for (int64_t i = 0; i < c->sq * c->sk; i++) mask[i] = !(i / c->sk % 2 == 0 && i % c->sk == c->row);
            sc.data = mask, p.mask = &sc;
        } else {
            bias = malloc((size_t)(c->sq * c->sk) * sizeof(float));
            for (int64_t i = 0; i < c->sq * c->sk; i++) bias[i] = i / c->sk % 2 == 0 && i % c->sk == c->row ? -INFINITY : 0.01f * (float)(i % 7);
            sc.data = bias, sc.dtype = FLASHATTN_F32, p.bias = &sc;
        }
    }
    double *ro = malloc((size_t)n * sizeof(double)), *rl = malloc((size_t)(hq * c->sq) * sizeof(double));
    double *rdq = malloc((size_t)n * sizeof(double)), *rdk = malloc((size_t)(c->sk * d) * sizeof(double));
    double *rdv = malloc((size_t)(c->sk * d) * sizeof(double));
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, ro, rl) == FLASHATTN_OK &&
                 fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p, rdq, rdk, rdv) == FLASHATTN_OK,
             "%s: reference", c->what);
    int planted_reaches = 0, planted_spares = 0; /* the case must test both sides of the rule */
    for (int64_t i = 0; i < n; i++) planted_reaches |= !isfinite(ro[i]), planted_spares |= isfinite(ro[i]);
    TT_CHECK(planted_reaches && planted_spares, "%s: the case does not split rows", c->what);

    const double tol = c->dt == FLASHATTN_F32 ? 1e-5 : 2e-2, gtol = c->dt == FLASHATTN_F32 ? 1e-4 : 5e-2;
    tt_tensor o = tt_alloc(c->dt, 1, c->sq, hq, d, 1, 0), dq = tt_alloc(c->dt, 1, c->sq, hq, d, 1, 0);
    tt_tensor dk = tt_alloc(c->dt, 1, c->sk, 1, d, 1, 0), dv = tt_alloc(c->dt, 1, c->sk, 1, d, 1, 0);
    float *lse = malloc((size_t)(hq * c->sq) * sizeof(float));
    const fa_kernels *isas[8];
    const int ni = c->dt == FLASHATTN_BF16 ? tt_isas_dot(isas, 8) : tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        const char *isa = isas[t]->isa;
        flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]);
        int64_t bad = disagree(&o.t, ro, tol), lbad = lse_disagree(lse, rl, hq * c->sq);
        TT_CHECK(s == FLASHATTN_OK && bad < 0 && lbad < 0, "[%s] %s: fwd status %d, O element %lld, LSE %lld",
                 isa, c->what, s, (long long)bad, (long long)lbad);
        s = fa_bwd_ex(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &dq.t, &dk.t, &dv.t, &p, NULL, 0, isas[t]);
        const int64_t bq = disagree(&dq.t, rdq, gtol), bk = disagree(&dk.t, rdk, gtol), bv = disagree(&dv.t, rdv, gtol);
        TT_CHECK(s == FLASHATTN_OK && bq < 0 && bk < 0 && bv < 0,
                 "[%s] %s: bwd status %d, first bad dq %lld dk %lld dv %lld", isa, c->what, s, (long long)bq,
                 (long long)bk, (long long)bv);
        /* decode's driver over the same keys as a full cache (no bias or mask there) */
        for (int splits = 1; c->hide == HIDE_NONE && c->sq <= c->sk && splits <= 3; splits += 2) {
            int32_t len = (int32_t)c->sk;
            flashattn_kv_cache cache;
            flashattn_kv_cache_init(&cache);
            cache.k = k.t, cache.v = v.t, cache.seqlens_i32 = &len;
            flashattn_params pd = p;
            pd.num_splits = splits;
            s = fa_decode_ex(&q.t, &cache, NULL, NULL, &o.t, lse, &pd, NULL, 0, isas[t]);
            bad = disagree(&o.t, ro, tol), lbad = lse_disagree(lse, rl, hq * c->sq);
            TT_CHECK(s == FLASHATTN_OK && bad < 0 && lbad < 0,
                     "[%s] %s: decode (%d splits) status %d, O element %lld, LSE %lld", isa, c->what, splits, s,
                     (long long)bad, (long long)lbad);
        }
    }
    free(lse), free(ro), free(rl), free(rdq), free(rdk), free(rdv), free(mask), free(bias);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout), tt_free(&o), tt_free(&dq), tt_free(&dk), tt_free(&dv);
}

/* A part whose LSE is NaN for a row makes the row NaN; the others merge as usual. */
static void merge_nan(void) {
    const int64_t s = 3, h = 1, d = 16;
    tt_tensor parts[2] = {tt_alloc(FLASHATTN_F32, 1, s, h, d, 1, 0), tt_alloc(FLASHATTN_F32, 1, s, h, d, 1, 0)};
    tt_tensor o = tt_alloc(FLASHATTN_F32, 1, s, h, d, 1, 0);
    uint64_t rng = 5;
    tt_fill_normal(&parts[0], &rng, 1.0), tt_fill_normal(&parts[1], &rng, 1.0);
    float l0[3] = {NAN, 0.5f, -INFINITY}, l1[3] = {0.25f, NAN, -INFINITY}, lse[3];
    const float *lp[2] = {l0, l1};
    flashattn_tensor pt[2] = {parts[0].t, parts[1].t};
    const flashattn_status st = flashattn_merge(2, pt, lp, &o.t, lse, NULL);
    const float *out = (const float *)o.t.data;
    int ok = st == FLASHATTN_OK && isnan(lse[0]) && isnan(lse[1]) && lse[2] == -INFINITY;
    for (int64_t c = 0; c < d; c++) ok &= isnan(out[c]) && isnan(out[d + c]) && out[2 * d + c] == 0.0f;
    TT_CHECK(ok, "merge: a NaN part's rows are not NaN (status %d)", st);
    tt_free(&parts[0]), tt_free(&parts[1]), tt_free(&o);
}

/* Scores are f32: scale * q.k beyond its range is +Inf, and the row NaN. */
static void score_overflow(void) {
    const int64_t s = 8, d = 16;
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, s, 1, d, 1, 0), o = tt_alloc(FLASHATTN_F32, 1, s, 1, d, 1, 0);
    for (int64_t i = 0; i < s * d; i++) ((float *)q.t.data)[i] = 1.0f;
    flashattn_params p = flashattn_params_default();
    p.scale = 1e38f;
    float lse[8];
    const fa_kernels *isas[8];
    const int ni = tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        const flashattn_status st = fa_fwd_ex(&q.t, &q.t, &q.t, &o.t, lse, &p, NULL, 0, isas[t]);
        int ok = st == FLASHATTN_OK;
        for (int64_t i = 0; i < s * d; i++) ok &= isnan(((float *)o.t.data)[i]);
        for (int64_t i = 0; i < s; i++) ok &= isnan(lse[i]);
        TT_CHECK(ok, "[%s] a +Inf score did not give NaN rows (status %d)", isas[t]->isa, st);
    }
    tt_free(&q), tt_free(&o);
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    merge_nan();
    score_overflow();
    return tt_finish("test_nonfinite");
}
