/*
 * Standard attention on the library's kernels: three phases per pass of
 * heads (pack, S = Q K^T, softmax, O = P V), each an OpenMP loop over
 * (head, row block), separated by the loops' barriers. See standard.h.
 */
#include "baseline/standard.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "core/size.h"
#include "core/status.h"
#include "core/threads.h"
#include "driver/pack.h"

#define STD_ALIGN 16      /* floats: 64-byte alignment of every region */
#define STD_BLOCK_M 64    /* rows per work item, before shrinking for threads */
#define STD_KC 256        /* keys per P.V step: P and V slices stay in L2 */
#define STD_PACK_CHUNK 512
#define STD_IN_PLACE_ROWS 24 /* query rows per kv-head up to which K, V are read in place
                                (all within the forward's few-rows rule, plan/fwd_route.h) */

typedef struct {
    int threads, block_m;
    int in_place;           /* K and V read where they lie, not packed (few query rows) */
    int64_t ld_s;           /* row stride of S: seq_k rounded up to FA_COL_ALIGN */
    int64_t heads_per_pass; /* query heads whose S is held at once */
    int64_t group_slots;    /* kv-heads packed at once (those of one pass) */
    size_t s_floats;        /* one head's S */
    size_t kpack_floats, vpack_floats, rinv_floats, thread_floats;
    size_t workspace_bytes;
} std_plan;

static flashattn_status plan_standard(const fa_problem *pb, const flashattn_params *p,
                                      const fa_kernels *kern, std_plan *sp) {
    sp->threads = fa_threads_or_default(p->num_threads);
    const size_t d = (size_t)pb->head_dim, dp = (size_t)pb->head_dim_pad;
    const size_t nr = (size_t)kern->nr, sq = (size_t)pb->seq_q, sk = (size_t)pb->seq_k;
    const int64_t heads = pb->batch * pb->heads_q;
    sp->ld_s = (int64_t)fa_round_up(sk, FA_COL_ALIGN);
    /* For few query rows the forward reads K and V in place (decode's
     * driver: plan/fwd_route.h), and so does this baseline where that is
     * its faster choice: S = Q K^T on gemm_nt from the K rows, P V on
     * gemm_rows from the V rows (up to STD_IN_PLACE_ROWS rows a kv-head, where
     * that measured faster than packing: docs/performance.md). */
    sp->in_place = pb->seq_q * pb->group <= STD_IN_PLACE_ROWS;
    size_t s_bytes, kf, vf;
    if (!fa_mul_size(sq, (size_t)sp->ld_s, &sp->s_floats) ||
        !fa_mul_size(sp->s_floats, sizeof(float), &s_bytes) ||
        !fa_mul_size(fa_round_up(sk, nr), d, &kf) || !fa_mul_size(sk, dp, &vf))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "standard attention: S size overflows");
    sp->s_floats = fa_round_up(sp->s_floats, STD_ALIGN);
    sp->kpack_floats = sp->in_place ? 0 : fa_round_up(kf, STD_ALIGN);
    sp->vpack_floats = sp->in_place ? 0 : fa_round_up(vf, STD_ALIGN);
    sp->rinv_floats = fa_round_up(sq, STD_ALIGN);

    int64_t hp = s_bytes ? (int64_t)(FA_STD_PASS_BYTES / s_bytes) : heads;
    if (hp > heads) hp = heads;
    if (hp < 1) hp = 1;
    sp->heads_per_pass = hp;
    /* A run of hp consecutive query heads touches at most this many kv-heads. */
    int64_t slots = (hp - 1) / pb->group + 2;
    if (slots > hp) slots = hp;
    sp->group_slots = slots;

    int bm = STD_BLOCK_M / kern->mr * kern->mr;
    while (bm > kern->mr && hp * (((int64_t)sq + bm - 1) / bm) < 4 * (int64_t)sp->threads)
        bm -= kern->mr;
    sp->block_m = bm;
    sp->thread_floats = fa_round_up((size_t)bm * d, STD_ALIGN) + fa_round_up((size_t)bm * dp, STD_ALIGN);

    size_t per_pass, total = 0, part;
    if (!fa_add_size(sp->s_floats, sp->rinv_floats, &per_pass) ||
        !fa_mul_size(per_pass, (size_t)hp, &total) ||
        !fa_mul_size(sp->kpack_floats + sp->vpack_floats, (size_t)slots, &part) ||
        !fa_add_size(total, part, &total) ||
        !fa_mul_size(sp->thread_floats, (size_t)sp->threads, &part) ||
        !fa_add_size(total, part, &total) || !fa_mul_size(total, sizeof(float), &total) ||
        !fa_add_size(total, 64, &total))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "standard attention: workspace size overflows");
    sp->workspace_bytes = total;
    return FLASHATTN_OK;
}

static flashattn_status prepare(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_tensor *o,
                                const flashattn_params *user, const fa_kernels *kern,
                                fa_problem *pb, std_plan *sp) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_fwd(q, k, v, o, NULL, &p, pb))) return s;
    if (pb->head_dim_v != pb->head_dim)
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "standard attention: v's head_dim must be q's");
    return plan_standard(pb, &p, kern, sp);
}

flashattn_status fa_standard_workspace_size(const flashattn_tensor *q, const flashattn_tensor *k,
                                            const flashattn_tensor *v, const flashattn_tensor *o,
                                            const flashattn_params *p, const fa_kernels *kern,
                                            size_t *workspace_bytes) {
    fa_problem pb;
    std_plan sp = {0};
    if (!workspace_bytes) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "workspace_bytes is NULL");
    flashattn_status s = prepare(q, k, v, o, p, kern, &pb, &sp);
    if (!s) *workspace_bytes = sp.workspace_bytes;
    return s;
}

/* Buffers of one pass, all slices of the workspace. */
typedef struct {
    float *s, *rinv, *packs, *threads;
    int64_t h0, h1; /* query heads [h0, h1) in (batch, head) order */
} std_pass;

/* Keys [lo, end) seen by some row of [i0, i1): both bounds grow with the
 * row, so the union is the first row's lo to the last row's end. An empty
 * range comes back as lo == end <= seq_k. */
static void block_keys(const fa_problem *pb, int64_t i0, int64_t i1, int64_t *lo, int64_t *end) {
    const fa_mask m = fa_seq_of(pb, 0).mask;
    *lo = fa_mask_lo(&m, i0);
    *end = fa_mask_end(&m, i1 - 1);
    if (*lo > *end) *lo = *end;
}

/* S[i0..i1) = (Q scale log2 e) K^T over the panels the block can see. */
static void phase_scores(const fa_problem *pb, const std_plan *sp, const fa_kernels *kern,
                         const std_pass *ps, int64_t hh, int64_t i0, int64_t i1, float *tw) {
    const int64_t d = pb->head_dim, nr = kern->nr, mr = kern->mr;
    const int64_t b = hh / pb->heads_q, h = hh % pb->heads_q;
    const int m = (int)(i1 - i0);
    const float *kp = ps->packs + (size_t)(hh / pb->group - ps->h0 / pb->group) *
                                      (sp->kpack_floats + sp->vpack_floats);
    float *s = ps->s + (size_t)(hh - ps->h0) * sp->s_floats + (size_t)i0 * (size_t)sp->ld_s;
    int64_t lo, end;
    block_keys(pb, i0, i1, &lo, &end);
    for (int r = 0; r < m; r++)
        kern->load(tw + r * d, fa_row_ptr(pb->q, b, i0 + r, h), pb->q->dtype, d, pb->scale_log2);
    if (sp->in_place) {
        if (end > lo)
            kern->gemm_nt(m, (int)(end - lo), d, tw, d, fa_row_ptr(pb->k, b, lo, h / pb->group),
                          pb->k->dtype, pb->k->stride_seq, s + lo, sp->ld_s, 0);
        return;
    }
    for (int64_t c = lo / nr * nr; c < end; c += nr) {
        const int n = (int)(sp->ld_s - c < nr ? sp->ld_s - c : nr);
        for (int r = 0; r < m; r += (int)mr)
            kern->gemm(m - r < mr ? m - r : (int)mr, n, d, tw + r * d, d, kp + c * d, nr,
                       s + r * sp->ld_s + c, sp->ld_s, 0);
    }
}

/* P = 2^(S - rowmax) over each row's visible keys, 0 on the rest of the
 * block's key range (so P.V may run over that range); rinv = 1/rowsum. */
static void phase_softmax(const fa_problem *pb, const std_plan *sp, const fa_kernels *kern,
                          const std_pass *ps, int64_t hh, int64_t i0, int64_t i1) {
    float *s = ps->s + (size_t)(hh - ps->h0) * sp->s_floats;
    float *rinv = ps->rinv + (size_t)(hh - ps->h0) * sp->rinv_floats;
    int64_t blo, bend;
    block_keys(pb, i0, i1, &blo, &bend);
    const fa_mask mask = fa_seq_of(pb, 0).mask;
    for (int64_t i = i0; i < i1; i++) {
        float *row = s + i * sp->ld_s;
        int64_t lo = fa_mask_lo(&mask, i), end = fa_mask_end(&mask, i);
        if (lo > bend) lo = bend; /* a window can start past the last key */
        if (end < lo) end = lo;
        memset(row + blo, 0, (size_t)(lo - blo) * sizeof(float));
        memset(row + end, 0, (size_t)(bend - end) * sizeof(float));
        if (end == lo) {
            rinv[i] = 0.0f; /* the row sees no key: O = 0 */
            continue;
        }
        const float mx = kern->row_max(row + lo, end - lo);
        rinv[i] = 1.0f / kern->exp2_sum(row + lo, end - lo, mx);
    }
}

/* O[i0..i1) = rinv * (P V), P.V over the block's key range in STD_KC steps. */
static void phase_output(const fa_problem *pb, const std_plan *sp, const fa_kernels *kern,
                         const std_pass *ps, int64_t hh, int64_t i0, int64_t i1, float *tw) {
    const int64_t dp = pb->head_dim_pad, nr = kern->nr, mr = kern->mr;
    const int64_t b = hh / pb->heads_q, h = hh % pb->heads_q;
    const int m = (int)(i1 - i0);
    const float *vp = ps->packs +
                      (size_t)(hh / pb->group - ps->h0 / pb->group) *
                          (sp->kpack_floats + sp->vpack_floats) +
                      sp->kpack_floats;
    const float *p = ps->s + (size_t)(hh - ps->h0) * sp->s_floats + (size_t)i0 * (size_t)sp->ld_s;
    const float *rinv = ps->rinv + (size_t)(hh - ps->h0) * sp->rinv_floats + i0;
    float *acc = tw + fa_round_up((size_t)sp->block_m * (size_t)pb->head_dim, STD_ALIGN);
    int64_t lo, end;
    block_keys(pb, i0, i1, &lo, &end);
    if (end == lo) memset(acc, 0, (size_t)(m * dp) * sizeof(float));
    for (int64_t k0 = lo; k0 < end; k0 += STD_KC) {
        const int64_t kn = end - k0 < STD_KC ? end - k0 : STD_KC;
        if (sp->in_place) {
            kern->gemm_rows(m, (int)pb->head_dim, kn, p + k0, sp->ld_s,
                            fa_row_ptr(pb->v, b, k0, h / pb->group), pb->v->dtype,
                            pb->v->stride_seq, acc, dp, k0 > lo, 0);
            continue;
        }
        for (int64_t c = 0; c < dp; c += nr) {
            const int n = (int)(dp - c < nr ? dp - c : nr);
            for (int r = 0; r < m; r += (int)mr)
                kern->gemm(m - r < mr ? m - r : (int)mr, n, kn, p + r * sp->ld_s + k0, sp->ld_s,
                           vp + c * pb->seq_k + k0 * n, n, acc + r * dp + c, dp, k0 > lo);
        }
    }
    for (int r = 0; r < m; r++)
        kern->store((void *)fa_row_ptr(pb->o, b, i0 + r, h), pb->o->dtype, acc + r * dp,
                    pb->head_dim, rinv[r]);
}

static void run_standard(const fa_problem *pb, const std_plan *sp, const fa_kernels *kern,
                         void *ws) {
    float *base = (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const int64_t heads = pb->batch * pb->heads_q, hp = sp->heads_per_pass;
    const int64_t bm = sp->block_m, rblocks = (pb->seq_q + bm - 1) / bm;
    const int64_t chunk = (STD_PACK_CHUNK + kern->nr - 1) / kern->nr * kern->nr;
    const int64_t nchunks = (pb->seq_k + chunk - 1) / chunk;
    std_pass ps;
    ps.s = base;
    ps.rinv = ps.s + sp->s_floats * (size_t)hp;
    ps.packs = ps.rinv + sp->rinv_floats * (size_t)hp;
    ps.threads = ps.packs + (sp->kpack_floats + sp->vpack_floats) * (size_t)sp->group_slots;

#pragma omp parallel num_threads(sp->threads) firstprivate(ps)
    {
        float *tw = ps.threads + sp->thread_floats * (size_t)fa_thread_id();
        for (ps.h0 = 0; ps.h0 < heads; ps.h0 += hp) {
            ps.h1 = ps.h0 + hp < heads ? ps.h0 + hp : heads;
            const int64_t g0 = ps.h0 / pb->group, ng = (ps.h1 - 1) / pb->group - g0 + 1;
            const int64_t nh = ps.h1 - ps.h0;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < (sp->in_place ? 0 : ng * nchunks); it++) {
                const int64_t g = g0 + it / nchunks, j0 = it % nchunks * chunk;
                const int64_t j1 = j0 + chunk < pb->seq_k ? j0 + chunk : pb->seq_k;
                float *kp = ps.packs + (size_t)(g - g0) * (sp->kpack_floats + sp->vpack_floats);
                const fa_seq seq = fa_seq_of(pb, g / pb->heads_kv);
                fa_pack_k(pb, kern, &seq, g % pb->heads_kv, j0, j1, kp);
                fa_pack_v(pb, kern, &seq, g % pb->heads_kv, j0, j1, kp + sp->kpack_floats);
            }
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < nh * rblocks; it++) {
                const int64_t i0 = it % rblocks * bm, i1 = i0 + bm < pb->seq_q ? i0 + bm : pb->seq_q;
                phase_scores(pb, sp, kern, &ps, ps.h0 + it / rblocks, i0, i1, tw);
            }
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < nh * rblocks; it++) {
                const int64_t i0 = it % rblocks * bm, i1 = i0 + bm < pb->seq_q ? i0 + bm : pb->seq_q;
                phase_softmax(pb, sp, kern, &ps, ps.h0 + it / rblocks, i0, i1);
            }
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < nh * rblocks; it++) {
                const int64_t i0 = it % rblocks * bm, i1 = i0 + bm < pb->seq_q ? i0 + bm : pb->seq_q;
                phase_output(pb, sp, kern, &ps, ps.h0 + it / rblocks, i0, i1, tw);
            }
        }
    }
}

flashattn_status fa_standard_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 const flashattn_params *p, const fa_kernels *kern,
                                 void *workspace, size_t workspace_bytes) {
    fa_problem pb;
    std_plan sp = {0};
    flashattn_status s = prepare(q, k, v, o, p, kern, &pb, &sp);
    if (s) return s;
    if (pb.batch == 0 || pb.seq_q == 0 || pb.heads_q == 0) return FLASHATTN_OK;
    void *owned = NULL;
    if (!workspace) {
        workspace = owned = malloc(sp.workspace_bytes);
        if (!owned)
            return fa_fail(FLASHATTN_ERR_OUT_OF_MEMORY, "standard attention: %zu bytes",
                           sp.workspace_bytes);
    } else if (workspace_bytes < sp.workspace_bytes) {
        return fa_fail(FLASHATTN_ERR_WORKSPACE_TOO_SMALL, "workspace has %zu bytes, needs %zu",
                       workspace_bytes, sp.workspace_bytes);
    }
    run_standard(&pb, &sp, kern, workspace);
    free(owned);
    return FLASHATTN_OK;
}
