/*
 * Decode on bad input: every case returns its own status and a message,
 * and writes nothing: O, LSE and the whole cache (k and v, contiguous or
 * paged pool) are sentinel-filled before the call and must stay so. A
 * valid call on the same fixture first shows the fixture itself is fine
 * (and that it does write when it should).
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct {
    tt_tensor q, kn, vn, kc, vc, o;
    float lse[16];
    int32_t table[6];
    int64_t lens[2];
    flashattn_kv_cache cache;
    flashattn_params p;
    const flashattn_tensor *k_new, *v_new;
    void *ws;
    size_t ws_bytes;
} fixture;

/* q [2, 1, 4, 16] f32; cache f16, 2 kv-heads: contiguous [2, 8, 2, 16]
 * with lengths {3, 5}, or a pool of 6 pages of 4 rows, 3 pages per
 * sequence, lengths {3, 9}; appends of 1 row. */
static void make(fixture *f, int paged) {
    uint64_t rng = 3;
    memset(f, 0, sizeof *f);
    f->q = tt_alloc(FLASHATTN_F32, 2, 1, 4, 16, 1, 0);
    f->o = tt_alloc(FLASHATTN_F32, 2, 1, 4, 16, 1, 0);
    f->kn = tt_alloc(FLASHATTN_F32, 2, 1, 2, 16, 1, 0);
    f->vn = tt_alloc(FLASHATTN_F32, 2, 1, 2, 16, 1, 0);
    tt_fill_normal(&f->q, &rng, 1.0);
    tt_fill_normal(&f->kn, &rng, 1.0);
    tt_fill_normal(&f->vn, &rng, 1.0);
    f->kc = tt_alloc(FLASHATTN_F16, paged ? 6 : 2, paged ? 4 : 8, 2, 16, 1, 0);
    f->vc = tt_alloc(FLASHATTN_F16, paged ? 6 : 2, paged ? 4 : 8, 2, 16, 1, 0);
    tt_fill_sentinel(f->lse, sizeof f->lse);
    flashattn_kv_cache_init(&f->cache);
    f->cache.k = f->kc.t;
    f->cache.v = f->vc.t;
    f->lens[0] = 3, f->lens[1] = paged ? 9 : 5;
    f->cache.seqlens_i64 = f->lens;
    if (paged) {
        static const int32_t table[6] = {5, -1, -1, 1, 0, 3};
        memcpy(f->table, table, sizeof table);
        f->cache.block_table = f->table;
        f->cache.max_pages_per_seq = 3;
    }
    f->k_new = &f->kn.t, f->v_new = &f->vn.t;
    f->p = flashattn_params_default();
}

static void release(fixture *f) {
    tt_free(&f->q), tt_free(&f->kn), tt_free(&f->vn), tt_free(&f->kc), tt_free(&f->vc);
    tt_free(&f->o);
}

static flashattn_status call(fixture *f, flashattn_status *query) {
    size_t ws = 0;
    *query = flashattn_decode_workspace_size(&f->q.t, &f->cache, f->k_new, f->v_new, &f->o.t,
                                             f->lse, &f->p, &ws);
    return flashattn_decode(&f->q.t, &f->cache, f->k_new, f->v_new, &f->o.t, f->lse, &f->p, f->ws,
                            f->ws_bytes);
}

static void expect(fixture *f, flashattn_status want, const char *what) {
    flashattn_status query, s = call(f, &query);
    TT_CHECK(s == want, "%s: got %d (%s), want %d (%s)", what, s, flashattn_last_error(), want,
             flashattn_strerror(want));
    TT_CHECK(query == want || want == FLASHATTN_ERR_WORKSPACE_TOO_SMALL,
             "%s: workspace query got %d, want %d", what, query, want);
    TT_CHECK(strlen(flashattn_last_error()) > 0, "%s: no message", what);
    TT_CHECK(tt_untouched(f->o.mem, f->o.bytes) && tt_untouched(f->lse, sizeof f->lse),
             "%s: O or LSE was written", what);
    TT_CHECK(tt_untouched(f->kc.mem, f->kc.bytes) && tt_untouched(f->vc.mem, f->vc.bytes),
             "%s: the cache was written", what);
}

#define CASE(paged, want, mutation)   \
    do {                              \
        fixture f;                    \
        make(&f, paged);              \
        mutation;                     \
        expect(&f, want, #mutation);  \
        release(&f);                  \
    } while (0)

static void valid(int paged) {
    fixture f;
    make(&f, paged);
    flashattn_status query, s = call(&f, &query);
    TT_CHECK(s == FLASHATTN_OK && query == FLASHATTN_OK, "valid %s fixture: %d (%s)",
             paged ? "paged" : "contiguous", s, flashattn_last_error());
    TT_CHECK(!tt_untouched(f.kc.mem, f.kc.bytes) && !tt_untouched(f.o.mem, f.o.bytes),
             "valid %s fixture: nothing written", paged ? "paged" : "contiguous");
    release(&f);
}

/* An append-only step (no query rows) with automatic splits: the rows go
 * into the cache, O and LSE have nothing to take (the planner once divided
 * by the zero work items here). */
static void append_only(int paged) {
    fixture f;
    make(&f, paged);
    f.q.t.seqlen = f.o.t.seqlen = 0;
    flashattn_status query, s = call(&f, &query);
    TT_CHECK(s == FLASHATTN_OK && query == FLASHATTN_OK, "append-only %s step: %d (%s)",
             paged ? "paged" : "contiguous", s, flashattn_last_error());
    TT_CHECK(!tt_untouched(f.kc.mem, f.kc.bytes) && !tt_untouched(f.vc.mem, f.vc.bytes),
             "append-only %s step: the cache was not written", paged ? "paged" : "contiguous");
    TT_CHECK(tt_untouched(f.o.mem, f.o.bytes) && tt_untouched(f.lse, sizeof f.lse),
             "append-only %s step: O or LSE written", paged ? "paged" : "contiguous");
    release(&f);
}

int main(void) {
    valid(0);
    valid(1);
    append_only(0);
    append_only(1);
    /* lengths and capacity */
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.lens[1] = 9);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.lens[0] = -1);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.lens[1] = 8);  /* full: the append overflows */
    CASE(1, FLASHATTN_ERR_BAD_SHAPE, f.lens[1] = 12); /* likewise, paged */
    CASE(0, FLASHATTN_ERR_BAD_PARAM, f.cache.seqlens_i32 = (const int32_t *)f.table);
    CASE(0, FLASHATTN_ERR_NULL_POINTER, f.cache.seqlens_i64 = NULL);
    /* block table */
    CASE(1, FLASHATTN_ERR_BAD_PARAM, f.table[5] = 6);
    CASE(1, FLASHATTN_ERR_BAD_PARAM, f.table[4] = -2);
    CASE(1, FLASHATTN_ERR_BAD_PARAM, f.lens[0] = 4); /* the append needs unmapped page 1 */
    CASE(1, FLASHATTN_ERR_BAD_SHAPE, f.cache.max_pages_per_seq = -1);
    CASE(1, FLASHATTN_ERR_BAD_SHAPE, f.cache.k.seqlen = f.cache.v.seqlen = 0);
    CASE(1, FLASHATTN_ERR_OVERFLOW, f.cache.max_pages_per_seq = INT64_MAX / 2);
    /* tensors */
    CASE(0, FLASHATTN_ERR_NULL_POINTER, f.v_new = NULL);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.kn.t.heads = 1; f.k_new = &f.kn.t);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.vn.t.seqlen = 2; f.v_new = &f.vn.t);
    CASE(0, FLASHATTN_ERR_BAD_DTYPE, f.cache.v.dtype = FLASHATTN_BF16);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.cache.v.seqlen = 7);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.cache.k.batch = f.cache.v.batch = 3);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.cache.k.head_dim = f.cache.v.head_dim = 8);
    CASE(0, FLASHATTN_ERR_BAD_STRIDE, f.cache.k.stride_seq = 0); /* appending onto one row */
    CASE(0, FLASHATTN_ERR_BAD_HEADS, f.q.t.heads = f.o.t.heads = 3);
    CASE(0, FLASHATTN_ERR_BAD_SHAPE, f.o.t.seqlen = 2);
    CASE(0, FLASHATTN_ERR_BAD_PARAM, f.cache.struct_size = 8);
    CASE(0, FLASHATTN_ERR_NULL_POINTER, f.cache.k.data = NULL);
    /* params and workspace */
    CASE(0, FLASHATTN_ERR_BAD_PARAM, f.p.num_splits = -1);
    CASE(0, FLASHATTN_ERR_BAD_PARAM, f.p.num_splits = FLASHATTN_MAX_SPLITS + 1);
    CASE(0, FLASHATTN_ERR_BAD_TILE, f.p.block_n = 5000);
    CASE(0, FLASHATTN_ERR_BAD_PARAM, f.p.window_left = -2);
    static char small[64];
    CASE(0, FLASHATTN_ERR_WORKSPACE_TOO_SMALL, f.ws = small; f.ws_bytes = sizeof small);
    {
        /* NULL q and NULL cache */
        fixture f;
        make(&f, 0);
        TT_CHECK(flashattn_decode(NULL, &f.cache, NULL, NULL, &f.o.t, f.lse, NULL, NULL, 0) ==
                     FLASHATTN_ERR_NULL_POINTER,
                 "q NULL");
        TT_CHECK(flashattn_decode(&f.q.t, NULL, NULL, NULL, &f.o.t, f.lse, NULL, NULL, 0) ==
                     FLASHATTN_ERR_NULL_POINTER,
                 "cache NULL");
        TT_CHECK(tt_untouched(f.o.mem, f.o.bytes) && tt_untouched(f.lse, sizeof f.lse),
                 "NULL q/cache: output written");
        release(&f);
    }
    return tt_finish("test_decode_errors");
}
