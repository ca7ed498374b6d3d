/*
 * Bad input: every error path returns its own status, a message, and leaves
 * O and LSE exactly as they were (sentinel-filled before the call).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct {
    tt_tensor q, k, v, o;
    float *lse;
    size_t lse_bytes;
    flashattn_params p;
} fixture;

static fixture make(void) {
    fixture f;
    uint64_t rng = 7;
    f.q = tt_alloc(FLASHATTN_F32, 2, 9, 4, 32, 1, 0);
    f.k = tt_alloc(FLASHATTN_F32, 2, 11, 2, 32, 1, 0);
    f.v = tt_alloc(FLASHATTN_F32, 2, 11, 2, 32, 1, 0);
    f.o = tt_alloc(FLASHATTN_F32, 2, 9, 4, 32, 1, 0);
    tt_fill_normal(&f.q, &rng, 1.0);
    tt_fill_normal(&f.k, &rng, 1.0);
    tt_fill_normal(&f.v, &rng, 1.0);
    f.lse_bytes = 2 * 4 * 9 * sizeof(float);
    f.lse = malloc(f.lse_bytes);
    tt_fill_sentinel(f.lse, f.lse_bytes);
    f.p = flashattn_params_default();
    return f;
}

static void release(fixture *f) {
    tt_free(&f->q), tt_free(&f->k), tt_free(&f->v), tt_free(&f->o);
    free(f->lse);
}

/* Run the forward on a (possibly broken) fixture and check the status and
 * that neither output changed. The workspace query must agree. */
static void expect(fixture *f, flashattn_status want, const char *what) {
    size_t ws = 0;
    flashattn_status sq = flashattn_fwd_workspace_size(&f->q.t, &f->k.t, &f->v.t, &f->o.t, f->lse,
                                                       &f->p, &ws);
    flashattn_status s = flashattn_fwd(&f->q.t, &f->k.t, &f->v.t, &f->o.t, f->lse, &f->p, NULL, 0);
    TT_CHECK(s == want, "%s: got %d (%s), want %d (%s)", what, s, flashattn_last_error(), want,
             flashattn_strerror(want));
    TT_CHECK(sq == want || want == FLASHATTN_ERR_WORKSPACE_TOO_SMALL,
             "%s: workspace query got %d, want %d", what, sq, want);
    TT_CHECK(s == FLASHATTN_OK || strlen(flashattn_last_error()) > 0, "%s: no message", what);
    TT_CHECK(tt_untouched(f->o.mem, f->o.bytes), "%s: O was written", what);
    TT_CHECK(tt_untouched(f->lse, f->lse_bytes), "%s: LSE was written", what);
}

#define CASE(want, mutation)            \
    do {                                \
        fixture f = make();             \
        mutation;                       \
        expect(&f, want, #mutation);    \
        release(&f);                    \
    } while (0)

int main(void) {
    /* the fixture itself is valid */
    {
        fixture f = make();
        TT_CHECK(flashattn_fwd(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, &f.p, NULL, 0) == FLASHATTN_OK,
                 "valid fixture: %s", flashattn_last_error());
        TT_CHECK(!tt_untouched(f.o.mem, f.o.bytes), "valid fixture wrote nothing");
        release(&f);
    }
    CASE(FLASHATTN_ERR_NULL_POINTER, f.q.t.data = NULL);
    CASE(FLASHATTN_ERR_NULL_POINTER, f.v.t.data = NULL);
    CASE(FLASHATTN_ERR_NULL_POINTER, f.o.t.data = NULL);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.q.t.seqlen = -1);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.k.t.batch = -3);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.k.t.heads = 0);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.v.t.seqlen = 10);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.o.t.seqlen = 8);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.o.t.batch = 1);
    CASE(FLASHATTN_ERR_BAD_HEAD_DIM, f.q.t.head_dim = 0);
    CASE(FLASHATTN_ERR_BAD_HEAD_DIM, f.q.t.head_dim = f.k.t.head_dim = f.v.t.head_dim = f.o.t.head_dim = FLASHATTN_MAX_HEAD_DIM + 1);
    CASE(FLASHATTN_ERR_BAD_SHAPE, f.k.t.head_dim = f.v.t.head_dim = 16);
    CASE(FLASHATTN_ERR_BAD_HEADS, f.k.t.heads = f.v.t.heads = 3);
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.q.t.stride_dim = 2);
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.k.t.stride_seq = -64);
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.o.t.stride_head = 16);          /* rows overlap */
    CASE(FLASHATTN_ERR_BAD_STRIDE, f.o.t.stride_seq = 0);            /* rows coincide */
    CASE(FLASHATTN_ERR_BAD_DTYPE, f.k.t.dtype = FLASHATTN_F16);      /* q, k, v differ */
    CASE(FLASHATTN_ERR_BAD_DTYPE, f.o.t.dtype = (flashattn_dtype)7);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.struct_size = 8);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.scale = NAN);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.scale = INFINITY);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.causal = 2);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.window_left = -2);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.align = (flashattn_align)5);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.num_threads = -1);
    CASE(FLASHATTN_ERR_BAD_PARAM, f.p.reserved_flags = 1);
    CASE(FLASHATTN_ERR_BAD_TILE, f.p.block_m = -16);
    CASE(FLASHATTN_ERR_BAD_TILE, f.p.block_n = 24);                  /* not a multiple of any NR */
    CASE(FLASHATTN_ERR_BAD_TILE, f.p.block_m = 100000);
    /* byte counts that overflow 64 bits, with otherwise consistent shapes */
    CASE(FLASHATTN_ERR_OVERFLOW, f.k.t.stride_seq = INT64_MAX / 4);
    CASE(FLASHATTN_ERR_OVERFLOW, (f.q.t.seqlen = f.o.t.seqlen = INT64_MAX / 2,
                                  f.q.t.stride_seq = f.o.t.stride_seq = 1 << 20));
    CASE(FLASHATTN_ERR_OVERFLOW, (f.q.t.stride_seq = f.o.t.stride_seq = (int64_t)1 << 61));
    /* a stride past FLASHATTN_MAX_STRIDE (refused on a dimension of size 1 too: tests/fuzz corpus) */
    CASE(FLASHATTN_ERR_OVERFLOW, f.v.t.stride_batch = FLASHATTN_MAX_STRIDE + 1);
    CASE(FLASHATTN_ERR_NULL_POINTER, f.q.t.data = NULL);

    /* a NULL tensor pointer */
    {
        fixture f = make();
        flashattn_status s = flashattn_fwd(&f.q.t, NULL, &f.v.t, &f.o.t, f.lse, &f.p, NULL, 0);
        TT_CHECK(s == FLASHATTN_ERR_NULL_POINTER, "k == NULL: got %d", s);
        size_t ws;
        s = flashattn_fwd_workspace_size(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, &f.p, NULL);
        TT_CHECK(s == FLASHATTN_ERR_NULL_POINTER, "workspace_bytes == NULL: got %d", s);
        s = flashattn_fwd_workspace_size(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, NULL, &ws);
        TT_CHECK(s == FLASHATTN_OK, "params == NULL means defaults: got %d", s);
        TT_CHECK(tt_untouched(f.o.mem, f.o.bytes), "O written");
        release(&f);
    }
    /* a workspace one byte too small */
    {
        fixture f = make();
        size_t ws = 0;
        TT_CHECK(flashattn_fwd_workspace_size(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, &f.p, &ws) == 0,
                 "query failed");
        void *w = malloc(ws);
        flashattn_status s = flashattn_fwd(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, &f.p, w, ws - 1);
        TT_CHECK(s == FLASHATTN_ERR_WORKSPACE_TOO_SMALL, "small workspace: got %d", s);
        TT_CHECK(tt_untouched(f.o.mem, f.o.bytes) && tt_untouched(f.lse, f.lse_bytes), "outputs written");
        s = flashattn_fwd(&f.q.t, &f.k.t, &f.v.t, &f.o.t, f.lse, &f.p, w, ws);
        TT_CHECK(s == FLASHATTN_OK, "exact workspace: got %d (%s)", s, flashattn_last_error());
        free(w);
        release(&f);
    }
    /* every status has its own string */
    for (int a = 0; a < FLASHATTN_STATUS_COUNT; a++)
        for (int b = a + 1; b < FLASHATTN_STATUS_COUNT; b++)
            TT_CHECK(strcmp(flashattn_strerror(a), flashattn_strerror(b)) != 0, "status %d and %d share a string", a, b);
    TT_CHECK(strcmp(flashattn_strerror((flashattn_status)99), "unknown status code") == 0, "unknown code");
    return tt_finish("test_errors");
}
