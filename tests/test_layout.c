/*
 * Workspace layouts (core/layout.h): for every plan the forward, backward
 * and decode planners make over a sweep of shapes, options, thread counts
 * and kernel paths, every layout's regions are aligned, disjoint, hold
 * their items and fit; nested areas (a group's, a thread's, a split's) fit
 * the stride of the region that holds them; the workspace size covers the
 * layout at any address. Then the layout builder itself: overflow near
 * SIZE_MAX, regions added out of order, and a check that catches a bad
 * layout.
 */
#include <stdint.h>
#include <string.h>

#include "api/validate.h"
#include "core/layout.h"
#include "plan/tiles.h"
#include "plan/tiles_bwd.h"
#include "plan/tiles_decode.h"
#include "testutil.h"

static int plans;

static void check(const fa_layout *l, size_t capacity, const char *what) {
    char why[160];
    TT_CHECK(fa_layout_check(l, capacity, why, sizeof why), "%s: %s", what, why);
}

/* Region id of outer holds items of inner's size. */
static void check_nested(const fa_layout *outer, int id, const fa_layout *inner, const char *what) {
    TT_CHECK(outer->r[id].stride >= inner->size && outer->r[id].bytes >= inner->size,
             "%s: %s.%s items of %zu bytes hold %s of %zu", what, outer->name, outer->r[id].name,
             outer->r[id].stride, inner->name, inner->size);
    check(inner, inner->size, what);
}

static void check_ws(const fa_layout *ws, size_t workspace_bytes, const char *what) {
    plans++;
    TT_CHECK(workspace_bytes >= ws->size + FA_LAYOUT_ALIGN - 1,
             "%s: workspace %zu bytes, layout %zu + alignment", what, workspace_bytes, ws->size);
    check(ws, ws->size, what);
}

typedef struct {
    int64_t b, sq, sk, hq, hk, d;
    int causal, wl, bm, bn, threads, det;
    flashattn_dtype dt;
} shape;

static const shape shapes[] = {
    {1, 1, 1, 1, 1, 1, 0, -1, 0, 0, 1, 0, FLASHATTN_F32},
    {2, 37, 53, 4, 2, 24, 1, -1, 0, 0, 2, 1, FLASHATTN_F16},
    {1, 300, 200, 2, 1, 64, 1, 40, 48, 32, 3, 0, FLASHATTN_BF16},
    {3, 130, 1030, 8, 8, 128, 0, -1, 0, 0, 4, 1, FLASHATTN_F32},
    {1, 16, 4096, 32, 8, 128, 0, -1, 0, 0, 2, 0, FLASHATTN_BF16},
    {1, 513, 513, 2, 2, 256, 1, -1, 7, 0, 1, 1, FLASHATTN_F32},
    {2, 0, 77, 4, 4, 33, 0, 5, 0, 0, 2, 0, FLASHATTN_F16},
    {1, 70, 0, 2, 2, 16, 0, -1, 0, 0, 2, 1, FLASHATTN_F32},
    {1, 2048, 2048, 1, 1, 80, 1, -1, 0, 0, 8, 1, FLASHATTN_BF16},
};

static void sweep(const fa_kernels *kern) {
    static char dummy[64];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *c = &shapes[i];
        char what[96];
        snprintf(what, sizeof what, "[%s] shape %zu", kern->isa, i);
        flashattn_tensor q = flashattn_tensor_bshd(dummy, c->dt, c->b, c->sq, c->hq, c->d);
        flashattn_tensor k = flashattn_tensor_bshd(dummy, c->dt, c->b, c->sk, c->hk, c->d);
        flashattn_params p = flashattn_params_default();
        p.causal = c->causal, p.window_left = c->wl, p.num_threads = c->threads;
        p.deterministic = c->det;
        p.block_m = c->bm, p.block_n = c->bn ? c->bn / 16 * kern->nr : 0;
        fa_problem pb;
        TT_CHECK(fa_validate_fwd(&q, &k, &k, &q, NULL, &p, &pb) == FLASHATTN_OK, "%s: validate", what);

        fa_fwd_plan fp;
        if (fa_plan_fwd(&pb, &p, kern, &fp) == FLASHATTN_OK) {
            check_ws(&fp.ws, fp.workspace_bytes, what);
            check_nested(&fp.ws, FA_FWD_WS_GROUPS, &fp.group, what);
            check_nested(&fp.ws, FA_FWD_WS_THREADS, &fp.thread, what);
            TT_CHECK(fp.ws.r[FA_FWD_WS_THREADS].count == (size_t)fp.threads, "%s: a tile area a thread",
                     what);
        } else {
            TT_CHECK(0, "%s: forward plan: %s", what, flashattn_last_error());
        }

        fa_bwd_plan bp;
        flashattn_params pbw = p;
        pbw.block_n = 0;
        if (fa_plan_bwd(&pb, c->dt, &pbw, kern, &bp) == FLASHATTN_OK) {
            check_ws(&bp.ws, bp.workspace_bytes, what);
            check_nested(&bp.ws, FA_BWD_WS_GROUPS, &bp.group, what);
            check_nested(&bp.ws, FA_BWD_WS_THREADS, &bp.thread, what);
            check_nested(&bp.group, FA_BWD_GROUP_HEADS, &bp.head, what);
            TT_CHECK(bp.group.r[FA_BWD_GROUP_DQ].count == (size_t)(bp.slots * pb.group) &&
                         bp.group.r[FA_BWD_GROUP_LOCKS].count == (size_t)(bp.qblocks * pb.group),
                     "%s: dq accumulators and locks counted", what);
        } else {
            TT_CHECK(0, "%s: backward plan: %s", what, flashattn_last_error());
        }

        /* decode against a cache of this capacity, with and without splits */
        for (int splits = 0; splits <= 5; splits += 5) {
            fa_decode_problem dp;
            memset(&dp, 0, sizeof dp);
            dp.base = pb;
            flashattn_params pd = p;
            pd.block_m = pd.block_n = 0, pd.num_splits = splits;
            fa_decode_plan dplan;
            for (int wide = 0; wide < 2; wide++) {
                if (fa_plan_decode(&dp, &pd, kern, 0, wide, &dplan) != FLASHATTN_OK) {
                    TT_CHECK(0, "%s: decode plan: %s", what, flashattn_last_error());
                    continue;
                }
                check_ws(&dplan.ws, dplan.workspace_bytes, what);
                check_nested(&dplan.ws, FA_DECODE_WS_THREADS, &dplan.thread, what);
                if (dplan.num_splits > 1) check_nested(&dplan.ws, FA_DECODE_WS_PARTS, &dplan.part, what);
                TT_CHECK((dplan.num_splits > 1) == (dplan.ws.r[FA_DECODE_WS_PARTS].count > 0),
                         "%s: partials exactly when split (%d splits)", what, dplan.num_splits);
            }
        }
    }
}

/* The builder: sizes near SIZE_MAX overflow instead of wrapping, regions
 * must come in their enum's order, and the check sees overlaps. */
static void builder(void) {
    fa_layout l;
    fa_layout_init(&l, "t");
    fa_layout_array(&l, 0, "a", 3, 100);
    fa_layout_scalars(&l, 1, "b", 5, 4);
    fa_layout_array(&l, 2, "c", 0, 1000);
    fa_layout_array(&l, 3, "d", 1, 1);
    TT_CHECK(!l.overflow && l.r[0].stride == 128 && l.r[1].offset == 384 && l.r[1].stride == 4 &&
                 l.r[3].offset == 448 && l.size == 512,
             "small layout: stride %zu, offsets %zu %zu, size %zu", l.r[0].stride, l.r[1].offset,
             l.r[3].offset, l.size);
    char why[128];
    TT_CHECK(fa_layout_check(&l, l.size, why, sizeof why), "small layout: %s", why);
    TT_CHECK(!fa_layout_check(&l, l.size - 1, why, sizeof why), "a capacity one byte short passes");
    TT_CHECK(fa_layout_workspace_bytes(&l) == l.size + FA_LAYOUT_ALIGN, "workspace bytes");

    fa_layout bad = l;
    bad.r[3].offset = 64; /* inside a */
    TT_CHECK(!fa_layout_check(&bad, bad.size, why, sizeof why), "an overlap passes the check");
    bad = l;
    bad.r[0].offset = 8;
    TT_CHECK(!fa_layout_check(&bad, bad.size, why, sizeof why), "a misaligned region passes");

    static const size_t huge[][2] = {{SIZE_MAX, 1}, {1, SIZE_MAX}, {SIZE_MAX / 64, 128},
                                     {2, SIZE_MAX / 2}, {1, SIZE_MAX - 10}};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        fa_layout_init(&l, "huge");
        fa_layout_array(&l, 0, "x", 1, 64);
        fa_layout_array(&l, 1, "y", huge[i][0], huge[i][1]);
        TT_CHECK(l.overflow && fa_layout_workspace_bytes(&l) == 0, "%zu x %zu bytes: no overflow seen",
                 huge[i][0], huge[i][1]);
        fa_layout_array(&l, 2, "z", 1, 64);
        TT_CHECK(l.overflow, "overflow forgotten by a later region");
    }
    fa_layout_init(&l, "order");
    fa_layout_array(&l, 1, "skips 0", 1, 64);
    TT_CHECK(l.overflow, "a region added out of order is accepted");
    fa_layout_init(&l, "many");
    for (int i = 0; i <= FA_LAYOUT_MAX_REGIONS; i++) fa_layout_array(&l, i, "r", 1, 64);
    TT_CHECK(l.overflow, "more than FA_LAYOUT_MAX_REGIONS regions accepted");
}

int main(void) {
    builder();
    const fa_kernels *isas[8];
    const int n = tt_isas_dot(isas, 8);
    for (int i = 0; i < n; i++) sweep(isas[i]);
    TT_CHECK(plans > 100, "only %d plans checked", plans);
    return tt_finish("test_layout");
}
