/*
 * Sizes near the int64 limits (issue 24's items 3, 5, 6 and 9): every entry
 * point and workspace query on empty tensors with huge dimensions, and on
 * stride-0 tensors with huge seqlens, must answer at once with a status
 * (or a size) and never overflow a signed product (the sanitizer build
 * runs this with -fno-sanitize-recover=undefined, so a single overflow
 * fails it). Also the descriptor helpers' products, a window next to a
 * paged cache whose capacity is near INT64_MAX (the clamp seq_q +
 * capacity overflowed and dropped the window), and a workspace query at
 * seq_k ~ 2^31, which must give a size, not OVERFLOW.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/attn_f64.h"
#include "testutil.h"

#define BIG ((int64_t)1 << 62)

static flashattn_tensor tensor(void *data, int64_t b, int64_t s, int64_t h, int64_t d) {
    /* strides 0 but the innermost: any size, no memory */
    flashattn_tensor t = {data, FLASHATTN_F32, b, s, h, d, 0, 0, 0, 1};
    return t;
}

static int sane(flashattn_status s) {
    return s == FLASHATTN_OK || s == FLASHATTN_ERR_OVERFLOW || s == FLASHATTN_ERR_OUT_OF_MEMORY ||
           s == FLASHATTN_ERR_BAD_SHAPE || s == FLASHATTN_ERR_BAD_STRIDE || s == FLASHATTN_ERR_UNSUPPORTED;
}

/* Empty problems with huge dimensions: the calls themselves (which must
 * write nothing and return at once) and their workspace queries. */
static void empty_huge(void) {
    float buf[64] = {0};
    const int64_t dims[][5] = {
        /* batch, seq_q, seq_k, heads_q, heads_kv */
        {0, BIG, BIG, 1, 1},
        {0, INT64_MAX, INT64_MAX, 1, 1},
        {0, (int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40, 1},
        {BIG, 0, BIG, 4, 2},
        {BIG, BIG, 0, 4, 2},
        {1, 0, INT64_MAX, 1, 1},
        {INT64_MAX, 1, 1, 0, 0},
    };
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++) {
        const int64_t b = dims[c][0], sq = dims[c][1], sk = dims[c][2], hq = dims[c][3], hk = dims[c][4];
        flashattn_tensor q = tensor(buf, b, sq, hq, 16), k = tensor(buf, b, sk, hk, 16);
        flashattn_tensor o = q, dq = q, dk = k, dv = k;
        for (int causal = 0; causal < 2; causal++) {
            flashattn_params p = flashattn_params_default();
            p.causal = causal;
            p.window_left = causal ? 7 : -1;
            size_t ws = 0;
            flashattn_status s = flashattn_fwd_workspace_size(&q, &k, &k, &o, NULL, &p, &ws);
            TT_CHECK(sane(s), "case %zu: fwd workspace status %d", c, s);
            const int empty = b == 0 || sq == 0 || hq == 0;
            if (empty) {
                s = flashattn_fwd(&q, &k, &k, &o, NULL, &p, NULL, 0);
                TT_CHECK(sane(s), "case %zu: fwd status %d (%s)", c, s, flashattn_last_error());
            }
            s = flashattn_bwd_workspace_size(&q, &k, &k, &o, &o, NULL, &dq, &dk, &dv, &p, &ws);
            TT_CHECK(sane(s) || s == FLASHATTN_ERR_NULL_POINTER, "case %zu: bwd workspace status %d", c, s);
            /* decode over a contiguous cache of sk rows, with no row used */
            int32_t lens[1] = {0};
            flashattn_kv_cache cache;
            flashattn_kv_cache_init(&cache);
            cache.k = k, cache.v = k, cache.seqlens_i32 = b == 1 ? lens : NULL;
            if (b == 1) {
                s = flashattn_decode_workspace_size(&q, &cache, NULL, NULL, &o, NULL, &p, &ws);
                TT_CHECK(sane(s), "case %zu: decode workspace status %d (%s)", c, s, flashattn_last_error());
                s = flashattn_decode(&q, &cache, NULL, NULL, &o, NULL, &p, NULL, 0);
                TT_CHECK(sane(s), "case %zu: decode status %d (%s)", c, s, flashattn_last_error());
            }
        }
    }
    TT_CHECK(buf[0] == 0.0f, "an empty call wrote to its tensors");
}

/* Non-empty stride-0 tensors of huge seqlens: only the workspace queries
 * (the calls would do the work). */
static void broadcast_huge(void) {
    float buf[64] = {0};
    const int64_t sks[] = {(int64_t)1 << 31, (int64_t)1 << 40, BIG, INT64_MAX};
    for (size_t c = 0; c < sizeof sks / sizeof sks[0]; c++) {
        /* outputs with rows of their own (dk, dv: descriptors of memory
         * that a workspace query never touches) */
        flashattn_tensor q = tensor(buf, 1, 4, 2, 16), k = tensor(buf, 1, sks[c], 1, 16);
        flashattn_tensor o = flashattn_tensor_bshd(buf, FLASHATTN_F32, 1, 4, 2, 16);
        flashattn_tensor dk = flashattn_tensor_bshd(buf, FLASHATTN_F32, 1, sks[c], 1, 16);
        flashattn_params p = flashattn_params_default();
        size_t ws = 0;
        flashattn_status s = flashattn_fwd_workspace_size(&q, &k, &k, &o, buf, &p, &ws);
        TT_CHECK(s == FLASHATTN_OK || s == FLASHATTN_ERR_OVERFLOW, "seq_k %lld: fwd workspace status %d (%s)",
                 (long long)sks[c], s, flashattn_last_error());
        s = flashattn_bwd_workspace_size(&q, &k, &k, &o, &o, buf, &o, &dk, &dk, &p, &ws);
        TT_CHECK(sane(s), "seq_k %lld: bwd workspace status %d", (long long)sks[c], s);
        flashattn_tensor qq = tensor(buf, BIG, 1, 1, 16), kk = tensor(buf, BIG, 1, 1, 16);
        s = flashattn_fwd_workspace_size(&qq, &kk, &kk, &qq, NULL, &p, &ws);
        TT_CHECK(sane(s), "batch 2^62: fwd workspace status %d", s);
    }
    /* 2^31 keys pack into 2 TiB: a size, not OVERFLOW (a tile size of
     * 2^31 keys cast to int went negative) */
    flashattn_tensor q = tensor(buf, 1, 1024, 8, 128), k = tensor(buf, 1, (int64_t)1 << 31, 8, 128);
    flashattn_tensor o = flashattn_tensor_bshd(buf, FLASHATTN_F32, 1, 1024, 8, 128);
    flashattn_params p = flashattn_params_default();
    size_t ws = 0;
    const flashattn_status s = flashattn_fwd_workspace_size(&q, &k, &k, &o, NULL, &p, &ws);
    TT_CHECK(s == FLASHATTN_OK && ws > 0, "seq_k 2^31: workspace status %d (%s)", s,
             s ? flashattn_last_error() : "");
}

/* Non-empty problems of huge sizes, every input stride 0 and every output
 * a descriptor of memory a workspace query never touches: each query and
 * planner must answer (a size or OVERFLOW) without a signed overflow. */
static void huge_queries(void) {
    float buf[64] = {0};
    const int64_t dims[][4] = {
        /* batch, seq_q, seq_k, heads_q (heads_kv 1) */
        {1, (int64_t)1 << 40, (int64_t)1 << 40, 8},
        {(int64_t)1 << 30, 1 << 10, 1 << 10, 4},
        {1, 1, BIG, (int64_t)1 << 20},
        {1 << 20, 1, (int64_t)1 << 40, 64},
        {1, BIG, 1, 1},
    };
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++)
        for (int m = 0; m < 3; m++) {
            const int64_t b = dims[c][0], sq = dims[c][1], sk = dims[c][2], hq = dims[c][3];
            flashattn_tensor q = tensor(buf, b, sq, hq, 64), k = tensor(buf, b, sk, 1, 64);
            flashattn_tensor o = flashattn_tensor_bshd(buf, FLASHATTN_F32, b, sq, hq, 64);
            flashattn_tensor dk = flashattn_tensor_bshd(buf, FLASHATTN_F32, b, sk, 1, 64);
            flashattn_params p = flashattn_params_default();
            p.causal = m == 1;
            p.window_left = m == 2 ? 100 : -1, p.window_right = m == 2 ? BIG : -1;
            p.deterministic = m == 2;
            size_t ws = 0;
            flashattn_status s = flashattn_fwd_workspace_size(&q, &k, &k, &o, NULL, &p, &ws);
            TT_CHECK(sane(s), "huge %zu/%d: fwd workspace status %d", c, m, s);
            s = flashattn_bwd_workspace_size(&q, &k, &k, &o, &o, buf, &o, &dk, &dk, &p, &ws);
            TT_CHECK(sane(s), "huge %zu/%d: bwd workspace status %d", c, m, s);
            int32_t lens[1] = {1};
            flashattn_kv_cache cache;
            flashattn_kv_cache_init(&cache);
            cache.k = k, cache.v = k, cache.seqlens_i32 = b == 1 ? lens : NULL;
            if (b == 1) {
                s = flashattn_decode_workspace_size(&q, &cache, NULL, NULL, &o, NULL, &p, &ws);
                TT_CHECK(sane(s), "huge %zu/%d: decode workspace status %d", c, m, s);
            }
        }
}

/* The descriptor helpers: a product that overflows gives a descriptor the
 * entry points reject (OVERFLOW), never a wrapped stride. */
static void helpers(void) {
    float buf[16] = {0};
    const flashattn_tensor a = flashattn_tensor_bshd(buf, FLASHATTN_F32, 1, BIG, BIG, 64);
    const flashattn_tensor b = flashattn_tensor_bhsd(buf, FLASHATTN_F32, 1, BIG, BIG, 64);
    const flashattn_tensor z = flashattn_tensor_bshd(NULL, FLASHATTN_F32, 0, BIG, 4, 64);
    flashattn_params p = flashattn_params_default();
    size_t ws;
    TT_CHECK(flashattn_fwd_workspace_size(&a, &a, &a, &a, NULL, &p, &ws) == FLASHATTN_ERR_OVERFLOW,
             "bshd with an overflowing stride: not OVERFLOW");
    TT_CHECK(flashattn_fwd_workspace_size(&b, &b, &b, &b, NULL, &p, &ws) == FLASHATTN_ERR_OVERFLOW,
             "bhsd with an overflowing stride: not OVERFLOW");
    TT_CHECK(a.stride_batch >= 0 && a.stride_seq >= 0 && b.stride_head >= 0 && b.stride_batch >= 0,
             "a helper's stride wrapped negative");
    TT_CHECK(flashattn_fwd(&z, &z, &z, &z, NULL, &p, NULL, 0) == FLASHATTN_OK, "an empty bshd tensor: %s",
             flashattn_last_error());
}

/* A window on a paged cache of capacity INT64_MAX (pages of 7 rows, as
 * many per sequence as INT64_MAX / 7, only the first two ever read): the
 * window must hold. */
static void window_near_capacity_limit(void) {
    const int64_t d = 16, len = 12, page = 7;
    uint64_t rng = 9;
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, 1, 1, d, 1, 0), kv = tt_alloc(FLASHATTN_F32, 1, 2 * page, 1, d, 1, 0);
    tt_tensor vv = tt_alloc(FLASHATTN_F32, 1, 2 * page, 1, d, 1, 0), o = tt_alloc(FLASHATTN_F32, 1, 1, 1, d, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&kv, &rng, 1.0), tt_fill_normal(&vv, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    p.window_left = 3;
    flashattn_tensor kr = kv.t, vr = vv.t;
    kr.seqlen = vr.seqlen = len;
    double ref[16], rlse[1];
    TT_CHECK(fa_reference_fwd_f64(&q.t, &kr, &vr, &p, ref, rlse) == FLASHATTN_OK, "reference");
    /* the same rows as a pool of two pages: row j in page j / 7, slot j % 7 */
    flashattn_tensor kp = kv.t, vp = vv.t;
    kp.batch = vp.batch = 2, kp.seqlen = vp.seqlen = page;
    kp.stride_batch = vp.stride_batch = page * d;
    int32_t table[2] = {0, 1}, lens[1] = {(int32_t)len};
    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = kp, cache.v = vp, cache.seqlens_i32 = lens, cache.block_table = table;
    cache.max_pages_per_seq = INT64_MAX / page;
    const flashattn_status s = flashattn_decode(&q.t, &cache, NULL, NULL, &o.t, NULL, &p, NULL, 0);
    const double err = s == FLASHATTN_OK ? tt_max_abs_err(&o, ref) : INFINITY;
    TT_CHECK(s == FLASHATTN_OK && err <= 1e-5, "window on a cache of capacity INT64_MAX: status %d (%s), err %.3g",
             s, s ? flashattn_last_error() : "", err);
    tt_free(&q), tt_free(&kv), tt_free(&vv), tt_free(&o);
}

/* The backward's documented limit: FLASHATTN_MAX_BWD_SEQ keys, and as
 * many query rows per kv-head; one more is UNSUPPORTED, nothing written. */
static void bwd_limit(void) {
    float buf[64] = {0};
    const int64_t L = FLASHATTN_MAX_BWD_SEQ;
    const int64_t shapes[][3] = {{1, L + 1, 1}, {L + 1, 1, 1}, {L / 2 + 1, 1, 2}, {L, L, 1}};
    for (int c = 0; c < 4; c++) {
        const int64_t sq = shapes[c][0], sk = shapes[c][1], g = shapes[c][2];
        flashattn_tensor q = tensor(buf, 1, sq, g, 16), k = tensor(buf, 1, sk, 1, 16);
        flashattn_tensor o = flashattn_tensor_bshd(buf, FLASHATTN_F32, 1, sq, g, 16);
        flashattn_tensor dk = flashattn_tensor_bshd(buf, FLASHATTN_F32, 1, sk, 1, 16);
        flashattn_params p = flashattn_params_default();
        size_t ws = 0;
        const flashattn_status s = flashattn_bwd_workspace_size(&q, &k, &k, &o, &o, buf, &o, &dk, &dk, &p, &ws);
        const flashattn_status want = c < 3 ? FLASHATTN_ERR_UNSUPPORTED : FLASHATTN_OK;
        TT_CHECK(s == want, "bwd of seq_q %lld, seq_k %lld, group %lld: status %d, want %d", (long long)sq,
                 (long long)sk, (long long)g, s, want);
    }
}

int main(void) {
    bwd_limit();
    helpers();
    empty_huge();
    broadcast_huge();
    huge_queries();
    window_near_capacity_limit();
    return tt_finish("test_sizes");
}
