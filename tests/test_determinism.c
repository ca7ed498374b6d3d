/*
 * Results are bit-identical whatever the thread count and whatever block_m
 * (a row's arithmetic never depends on which q-block or thread computes it),
 * and repeated runs agree, on every ISA path.
 */
#include <stdlib.h>
#include <string.h>

#include "api/forward.h"
#include "testutil.h"

static void run(const fa_kernels *kern, const tt_tensor *q, const tt_tensor *k, const tt_tensor *v,
                flashattn_params *p, void *o, float *lse) {
    tt_tensor out = tt_alloc(q->t.dtype, q->t.batch, q->t.seqlen, q->t.heads, q->t.head_dim, 1, 0);
    /* without the LSE when the sizes run as decode (plan/fwd_route.h):
     * a tile size runs the forward driver, and the LSE takes decode's wide
     * path (below 16 rows a kv-head, the path without the LSE differs) */
    if (!p->block_m && tt_fwd_as_decode(q->t.seqlen, k->t.seqlen, q->t.heads, k->t.heads)) lse = NULL;
    flashattn_status s = fa_fwd_ex(&q->t, &k->t, &v->t, &out.t, lse, p, NULL, 0, kern);
    TT_CHECK(s == FLASHATTN_OK, "[%s] status %d: %s", kern->isa, s, flashattn_last_error());
    memcpy(o, out.mem, out.bytes);
    tt_free(&out);
}

/* A forward run as decode takes its wide path when the LSE is asked for,
 * and that path sums S = Q K^T as the forward driver's GEMM tile does
 * (plan/fwd_route.h): on these few-key shapes, the driver's bits (a tile
 * size runs the driver). With one or two keys the wide path does all
 * kv-heads of an item in one GEMM (decode_block.c, wide_qk_stacked); with
 * three, a head at a time. */
static void wide_route_bits(const fa_kernels *const *isas, int n) {
    static const struct { int64_t sq, sk, hq, hkv, d; int causal; } cases[] = {
        {1, 1, 8, 8, 128, 0}, {1, 2, 8, 8, 64, 0}, {2, 1, 8, 4, 80, 1},
        {3, 2, 4, 2, 128, 1}, {1, 3, 8, 8, 128, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t rng = 7 + c;
        tt_tensor q = tt_alloc(FLASHATTN_F32, 2, cases[c].sq, cases[c].hq, cases[c].d, 1, 0);
        tt_tensor k = tt_alloc(FLASHATTN_F32, 2, cases[c].sk, cases[c].hkv, cases[c].d, 1, 0);
        tt_tensor v = tt_alloc(FLASHATTN_F32, 2, cases[c].sk, cases[c].hkv, cases[c].d, 1, 0);
        tt_fill_normal(&q, &rng, 2.0), tt_fill_normal(&k, &rng, 2.0), tt_fill_normal(&v, &rng, 1.0);
        const size_t lse_n = (size_t)(2 * cases[c].hq * cases[c].sq);
        for (int t = 0; t < n; t++) {
            void *o_ref = malloc(q.bytes), *o = malloc(q.bytes);
            float *lse_ref = calloc(lse_n, 4), *lse = calloc(lse_n, 4);
            flashattn_params p = flashattn_params_default();
            p.causal = cases[c].causal;
            p.num_threads = 1;
            /* as decode (on its wide path: the LSE is asked for), then with a
             * tile size on the forward driver */
            for (int driver = 0; driver < 2; driver++) {
                tt_tensor out = tt_alloc(FLASHATTN_F32, 2, cases[c].sq, cases[c].hq, cases[c].d, 1, 0);
                p.block_m = driver;
                flashattn_status s =
                    fa_fwd_ex(&q.t, &k.t, &v.t, &out.t, driver ? lse_ref : lse, &p, NULL, 0, isas[t]);
                TT_CHECK(s == FLASHATTN_OK, "[%s] status %d: %s", isas[t]->isa, s, flashattn_last_error());
                memcpy(driver ? o_ref : o, out.mem, out.bytes);
                tt_free(&out);
            }
            TT_CHECK(memcmp(o, o_ref, q.bytes) == 0 && memcmp(lse, lse_ref, lse_n * 4) == 0,
                     "[%s] case %zu (%lld x %lld keys, %lld heads): the wide path differs from the driver",
                     isas[t]->isa, c, (long long)cases[c].sq, (long long)cases[c].sk, (long long)cases[c].hq);
            free(o_ref), free(o), free(lse_ref), free(lse);
        }
        tt_free(&q), tt_free(&k), tt_free(&v);
    }
}

int main(void) {
    const fa_kernels *isas[8], *isas_dot[8];
    const int n_all = tt_isas(isas, 8);
    /* the bf16 case also on the dot-product route: the other cases would
     * run the same kernels again there (gemm_bf16 is all a dot table adds) */
    const int n_dot = tt_isas_dot(isas_dot, 8);
    static const struct { int64_t sq, sk, hq, hkv, d; int causal; int64_t wl; flashattn_dtype dt; } cases[] = {
        {301, 517, 4, 2, 64, 1, -1, FLASHATTN_F32},
        {129, 129, 2, 1, 80, 0, 33, FLASHATTN_BF16},
        {64, 1000, 3, 3, 128, 1, 100, FLASHATTN_F16},
        /* run as decode (plan/fwd_route.h): keys split in 8; too few keys
         * to split, one kv-head an item */
        {4, 9000, 8, 2, 128, 1, -1, FLASHATTN_F16},
        {17, 40, 4, 4, 64, 0, -1, FLASHATTN_F32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t rng = 99 + c;
        tt_tensor q = tt_alloc(cases[c].dt, 2, cases[c].sq, cases[c].hq, cases[c].d, 1, 0);
        tt_tensor k = tt_alloc(cases[c].dt, 2, cases[c].sk, cases[c].hkv, cases[c].d, 1, 0);
        tt_tensor v = tt_alloc(cases[c].dt, 2, cases[c].sk, cases[c].hkv, cases[c].d, 1, 0);
        tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
        size_t lse_n = (size_t)(2 * cases[c].hq * cases[c].sq);
        const int dot = cases[c].dt == FLASHATTN_BF16, n = dot ? n_dot : n_all;
        for (int t = 0; t < n; t++) {
            const fa_kernels *kern = dot ? isas_dot[t] : isas[t];
            void *o_ref = malloc(q.bytes), *o = malloc(q.bytes);
            float *lse_ref = calloc(lse_n, 4), *lse = calloc(lse_n, 4); /* (unwritten without LSE) */
            flashattn_params p = flashattn_params_default();
            p.causal = cases[c].causal;
            p.window_left = cases[c].wl;
            p.num_threads = 1;
            run(kern, &q, &k, &v, &p, o_ref, lse_ref);
            /* thread counts, including more threads than work items */
            static const int threads[] = {2, 3, 4, 7};
            for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
                p.num_threads = threads[i];
                run(kern, &q, &k, &v, &p, o, lse);
                TT_CHECK(memcmp(o, o_ref, q.bytes) == 0 && memcmp(lse, lse_ref, lse_n * 4) == 0,
                         "[%s] case %zu: %d threads differ from 1 thread", kern->isa, c, threads[i]);
            }
            /* block_m values: not multiples of MR, odd, large. A tile
             * size runs the forward's driver, so where the sizes run as
             * decode the first block_m's result is the yardstick. */
            p.num_threads = 2;
            static const int block_m[] = {1, 5, 16, 37, 64, 200};
            const int as_decode = tt_fwd_as_decode(cases[c].sq, cases[c].sk, cases[c].hq, cases[c].hkv);
            if (as_decode) {
                p.block_m = block_m[0];
                run(kern, &q, &k, &v, &p, o_ref, lse_ref);
            }
            for (size_t i = as_decode; i < sizeof block_m / sizeof block_m[0]; i++) {
                p.block_m = block_m[i];
                run(kern, &q, &k, &v, &p, o, lse);
                TT_CHECK(memcmp(o, o_ref, q.bytes) == 0 && memcmp(lse, lse_ref, lse_n * 4) == 0,
                         "[%s] case %zu: block_m %d differs", kern->isa, c, block_m[i]);
            }
            free(o_ref), free(o), free(lse_ref), free(lse);
        }
        tt_free(&q), tt_free(&k), tt_free(&v);
    }
    wide_route_bits(isas, n_all);
    return tt_finish("test_determinism");
}
