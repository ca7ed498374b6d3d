/*
 * The backward section of `flashattn check`: on each path, the forward then
 * the backward, and dq, dk, dv against the FP64 reference gradients, one
 * line per gradient. Cases come in rounds of 27 as in the forward section:
 * every dtype meets every mask kind once per round, while head layouts,
 * memory layouts, head_dims, lengths, thread counts and the deterministic
 * flag are drawn from the seed. --quick runs one round, the full sweep
 * three. The pass rule is tests/test_backward.c's (fa_bwd_pass_bounds): max
 * and rms errors each within twice those of the plain f32 backward on the
 * same inputs, with floors relative to the largest sum of |terms| of one
 * element. The line shows the max error and its bound; an rms failure is
 * spelled out.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/compare.h"
#include "reference/random.h"
#include "tool/tool.h"

#define ROUND 27
#define FULL_ROUNDS 3
/* Multiply-adds of one reference evaluation (b * hq * sq * sk * d) a case
 * may cost; the gradients cost about three forwards. */
#define MAX_WORK 3e6

typedef struct {
    int64_t b, sq, sk, hq, hkv, d, wl, wr;
    int causal, det, threads, layout;
    flashattn_align align;
    flashattn_dtype dt;
    double sigma;
} bwd_case;

/* causal, align, window left / right: -1 none, 0 zero, 1 random in [1, seq_k] */
static const int mask_kinds[9][4] = {
    {0, FLASHATTN_ALIGN_BOTTOM_RIGHT, -1, -1}, {1, FLASHATTN_ALIGN_BOTTOM_RIGHT, -1, -1},
    {1, FLASHATTN_ALIGN_TOP_LEFT, -1, -1},     {0, FLASHATTN_ALIGN_BOTTOM_RIGHT, 1, 0},
    {0, FLASHATTN_ALIGN_TOP_LEFT, 1, 1},       {0, FLASHATTN_ALIGN_BOTTOM_RIGHT, -1, 1},
    {0, FLASHATTN_ALIGN_TOP_LEFT, 1, -1},      {1, FLASHATTN_ALIGN_BOTTOM_RIGHT, 1, -1},
    {0, FLASHATTN_ALIGN_TOP_LEFT, 0, 0},
};
static const int64_t head_kinds[6][2] = {{1, 1}, {2, 2}, {4, 1}, {8, 2}, {3, 1}, {6, 3}};
static const int64_t special_dims[] = {1, 16, 17, 32, 40, 63, 64, 80, 96, 128, 129, 256};
static const char *const layout_names[3] = {"bshd", "bhsd", "bshd+pad"};

static int64_t uniform(uint64_t *rng, int64_t lo, int64_t hi) {
    return lo + (int64_t)(fa_rand_u64(rng) % (uint64_t)(hi - lo + 1));
}

static int64_t draw_len(uint64_t *rng) {
    switch (fa_rand_u64(rng) % 3) {
    case 0: return uniform(rng, 1, 8);
    case 1: return uniform(rng, 9, 150) | 1; /* odd: never a multiple of a tile */
    default: return uniform(rng, 150, 500);
    }
}

static bwd_case make_case(int i, uint64_t seed) {
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i + 77;
    const int round = i / ROUND, j = i % ROUND;
    bwd_case c;
    c.dt = (flashattn_dtype)(j % 3);
    const int *mk = mask_kinds[j / 3];
    c.causal = mk[0];
    c.align = (flashattn_align)mk[1];
    const int hk = (j / 3 + j % 3 + round) % 6;
    c.hq = head_kinds[hk][0], c.hkv = head_kinds[hk][1];
    c.layout = (j % 3 + 2 * (j / 3) + round) % 3;
    c.b = uniform(&rng, 1, 2);
    c.d = fa_rand_u64(&rng) % 2 ? special_dims[fa_rand_u64(&rng) % (sizeof special_dims / sizeof special_dims[0])]
                                : uniform(&rng, 1, 256);
    c.sq = draw_len(&rng);
    c.sk = fa_rand_u64(&rng) % 3 == 0 ? c.sq : draw_len(&rng);
    if (round == 0 && j == 4) c.sk = 0; /* no keys: dq = 0 */
    if (round == 0 && j == 5) c.sq = 0; /* no queries: dk = dv = 0 */
    c.sigma = (j + round) % 7 == 6 ? 10.0 : 1.0;
    c.threads = j % 5 == 3 ? 1 : j % 5 == 4 ? 3 : 0;
    c.det = (int)(fa_rand_u64(&rng) % 2);
    while ((double)c.b * c.hq * c.sq * c.sk * c.d > MAX_WORK) {
        if (c.b > 1) c.b--;
        else if (c.hq > c.hkv) c.hq -= c.hkv;
        else if (c.sq >= c.sk) c.sq = c.sq * 3 / 4 | 1;
        else c.sk = c.sk * 3 / 4 | 1;
    }
    c.wl = mk[2] < 0 ? -1 : mk[2] == 0 ? 0 : uniform(&rng, 1, c.sk > 1 ? c.sk : 1);
    c.wr = mk[3] < 0 ? -1 : mk[3] == 0 ? 0 : uniform(&rng, 1, c.sk > 1 ? c.sk : 1);
    return c;
}

static void describe(const bwd_case *c, const char *grad, char *buf, size_t n) {
    static const char *const dts[3] = {"f32", "f16", "bf16"};
    snprintf(buf, n, "%s %-4s b=%lld sq=%lld sk=%lld h=%lld/%lld d=%lld %s%s win=(%lld,%lld) %s sigma=%g threads=%d det=%d",
             grad, dts[c->dt], (long long)c->b, (long long)c->sq, (long long)c->sk, (long long)c->hq,
             (long long)c->hkv, (long long)c->d, c->causal ? "causal," : "",
             c->align == FLASHATTN_ALIGN_TOP_LEFT ? "top-left" : "bottom-right", (long long)c->wl,
             (long long)c->wr, layout_names[c->layout], c->sigma, c->threads, c->det);
}

/* A tensor in one of the case's layouts, with its own storage. */
static void *alloc_tensor(flashattn_tensor *t, flashattn_dtype dt, int64_t b, int64_t s, int64_t h,
                          int64_t d, int layout, int64_t pad) {
    const int64_t row = d + pad;
    *t = layout == 1 ? flashattn_tensor_bhsd(NULL, dt, b, s, h, row)
                     : flashattn_tensor_bshd(NULL, dt, b, s, h, row);
    t->head_dim = d;
    t->data = malloc((size_t)(b * s * h * row + 1) * flashattn_dtype_size(dt));
    return t->data;
}

enum { Q, K, V, O, DO, DQ, DK, DV, NT };

static int run_case(const bwd_case *c, uint64_t data_seed, const check_opts *o, check_tally *tally) {
    flashattn_tensor t[NT];
    const int64_t pad = c->layout == 2 ? 3 : 0;
    const size_t n[3] = {(size_t)(c->b * c->sq * c->hq * c->d), (size_t)(c->b * c->sk * c->hkv * c->d),
                         (size_t)(c->b * c->sk * c->hkv * c->d)};
    const size_t ln = (size_t)(c->b * c->hq * c->sq);
    double *ref[3], *plain[3], terms[3] = {0, 0, 0};
    float *lse = malloc((ln + 1) * sizeof(float));
    int ok = lse != NULL;
    memset(t, 0, sizeof t);
    for (int g = 0; g < 3; g++) {
        ref[g] = malloc((n[g] + 1) * sizeof(double));
        plain[g] = calloc(n[g] + 1, sizeof(double));
        ok &= ref[g] && plain[g];
    }
    for (int i = 0; i < NT; i++) {
        const int kv = i == K || i == V || i == DK || i == DV;
        ok &= alloc_tensor(&t[i], c->dt, c->b, kv ? c->sk : c->sq, kv ? c->hkv : c->hq, c->d,
                           i >= DQ ? (c->layout + 1) % 3 : c->layout, pad) != NULL;
    }
    if (ok) {
        uint64_t rng = data_seed;
        fa_fill_normal(&t[Q], &rng, c->sigma);
        fa_fill_normal(&t[K], &rng, c->sigma);
        fa_fill_normal(&t[V], &rng, 1.0);
        fa_fill_normal(&t[DO], &rng, 1.0);
        flashattn_params p = flashattn_params_default();
        p.causal = c->causal;
        p.align = c->align;
        p.window_left = c->wl;
        p.window_right = c->wr;
        p.num_threads = c->threads;
        p.deterministic = c->det;
        const char *ref_failure = NULL;
        if (fa_reference_bwd_f64(&t[Q], &t[K], &t[V], &t[DO], &p, ref[0], ref[1], ref[2]))
            ref_failure = "the FP64 reference refused the case";
        for (int s = 0; s < o->n_isas; s++) {
            const fa_kernels *kern = o->isas[s];
            char why[160], desc[3][240];
            const char *failure = ref_failure;
            flashattn_status st = fa_fwd_ex(&t[Q], &t[K], &t[V], &t[O], lse, &p, NULL, 0, kern);
            if (!st)
                st = fa_bwd_ex(&t[Q], &t[K], &t[V], &t[O], &t[DO], lse, &t[DQ], &t[DK], &t[DV], &p,
                               NULL, 0, kern);
            if (st) {
                snprintf(why, sizeof why, "status %d: %s", (int)st, flashattn_last_error());
                failure = why;
            }
            /* the yardstick gets the first path's O and LSE, as its backward did */
            if (s == 0 && (st || fa_reference_bwd_std_f32(&t[Q], &t[K], &t[V], &t[O], &t[DO], lse, &p,
                                                          c->dt, plain[0], plain[1], plain[2], terms)))
                ref_failure = "no plain f32 yardstick: the first path failed";
            if (!failure) failure = ref_failure;
            static const char *const names[3] = {"dq", "dk", "dv"};
            for (int g = 0; g < 3; g++) {
                describe(c, names[g], desc[g], sizeof desc[g]);
                double perr = 0.0;
                for (size_t x = 0; x < n[g]; x++) perr = fmax(perr, fabs(plain[g][x] - ref[g][x]));
                const fa_bwd_bounds bd =
                    fa_bwd_pass_bounds(c->dt, perr, fa_rms_diff(plain[g], ref[g], n[g]), terms[g]);
                const double scale = fa_max_abs(ref[g], n[g]), rms = fa_rms_err(&t[DQ + g], ref[g]);
                check_result r = {.isa = kern->isa, .desc = desc[g], .failure = failure, .lse_inf_ok = 1};
                char rms_why[96];
                if (!failure && !(rms <= bd.rms_bound)) {
                    snprintf(rms_why, sizeof rms_why, "rms err %.2e > bound %.2e", rms, bd.rms_bound);
                    r.failure = rms_why;
                }
                r.err = fa_max_abs_err(&t[DQ + g], ref[g]);
                r.rel = scale > 0 ? r.err / scale : r.err;
                r.bound = bd.max_bound;
                check_report(tally, &r);
            }
        }
        tally->cases++;
    }
    for (int i = 0; i < NT; i++) free(t[i].data);
    for (int g = 0; g < 3; g++) free(ref[g]), free(plain[g]);
    free(lse);
    return ok ? 0 : -1;
}

static int run_bwd(const check_opts *o, check_tally *t) {
    const int n = (o->quick ? 1 : FULL_ROUNDS) * ROUND;
    for (int i = 0; i < n; i++) {
        const bwd_case c = make_case(i, o->seed);
        if (run_case(&c, o->seed * 2000003u + (uint64_t)i, o, t)) return -1;
    }
    return 0;
}

const check_section check_section_bwd = {
    "bwd", "backward pass (dq, dk, dv) vs FP64 reference gradients (dtypes, masks, GQA/MQA, layouts, both dq reductions)",
    run_bwd};
