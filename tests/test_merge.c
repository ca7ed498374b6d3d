/*
 * flashattn_merge on its own, on every ISA path: attention over keys cut
 * into slices at random points (some slices empty), one forward per slice,
 * merged, against the FP64 reference over all keys and the forward over all
 * keys. Partials in f32 (merge exact to f32 rounding), f16 and bf16 (error
 * of one rounding of the partials), more parts than one merge batch, the
 * output written in place over a part, parts that saw no key holding NaN
 * (they must not be read), rows no part saw (O = 0, LSE = -inf), no parts
 * at all, and bad input that must leave o and lse untouched.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/decode.h"
#include "reference/attn_f64.h"
#include "testutil.h"

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    int nparts;
    flashattn_dtype pdt;
    int inplace;
} mcase;

static void slices(const mcase *c, uint64_t seed) {
    uint64_t rng = seed;
    tt_tensor q = tt_alloc(FLASHATTN_F32, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_tensor k = tt_alloc(FLASHATTN_F32, c->b, c->sk, c->hkv, c->d, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, c->b, c->sk, c->hkv, c->d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0);
    tt_fill_normal(&k, &rng, 1.0);
    tt_fill_normal(&v, &rng, 1.0);
    const size_t on = (size_t)(c->b * c->sq * c->hq * c->d), ln = (size_t)(c->b * c->hq * c->sq);
    double *ref = malloc(on * sizeof(double)), *ref_lse = malloc(ln * sizeof(double));
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, NULL, ref, ref_lse) == FLASHATTN_OK,
             "reference");
    tt_tensor full = tt_alloc(FLASHATTN_F32, c->b, c->sq, c->hq, c->d, 1, 0);
    TT_CHECK(flashattn_fwd(&q.t, &k.t, &v.t, &full.t, NULL, NULL, NULL, 0) == FLASHATTN_OK,
             "full forward");

    /* Cut points: sorted, with one repeated so that a slice is empty. */
    int64_t *cut = malloc((size_t)(c->nparts + 1) * sizeof *cut);
    cut[0] = 0, cut[c->nparts] = c->sk;
    for (int i = 1; i < c->nparts; i++) cut[i] = (int64_t)(tt_rand_u64(&rng) % (uint64_t)(c->sk + 1));
    if (c->nparts > 2) cut[2] = cut[1];
    for (int i = 1; i < c->nparts; i++)
        for (int j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
            int64_t t = cut[j];
            cut[j] = cut[j - 1], cut[j - 1] = t;
        }
    tt_tensor *parts = malloc((size_t)c->nparts * sizeof *parts);
    flashattn_tensor *pt = malloc((size_t)c->nparts * sizeof *pt);
    float **plse = malloc((size_t)c->nparts * sizeof *plse);
    double pmax = 0.0;
    for (int i = 0; i < c->nparts; i++) {
        flashattn_tensor ks = k.t, vs = v.t;
        ks.data = (float *)k.mem + cut[i] * k.t.stride_seq;
        vs.data = (float *)v.mem + cut[i] * v.t.stride_seq;
        ks.seqlen = vs.seqlen = cut[i + 1] - cut[i];
        parts[i] = tt_alloc(c->pdt, c->b, c->sq, c->hq, c->d, i % 2, 0);
        plse[i] = malloc(ln * sizeof(float));
        TT_CHECK(flashattn_fwd(&q.t, &ks, &vs, &parts[i].t, plse[i], NULL, NULL, 0) == FLASHATTN_OK,
                 "slice forward: %s", flashattn_last_error());
        if (ks.seqlen == 0) {
            /* saw no key: LSE is -inf; NaN in O proves the merge skips it */
            for (size_t e = 0; e < parts[i].bytes; e++) ((unsigned char *)parts[i].mem)[e] = 0xff;
        } else {
            for (int64_t b = 0; b < c->b; b++)
                for (int64_t s = 0; s < c->sq; s++)
                    for (int64_t h = 0; h < c->hq; h++)
                        for (int64_t e = 0; e < c->d; e++)
                            pmax = fmax(pmax, fabs(fa_tensor_get(&parts[i].t, b, s, h, e)));
        }
        pt[i] = parts[i].t;
    }
    /* One rounding of every partial to its dtype, then f32 work. */
    const double unit = c->pdt == FLASHATTN_F32 ? 0.0 : c->pdt == FLASHATTN_F16 ? 0x1p-11 : 0x1p-8;
    const double bound = 1e-5 + unit * pmax;

    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    char desc[160];
    snprintf(desc, sizeof desc, "b=%lld sq=%lld sk=%lld hq=%lld d=%lld parts=%d dtype=%d inplace=%d",
             (long long)c->b, (long long)c->sq, (long long)c->sk, (long long)c->hq,
             (long long)c->d, c->nparts, (int)c->pdt, c->inplace);
    for (int t = 0; t < n; t++) {
        tt_tensor o = tt_alloc(FLASHATTN_F32, c->b, c->sq, c->hq, c->d, 0, 3);
        float *lse = malloc(ln * sizeof(float));
        /* in place: the output is part 0 (so work on a copy of it) */
        tt_tensor saved = parts[0];
        float *saved_lse = plse[0];
        const tt_tensor *out = &o;
        float *out_lse = lse;
        if (c->inplace) {
            parts[0] = tt_alloc(c->pdt, c->b, c->sq, c->hq, c->d, 0, 0);
            memcpy(parts[0].mem, saved.mem, saved.bytes);
            pt[0] = parts[0].t;
            plse[0] = malloc(ln * sizeof(float));
            memcpy(plse[0], saved_lse, ln * sizeof(float));
            out = &parts[0], out_lse = plse[0];
        }
        flashattn_status s = fa_merge_ex(c->nparts, pt, (const float *const *)plse, &out->t,
                                         out_lse, NULL, isas[t]);
        TT_CHECK(s == FLASHATTN_OK, "[%s] merge status %d (%s): %s", isas[t]->isa, s,
                 flashattn_last_error(), desc);
        const double err = tt_max_abs_err(out, ref);
        TT_CHECK(err <= bound, "[%s] merged err %.3g > %.3g: %s", isas[t]->isa, err, bound, desc);
        double ferr = 0.0, lerr = 0.0;
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t sq = 0; sq < c->sq; sq++)
                for (int64_t h = 0; h < c->hq; h++)
                    for (int64_t e = 0; e < c->d; e++)
                        ferr = fmax(ferr, fabs(fa_tensor_get(&out->t, b, sq, h, e) -
                                               fa_tensor_get(&full.t, b, sq, h, e)));
        for (size_t i = 0; i < ln; i++) lerr = fmax(lerr, fabs(out_lse[i] - ref_lse[i]));
        /* f32 partials: the merge agrees with one forward over all keys to
         * a few ulp (of |V| ~ 1) */
        if (c->pdt == FLASHATTN_F32)
            TT_CHECK(ferr <= 1e-6, "[%s] merged vs full forward %.3g: %s", isas[t]->isa, ferr, desc);
        TT_CHECK(lerr <= 1e-5, "[%s] merged LSE err %.3g: %s", isas[t]->isa, lerr, desc);
        if (getenv("FA_TEST_VERBOSE"))
            printf("[%s] err %.3g (bound %.3g) vs full %.3g lse %.3g  %s\n", isas[t]->isa, err,
                   bound, ferr, lerr, desc);
        if (c->inplace) {
            tt_free(&parts[0]);
            free(plse[0]);
            parts[0] = saved, plse[0] = saved_lse, pt[0] = saved.t;
        }
        free(lse);
        tt_free(&o);
    }
    for (int i = 0; i < c->nparts; i++) tt_free(&parts[i]), free(plse[i]);
    free(parts), free(pt), free(plse), free(cut), free(ref), free(ref_lse);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&full);
}

/* Rows no part saw: O = 0, LSE = -inf, whatever the parts' O hold; also
 * with no parts at all. */
static void empty_rows(void) {
    const int64_t B = 2, S = 3, H = 2, D = 24, rows = B * S * H;
    tt_tensor p0 = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0), p1 = tt_alloc(FLASHATTN_F16, B, S, H, D, 1, 0);
    uint64_t rng = 5;
    tt_fill_normal(&p0, &rng, 1.0);
    memset(p1.mem, 0xff, p1.bytes); /* NaN: never read */
    float l0[12], l1[12];
    for (int64_t t = 0; t < rows; t++) l0[t] = t % 3 == 0 ? -INFINITY : 0.5f, l1[t] = -INFINITY;
    flashattn_tensor pt[2] = {p0.t, p1.t};
    const float *pl[2] = {l0, l1};
    const fa_kernels *isas[4];
    const int n = tt_isas(isas, 4);
    for (int t = 0; t < n; t++)
        for (int np = 0; np <= 2; np += 2) {
            tt_tensor o = tt_alloc(FLASHATTN_BF16, B, S, H, D, 0, 0);
            float lse[12];
            TT_CHECK(fa_merge_ex(np, np ? pt : NULL, np ? pl : NULL, &o.t, lse, NULL, isas[t]) ==
                         FLASHATTN_OK,
                     "[%s] merge of %d parts: %s", isas[t]->isa, np, flashattn_last_error());
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < S; s++)
                    for (int64_t h = 0; h < H; h++) {
                        const int64_t r = (b * H + h) * S + s;
                        const int seen = np && r % 3 != 0;
                        double worst = 0.0;
                        for (int64_t e = 0; e < D; e++) {
                            double want = seen ? fa_tensor_get(&p0.t, b, s, h, e) : 0.0;
                            worst = fmax(worst, fabs(fa_tensor_get(&o.t, b, s, h, e) - want));
                        }
                        /* one part: O is that part's row (rounded to bf16) */
                        TT_CHECK(worst <= 0x1p-8 * 4 && !isnan(worst), "[%s] parts=%d row %lld: err %g",
                                 isas[t]->isa, np, (long long)r, worst);
                        TT_CHECK(seen ? lse[r] == 0.5f : (isinf(lse[r]) && lse[r] < 0),
                                 "[%s] parts=%d row %lld: lse %g", isas[t]->isa, np, (long long)r,
                                 lse[r]);
                    }
            tt_free(&o);
        }
    tt_free(&p0), tt_free(&p1);
}

/* Bad input: its own status, a message, o and lse untouched. */
static void errors(void) {
    const int64_t B = 1, S = 2, H = 2, D = 8;
    tt_tensor p0 = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0), p1 = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0);
    uint64_t rng = 9;
    tt_fill_normal(&p0, &rng, 1.0);
    tt_fill_normal(&p1, &rng, 1.0);
    float l0[4] = {0, 1, 2, 3}, l1[4] = {1, 1, 1, 1};
    tt_tensor o = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0);
    float lse[4];
    for (int c = 0; c < 8; c++) {
        flashattn_tensor pt[2] = {p0.t, p1.t}, ot = o.t;
        const float *pl[2] = {l0, l1};
        int64_t np = 2;
        flashattn_params p = flashattn_params_default();
        flashattn_status want;
        const flashattn_tensor *op = &ot;
        const flashattn_tensor *ptp = pt;
        switch (c) {
        case 0: np = -1, want = FLASHATTN_ERR_BAD_PARAM; break;
        case 1: op = NULL, want = FLASHATTN_ERR_NULL_POINTER; break;
        case 2: ptp = NULL, want = FLASHATTN_ERR_NULL_POINTER; break;
        case 3: pl[1] = NULL, want = FLASHATTN_ERR_NULL_POINTER; break;
        case 4: pt[1].seqlen = 3, want = FLASHATTN_ERR_BAD_SHAPE; break;
        case 5: pt[0].dtype = (flashattn_dtype)7, want = FLASHATTN_ERR_BAD_DTYPE; break;
        case 6: ot.stride_head = 4, want = FLASHATTN_ERR_BAD_STRIDE; break;
        default: p.struct_size = 3, want = FLASHATTN_ERR_BAD_PARAM; break;
        }
        tt_fill_sentinel(o.mem, o.bytes);
        tt_fill_sentinel(lse, sizeof lse);
        flashattn_status s = flashattn_merge(np, ptp, pl, op, lse, &p);
        TT_CHECK(s == want, "merge error case %d: got %d (%s), want %d", c, s,
                 flashattn_last_error(), want);
        TT_CHECK(strlen(flashattn_last_error()) > 0, "merge error case %d: no message", c);
        TT_CHECK(tt_untouched(o.mem, o.bytes) && tt_untouched(lse, sizeof lse),
                 "merge error case %d: output written", c);
    }
    tt_free(&p0), tt_free(&p1), tt_free(&o);
}

int main(void) {
    static const mcase cases[] = {
        {1, 1, 1000, 4, 1, 64, 4, FLASHATTN_F32, 0},  {2, 7, 300, 4, 2, 128, 3, FLASHATTN_F32, 1},
        {1, 5, 100, 2, 2, 40, 40, FLASHATTN_F32, 0},  {2, 3, 257, 8, 8, 80, 5, FLASHATTN_F16, 0},
        {1, 4, 500, 2, 1, 256, 2, FLASHATTN_BF16, 1}, {1, 9, 64, 3, 1, 1, 17, FLASHATTN_F32, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) slices(&cases[i], 300 + i);
    empty_rows();
    errors();
    return tt_finish("test_merge");
}
