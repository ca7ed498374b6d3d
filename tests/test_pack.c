/*
 * K/V packing (driver/pack.h) against its stated layouts, element by
 * element, on every kernel table: f32 panels of widened keys and values,
 * the bf16 dot-product route's pairs, zeros wherever a layout says zero
 * (keys past seq_k in the last panel, columns past head_dim, the missing
 * partner of an odd last key), the destination filled with NaN first so
 * that nothing left unwritten can pass. Packed in one call and in the
 * driver's way, chunk by chunk.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "driver/pack.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint16_t elem16(const flashattn_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c) {
    return ((const uint16_t *)fa_row_ptr(t, b, s, h))[c];
}

static void nan_fill(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = NAN;
}

/* Keys [0, seq_k) packed by calls over [j0, j1) of `chunk` keys (a
 * multiple of nr), as the forward's packing items do. */
static void pack(const fa_problem *pb, const fa_kernels *kern, int64_t b, int64_t hk, int64_t chunk,
                 int pairs, float *kdst, float *vdst) {
    for (int64_t j0 = 0; j0 < pb->seq_k; j0 += chunk) {
        const int64_t j1 = j0 + chunk < pb->seq_k ? j0 + chunk : pb->seq_k;
        const fa_seq seq = fa_seq_of(pb, b);
        if (pairs) {
            fa_pack_k_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)kdst);
            fa_pack_v_pairs(pb, kern, &seq, hk, j0, j1, (uint32_t *)vdst, NULL);
        } else {
            fa_pack_k(pb, kern, &seq, hk, j0, j1, kdst);
            fa_pack_v(pb, kern, &seq, hk, j0, j1, vdst);
        }
    }
}

static void check_f32(const fa_problem *pb, const fa_kernels *kern, int64_t b, int64_t hk,
                      const float *kp, const float *vp, const char *what) {
    const int64_t d = pb->head_dim, dp = pb->head_dim_pad, sk = pb->seq_k, nr = kern->nr;
    int64_t bad = 0;
    for (int64_t j = 0; j < (sk + nr - 1) / nr * nr; j++)
        for (int64_t c = 0; c < d; c++) {
            const float want = j < sk ? fa_widen_ref(fa_row_ptr(pb->k, b, j, hk), pb->k->dtype, c) : 0.0f;
            bad += bits(kp[j / nr * nr * d + c * nr + j % nr]) != bits(want);
        }
    TT_CHECK(bad == 0, "%s: K panels, %lld elements wrong", what, (long long)bad);
    bad = 0;
    for (int64_t c = 0; c < dp; c += nr) {
        const int64_t w = dp - c < nr ? dp - c : nr;
        for (int64_t j = 0; j < sk; j++)
            for (int64_t x = 0; x < w; x++) {
                const float want = c + x < d ? fa_widen_ref(fa_row_ptr(pb->v, b, j, hk), pb->v->dtype, c + x)
                                             : 0.0f;
                bad += bits(vp[c * sk + j * w + x]) != bits(want);
            }
    }
    TT_CHECK(bad == 0, "%s: V panels, %lld elements wrong", what, (long long)bad);
}

static void check_pairs(const fa_problem *pb, const fa_kernels *kern, int64_t b, int64_t hk,
                        const uint32_t *kp, const uint32_t *vp, const char *what) {
    const int64_t d = pb->head_dim, dp = pb->head_dim_pad, sk = pb->seq_k, nr = kern->nr;
    const int64_t dh = (d + 1) / 2, kh = (sk + 1) / 2;
    int64_t bad = 0;
    for (int64_t j = 0; j < (sk + nr - 1) / nr * nr; j++)
        for (int64_t p = 0; p < dh; p++) {
            uint32_t want = 0;
            if (j < sk)
                want = elem16(pb->k, b, j, hk, 2 * p) |
                       (2 * p + 1 < d ? (uint32_t)elem16(pb->k, b, j, hk, 2 * p + 1) << 16 : 0u);
            bad += kp[j / nr * nr * dh + p * nr + j % nr] != want;
        }
    TT_CHECK(bad == 0, "%s: K pair panels, %lld elements wrong", what, (long long)bad);
    bad = 0;
    for (int64_t c = 0; c < dp; c += nr) {
        const int64_t w = dp - c < nr ? dp - c : nr;
        for (int64_t j = 0; j < sk; j += 2)
            for (int64_t x = 0; x < w; x++) {
                uint32_t want = 0;
                if (c + x < d)
                    want = elem16(pb->v, b, j, hk, c + x) |
                           (j + 1 < sk ? (uint32_t)elem16(pb->v, b, j + 1, hk, c + x) << 16 : 0u);
                bad += vp[c * kh + j / 2 * w + x] != want;
            }
    }
    TT_CHECK(bad == 0, "%s: V pair panels, %lld elements wrong", what, (long long)bad);
}

int main(void) {
    const fa_kernels *isas[8];
    const int n_isas = tt_isas(isas, 8);
    static const int64_t shapes[][2] = {{1, 1}, {5, 3}, {37, 40}, {70, 128}, {33, 256}, {64, 17}};
    static const flashattn_dtype dtypes[] = {FLASHATTN_F32, FLASHATTN_F16, FLASHATTN_BF16};
    uint64_t rng = 12345;
    for (int ii = 0; ii < n_isas; ii++) {
        const fa_kernels *kern = isas[ii];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (size_t di = 0; di < 3; di++)
                for (int64_t pad = 0; pad <= 3; pad += 3) {
                    const int64_t sk = shapes[si][0], d = shapes[si][1], heads = 3, batch = 2;
                    tt_tensor q = tt_alloc(dtypes[di], batch, sk, heads, d, 1, pad);
                    tt_tensor k = tt_alloc(dtypes[di], batch, sk, heads, d, 1, pad);
                    tt_tensor v = tt_alloc(dtypes[di], batch, sk, heads, d, 0, pad);
                    tt_tensor o = tt_alloc(FLASHATTN_F32, batch, sk, heads, d, 1, 0);
                    tt_fill_normal(&k, &rng, 1.0);
                    tt_fill_normal(&v, &rng, 1.0);
                    flashattn_params p = flashattn_params_default();
                    fa_problem pb;
                    if (fa_validate_fwd(&q.t, &k.t, &v.t, &o.t, NULL, &p, &pb) != FLASHATTN_OK) {
                        TT_CHECK(0, "validate failed: %s", flashattn_last_error());
                        continue;
                    }
                    const int64_t nr = kern->nr;
                    const size_t kn = (size_t)((sk + nr - 1) / nr * nr * d);
                    const size_t vn = (size_t)((sk + 1) / 2 * 2 * pb.head_dim_pad);
                    float *kp = malloc(kn * sizeof(float)), *vp = malloc(vn * sizeof(float));
                    for (int pairs = 0; pairs <= (dtypes[di] == FLASHATTN_BF16); pairs++)
                        for (int64_t chunk = nr; chunk <= (sk + nr - 1) / nr * nr; chunk += chunk) {
                            char what[160];
                            snprintf(what, sizeof what, "%s seq_k %lld d %lld dtype %d pad %lld%s chunk %lld",
                                     kern->isa, (long long)sk, (long long)d, (int)dtypes[di],
                                     (long long)pad, pairs ? " pairs" : "", (long long)chunk);
                            const int64_t b = batch - 1, hk = 1;
                            nan_fill(kp, kn);
                            nan_fill(vp, vn);
                            pack(&pb, kern, b, hk, chunk, pairs, kp, vp);
                            if (pairs)
                                check_pairs(&pb, kern, b, hk, (const uint32_t *)kp, (const uint32_t *)vp, what);
                            else
                                check_f32(&pb, kern, b, hk, kp, vp, what);
                        }
                    free(kp), free(vp);
                    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&o);
                }
    }
    return tt_finish("test_pack");
}
