/*
 * One head at seq 65536: the workspace the library asks for is O(seq), far
 * below the seq^2 floats standard attention needs, and the call runs (with
 * a sliding window, so the run stays short; its workspace is O(seq) too) and
 * matches the FP64 reference on sampled rows.
 */
#include <math.h>
#include <stdlib.h>

#include "reference/attn_f64.h"
#include "testutil.h"

int main(void) {
    const int64_t S = 65536, D = 64;
    uint64_t rng = 5;
    tt_tensor q = tt_alloc(FLASHATTN_F32, 1, S, 1, D, 1, 0);
    tt_tensor k = tt_alloc(FLASHATTN_F32, 1, S, 1, D, 1, 0);
    tt_tensor v = tt_alloc(FLASHATTN_F32, 1, S, 1, D, 1, 0);
    tt_tensor o = tt_alloc(FLASHATTN_F32, 1, S, 1, D, 1, 0);
    tt_fill_normal(&q, &rng, 1.0), tt_fill_normal(&k, &rng, 1.0), tt_fill_normal(&v, &rng, 1.0);
    float *lse = malloc((size_t)S * sizeof(float));

    flashattn_params full = flashattn_params_default();
    size_t ws_full = 0;
    TT_CHECK(flashattn_fwd_workspace_size(&q.t, &k.t, &v.t, &o.t, lse, &full, &ws_full) == 0, "query");
    const double s2 = (double)S * (double)S * 4.0;
    printf("seq %lld: workspace %.1f MiB, standard attention's S matrix %.1f MiB (%.5f of it)\n",
           (long long)S, ws_full / 1048576.0, s2 / 1048576.0, ws_full / s2);
    /* O(seq): packed K and V (2 * S * D floats) plus per-thread tiles */
    TT_CHECK(ws_full < (size_t)(4 * S * D * sizeof(float)) + ((size_t)16 << 20),
             "workspace %zu is not O(seq)", ws_full);
    TT_CHECK(ws_full < s2 / 100.0, "workspace %zu not far below seq^2*4", ws_full);

    flashattn_params win = full;
    win.causal = 1;
    win.window_left = 64;
    size_t ws_win = 0;
    TT_CHECK(flashattn_fwd_workspace_size(&q.t, &k.t, &v.t, &o.t, lse, &win, &ws_win) == 0, "query");
    /* the mask may change the tiles (tile_rule.c), never the order of the size */
    TT_CHECK(ws_win < (size_t)(4 * S * D * sizeof(float)) + ((size_t)16 << 20),
             "windowed workspace %zu is not O(seq)", ws_win);
    flashattn_status s = flashattn_fwd(&q.t, &k.t, &v.t, &o.t, lse, &win, NULL, 0);
    TT_CHECK(s == FLASHATTN_OK, "run: %s", flashattn_last_error());

    /* sampled rows against the reference, computed on views of the inputs */
    static const int64_t rows[] = {0, 1, 63, 64, 65, 4095, 40000, 65535};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        int64_t i = rows[r], j0 = i >= 64 ? i - 64 : 0;
        flashattn_tensor qv = q.t, kv = k.t, vv = v.t;
        qv.data = (float *)q.mem + i * D, qv.seqlen = 1;
        kv.data = (float *)k.mem + j0 * D, kv.seqlen = i - j0 + 1;
        vv.data = (float *)v.mem + j0 * D, vv.seqlen = i - j0 + 1;
        double ref[64], ref_lse;
        flashattn_params p = flashattn_params_default(); /* row i sees keys j0..i: no mask on the view */
        TT_CHECK(fa_reference_fwd_f64(&qv, &kv, &vv, &p, ref, &ref_lse) == 0, "reference");
        double err = fabs(lse[i] - ref_lse);
        for (int64_t c = 0; c < D; c++) err = fmax(err, fabs(((float *)o.mem)[i * D + c] - ref[c]));
        TT_CHECK(err <= 1e-5, "row %lld: err %.3g", (long long)i, err);
    }
    free(lse);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&o);
    return tt_finish("test_long_seq");
}
