/*
 * Attention dropout (flashattn.h, "Dropout"):
 *   Philox4x32-10 against the Random123 known-answer vectors;
 *   the keep rate over 10^7 elements within 4 sigma of 1 - p, and rows,
 *   heads, sequences, offsets and seeds drawing unrelated masks (agreement
 *   of two masks within 4 sigma of p^2 + (1 - p)^2);
 *   the mask the forward applies equal to flashattn_dropout_mask's, bit for
 *   bit, on every ISA path, tile size and thread count (V one-hot, so O
 *   holds P * Z and its zeros are the dropped elements);
 *   forward and backward against the FP64 reference that applies the same
 *   mask, every path, with causal, window, GQA and seq_q != seq_k;
 *   bad dropout options: a status, nothing written.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/backward.h"
#include "api/forward.h"
#include "core/philox.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_f64.h"
#include "testutil.h"

static void known_answers(void) {
    static const uint32_t v[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
         0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
         0x5001e420, 0x24126ea1},
    };
    for (int c = 0; c < 3; c++) {
        uint32_t out[4];
        fa_philox4x32_10(v[c], v[c] + 4, out);
        TT_CHECK(!memcmp(out, v[c] + 6, sizeof out), "philox4x32-10 known answer %d: %08x %08x %08x %08x", c,
                 out[0], out[1], out[2], out[3]);
    }
}

static flashattn_params dropout_params(float p, uint64_t seed, uint64_t offset) {
    flashattn_params q = flashattn_params_default();
    q.dropout_p = p, q.dropout_seed = seed, q.dropout_offset = offset;
    return q;
}

/* Agreement of the masks of two rows (n columns each). */
static double agreement(const flashattn_params *a, const flashattn_params *b, int64_t heads, const int64_t x[3],
                        const int64_t y[3], int64_t n) {
    uint8_t *ka = malloc((size_t)n), *kb = malloc((size_t)n);
    TT_CHECK(flashattn_dropout_mask(a, heads, x[0], x[1], x[2], 0, n, ka) == FLASHATTN_OK &&
                 flashattn_dropout_mask(b, heads, y[0], y[1], y[2], 0, n, kb) == FLASHATTN_OK,
             "dropout_mask status");
    int64_t same = 0;
    for (int64_t t = 0; t < n; t++) same += ka[t] == kb[t];
    free(ka), free(kb);
    return (double)same / (double)n;
}

static void statistics(void) {
    const float p = 0.1f;
    const flashattn_params dp = dropout_params(p, 1234, 0);
    /* keep rate: 10^7 elements of 2 sequences x 4 heads x 250 rows x 5000 keys */
    const int64_t n = 5000;
    uint8_t *keep = malloc((size_t)n);
    int64_t kept = 0, total = 0;
    for (int64_t b = 0; b < 2; b++)
        for (int64_t h = 0; h < 4; h++)
            for (int64_t i = 0; i < 250; i++) {
                TT_CHECK(flashattn_dropout_mask(&dp, 4, b, h, i, 0, n, keep) == FLASHATTN_OK, "mask status");
                for (int64_t t = 0; t < n; t++) kept += keep[t];
                total += n;
            }
    const double sigma = sqrt((double)total * p * (1.0 - p)), dev = (double)kept - (double)total * (1.0 - p);
    printf("keep rate %.6f over %lld elements (expected %.6f, %.2f sigma)\n", (double)kept / (double)total,
           (long long)total, 1.0 - p, dev / sigma);
    TT_CHECK(fabs(dev) <= 4.0 * sigma, "keep rate %.6f: %.2f sigma from %.2f", (double)kept / (double)total,
             dev / sigma, 1.0 - p);
    free(keep);
    /* two rows that share nothing must agree as two independent draws do */
    const int64_t m = 200000;
    const double want = (double)p * p + (1.0 - p) * (1.0 - p), sd = sqrt(want * (1.0 - want) / (double)m);
    const flashattn_params other_offset = dropout_params(p, 1234, 1), other_seed = dropout_params(p, 1235, 0);
    static const int64_t pairs[][6] = {
        {0, 0, 0, 0, 0, 1}, /* next row */
        {0, 0, 0, 0, 1, 0}, /* next head */
        {0, 0, 0, 1, 0, 0}, /* next sequence */
        {0, 1, 0, 1, 0, 0}, /* (0, 1) and (1, 0): b * heads + h differ */
        {0, 0, 7, 0, 0, 0}, /* row 7 against row 0 */
    };
    for (int c = 0; c < 7; c++) {
        const int64_t *x = c < 5 ? pairs[c] : pairs[0];
        const flashattn_params *pb = c == 5 ? &other_offset : c == 6 ? &other_seed : &dp;
        const int64_t y[3] = {x[3], x[4], c < 5 ? x[5] : 0};
        const double a = agreement(&dp, pb, 4, x, y, m);
        TT_CHECK(fabs(a - want) <= 4.0 * sd, "masks of pair %d agree on %.5f, independent draws on %.5f", c, a,
                 want);
    }
}

/* The forward's mask is flashattn_dropout_mask's, bit for bit: V one-hot
 * (V[j] = e_j) makes O[i][j] = P[i][j] Z[i][j], zero exactly where dropped. */
static void mask_as_applied(void) {
    const int64_t B = 2, S = 40, SK = 64, H = 4, HK = 2, D = 64;
    uint64_t rng = 8;
    tt_tensor q = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0), k = tt_alloc(FLASHATTN_F32, B, SK, HK, D, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, B, SK, HK, D, 1, 0), o = tt_alloc(FLASHATTN_F32, B, S, H, D, 1, 0);
    tt_fill_normal(&q, &rng, 0.3), tt_fill_normal(&k, &rng, 0.3);
    float *vv = (float *)v.mem;
    memset(vv, 0, v.bytes);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < SK; j++)
            for (int64_t h = 0; h < HK; h++) vv[((b * SK + j) * HK + h) * D + j] = 1.0f;
    const flashattn_params base = dropout_params(0.3f, 99, 5);
    uint8_t *want = malloc((size_t)(B * H * S * SK));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++)
                flashattn_dropout_mask(&base, H, b, h, i, 0, SK, want + ((b * H + h) * S + i) * SK);
    const fa_kernels *isas[8];
    const int ni = tt_isas(isas, 8);
    static const int tiles[][2] = {{0, 0}, {16, 16}, {32, 64}};
    for (int t = 0; t < ni; t++)
        for (int c = 0; c < 6; c++) {
            flashattn_params p = base;
            /* block_n a multiple of the path's column tile (32 on avx512) */
            const int nr = isas[t]->nr;
            p.block_m = tiles[c % 3][0], p.block_n = (tiles[c % 3][1] + nr - 1) / nr * nr;
            p.num_threads = 1 + c / 3;
            p.causal = 0;
            const flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, NULL, &p, NULL, 0, isas[t]);
            int64_t wrong = 0;
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < S; i++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t j = 0; j < SK; j++)
                            wrong += (((float *)o.mem)[((b * S + i) * H + h) * D + j] != 0.0f) !=
                                     want[((b * H + h) * S + i) * SK + j];
            TT_CHECK(s == FLASHATTN_OK && wrong == 0, "[%s] tiles %dx%d, %d threads: status %d, %lld elements off the mask",
                     isas[t]->isa, p.block_m, p.block_n, p.num_threads, s, (long long)wrong);
        }
    free(want);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&o);
}

typedef struct {
    int64_t b, sq, sk, hq, hkv, d;
    int causal;
    int64_t wl, wr;
    float p;
    flashattn_dtype dt;
} dcase;

/* Per element |got - ref| <= tol * (1 + |ref|); the worst ratio. */
static double rel_err(const tt_tensor *x, const double *ref) {
    double worst = 0.0;
    int64_t at = 0;
    for (int64_t b = 0; b < x->t.batch; b++)
        for (int64_t s = 0; s < x->t.seqlen; s++)
            for (int64_t h = 0; h < x->t.heads; h++)
                for (int64_t c = 0; c < x->t.head_dim; c++, at++)
                    worst = fmax(worst, fabs(fa_tensor_get(&x->t, b, s, h, c) - ref[at]) / (1.0 + fabs(ref[at])));
    return worst;
}

static void against_reference(const dcase *c, uint64_t seed) {
    uint64_t rng = seed;
    tt_tensor q = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0), k = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
    tt_tensor v = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0), dout = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    tt_fill_normal(&dout, &rng, 1.0);
    flashattn_params p = dropout_params(c->p, seed * 77, seed);
    p.causal = c->causal, p.window_left = c->wl, p.window_right = c->wr;
    const size_t nq = (size_t)(c->b * c->sq * c->hq * c->d), nk = (size_t)(c->b * c->sk * c->hkv * c->d);
    double *ro = malloc((nq + 1) * sizeof(double)), *rl = malloc((size_t)(c->b * c->hq * c->sq + 1) * sizeof(double));
    double *g[3] = {malloc((nq + 1) * sizeof(double)), malloc((nk + 1) * sizeof(double)), malloc((nk + 1) * sizeof(double))};
    TT_CHECK(fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, ro, rl) == FLASHATTN_OK &&
                 fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p, g[0], g[1], g[2]) == FLASHATTN_OK,
             "dropout reference");
    /* 16-bit outputs round once: their half ulp, relative */
    const double tol = c->dt == FLASHATTN_F32 ? 2e-5 : c->dt == FLASHATTN_F16 ? 1e-3 : 8e-3;
    tt_tensor o = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0), dq = tt_alloc(c->dt, c->b, c->sq, c->hq, c->d, 1, 0);
    tt_tensor dk = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0), dv = tt_alloc(c->dt, c->b, c->sk, c->hkv, c->d, 1, 0);
    float *lse = malloc((size_t)(c->b * c->hq * c->sq + 1) * sizeof(float));
    const fa_kernels *isas[8];
    const int ni = c->dt == FLASHATTN_BF16 ? tt_isas_dot(isas, 8) : tt_isas(isas, 8);
    for (int t = 0; t < ni; t++) {
        flashattn_status s = fa_fwd_ex(&q.t, &k.t, &v.t, &o.t, lse, &p, NULL, 0, isas[t]);
        const double eo = rel_err(&o, ro);
        TT_CHECK(s == FLASHATTN_OK && eo <= tol, "[%s] dropout %.2f case sq=%lld sk=%lld causal=%d: fwd status %d, o rel err %.3g",
                 isas[t]->isa, (double)c->p, (long long)c->sq, (long long)c->sk, c->causal, s, eo);
        s = fa_bwd_ex(&q.t, &k.t, &v.t, &o.t, &dout.t, lse, &dq.t, &dk.t, &dv.t, &p, NULL, 0, isas[t]);
        /* the gradients sum seq-long chains: f32's error grows with them */
        const double gt = tol * 4.0;
        const double e[3] = {rel_err(&dq, g[0]), rel_err(&dk, g[1]), rel_err(&dv, g[2])};
        TT_CHECK(s == FLASHATTN_OK && e[0] <= gt && e[1] <= gt && e[2] <= gt,
                 "[%s] dropout %.2f case sq=%lld sk=%lld: bwd status %d, rel err dq %.3g dk %.3g dv %.3g (bound %.3g)",
                 isas[t]->isa, (double)c->p, (long long)c->sq, (long long)c->sk, s, e[0], e[1], e[2], gt);
    }
    free(lse), free(ro), free(rl), free(g[0]), free(g[1]), free(g[2]);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout), tt_free(&o), tt_free(&dq), tt_free(&dk), tt_free(&dv);
}

static void errors(void) {
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0), o = tt_alloc(FLASHATTN_F32, 1, 8, 2, 16, 1, 0);
    uint64_t rng = 3;
    tt_fill_normal(&q, &rng, 1.0);
    const float bad[] = {-0.1f, 1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        flashattn_params p = dropout_params(bad[i], 1, 0);
        tt_fill_sentinel(o.mem, o.bytes);
        const flashattn_status s = flashattn_fwd(&q.t, &q.t, &q.t, &o.t, NULL, &p, NULL, 0);
        TT_CHECK(s == FLASHATTN_ERR_BAD_PARAM && tt_untouched(o.mem, o.bytes), "dropout_p %g: status %d, or written",
                 (double)bad[i], s);
    }
    flashattn_params p = dropout_params(0.1f, 1, 0);
    int32_t len = 8;
    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = q.t, cache.v = q.t, cache.seqlens_i32 = &len;
    tt_fill_sentinel(o.mem, o.bytes);
    const flashattn_status s = flashattn_decode(&q.t, &cache, NULL, NULL, &o.t, NULL, &p, NULL, 0);
    TT_CHECK(s == FLASHATTN_ERR_BAD_PARAM && tt_untouched(o.mem, o.bytes), "decode with dropout: status %d", s);
    /* any start column: the mask is a function of the column alone */
    uint8_t keep[8], all[40];
    TT_CHECK(flashattn_dropout_mask(&p, 2, 1, 1, 3, 0, 40, all) == FLASHATTN_OK, "mask at j0 = 0");
    for (int j0 = 1; j0 < 32; j0 += 3) {
        TT_CHECK(flashattn_dropout_mask(&p, 2, 1, 1, 3, j0, 8, keep) == FLASHATTN_OK && !memcmp(keep, all + j0, 8),
                 "mask at j0 = %d differs from the row's", j0);
    }
    TT_CHECK(flashattn_dropout_mask(&p, 2, 0, 2, 0, 0, 8, keep) == FLASHATTN_ERR_BAD_PARAM, "mask at h = heads_q");
    tt_free(&q), tt_free(&o);
}

int main(void) {
    known_answers();
    errors();
    statistics();
    mask_as_applied();
    static const dcase cases[] = {
        {2, 37, 37, 4, 2, 64, 0, -1, -1, 0.2f, FLASHATTN_F32},
        {1, 100, 160, 2, 2, 40, 1, -1, -1, 0.5f, FLASHATTN_F32},
        {2, 160, 100, 6, 2, 128, 1, -1, -1, 0.1f, FLASHATTN_F16},
        {1, 70, 70, 4, 1, 64, 0, 16, 4, 0.3f, FLASHATTN_BF16},
        {1, 3, 200, 2, 1, 16, 0, -1, -1, 0.25f, FLASHATTN_F32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) against_reference(&cases[c], 40 + c);
    return tt_finish("test_dropout");
}
