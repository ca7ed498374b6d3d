/*
 * Standard attention on cblas_sgemm: per head, S = Q K^T (one GEMM), the
 * softmax on the library's row kernels (OpenMP over rows), O = P V (one
 * GEMM), O's rows scaled by 1/rowsum. See standard.h.
 */
#include "baseline/standard.h"

#include "core/status.h"

#ifdef FA_HAVE_CBLAS
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "core/size.h"
#include "core/threads.h"
#include "driver/pack.h"

/* BLAS reads a matrix with one int row stride: rows of a head must not
 * overlap, and every size must fit an int. */
static int blas_rows_ok(const flashattn_tensor *t) {
    return t->seqlen <= INT_MAX && t->stride_seq <= INT_MAX &&
           (t->seqlen <= 1 || t->stride_seq >= t->head_dim);
}

static int blas_ld(const flashattn_tensor *t) {
    return (int)(t->seqlen <= 1 ? t->head_dim : t->stride_seq);
}

static flashattn_status prepare(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_tensor *o,
                                const flashattn_params *user, fa_problem *pb, int *threads,
                                size_t *bytes) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_fwd(q, k, v, o, NULL, &p, pb))) return s;
    if (pb->head_dim_v != pb->head_dim)
        return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "the CBLAS baseline: v's head_dim must be q's");
    if (q->dtype != FLASHATTN_F32 || k->dtype != FLASHATTN_F32 || v->dtype != FLASHATTN_F32 ||
        o->dtype != FLASHATTN_F32)
        return fa_fail(FLASHATTN_ERR_BAD_DTYPE, "the CBLAS baseline runs on f32 tensors only");
    if (!blas_rows_ok(q) || !blas_rows_ok(k) || !blas_rows_ok(v) || !blas_rows_ok(o))
        return fa_fail(FLASHATTN_ERR_BAD_STRIDE,
                       "the CBLAS baseline needs stride_seq >= head_dim and int-sized rows");
    *threads = fa_threads_or_default(p.num_threads);
    size_t n;
    if (!fa_mul_size((size_t)pb->seq_q, (size_t)pb->seq_k, &n) || n > INT_MAX ||
        !fa_add_size(n, (size_t)pb->seq_q + 16, &n) || !fa_mul_size(n, sizeof(float), &n) ||
        !fa_add_size(n, 64, bytes))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "CBLAS baseline: S size overflows");
    return FLASHATTN_OK;
}

flashattn_status fa_standard_cblas_workspace_size(const flashattn_tensor *q,
                                                  const flashattn_tensor *k,
                                                  const flashattn_tensor *v,
                                                  const flashattn_tensor *o,
                                                  const flashattn_params *p, size_t *workspace_bytes) {
    fa_problem pb;
    int threads;
    if (!workspace_bytes) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "workspace_bytes is NULL");
    return prepare(q, k, v, o, p, &pb, &threads, workspace_bytes);
}

/* The GEMM computed every score: zero the hidden ones, softmax the rest. */
static void softmax_rows(const fa_problem *pb, const fa_kernels *kern, float *s, float *rinv,
                         int threads) {
    const int64_t sk = pb->seq_k;
    const fa_mask mask = fa_seq_of(pb, 0).mask;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < pb->seq_q; i++) {
        float *row = s + i * sk;
        int64_t lo = fa_mask_lo(&mask, i), end = fa_mask_end(&mask, i);
        if (lo > sk) lo = sk;
        if (end < lo) end = lo;
        memset(row, 0, (size_t)lo * sizeof(float));
        memset(row + end, 0, (size_t)(sk - end) * sizeof(float));
        if (end == lo) {
            rinv[i] = 0.0f; /* the row sees no key: O = 0 */
            continue;
        }
        const float mx = kern->row_max(row + lo, end - lo);
        rinv[i] = 1.0f / kern->exp2_sum(row + lo, end - lo, mx);
    }
}

static void scale_rows(const fa_problem *pb, const fa_kernels *kern, float *o, int ldo,
                       const float *rinv, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < pb->seq_q; i++)
        kern->scale(o + i * (int64_t)ldo, pb->head_dim, rinv[i]);
}

flashattn_status fa_standard_cblas_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                       const flashattn_tensor *v, const flashattn_tensor *o,
                                       const flashattn_params *p, const fa_kernels *kern,
                                       void *workspace, size_t workspace_bytes) {
    fa_problem pb;
    int threads = 1;
    size_t need = 0;
    flashattn_status s;
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = prepare(q, k, v, o, p, &pb, &threads, &need))) return s;
    if (pb.batch == 0 || pb.seq_q == 0 || pb.heads_q == 0) return FLASHATTN_OK;
    void *owned = NULL;
    if (!workspace) {
        workspace = owned = malloc(need);
        if (!owned) return fa_fail(FLASHATTN_ERR_OUT_OF_MEMORY, "CBLAS baseline: %zu bytes", need);
    } else if (workspace_bytes < need) {
        return fa_fail(FLASHATTN_ERR_WORKSPACE_TOO_SMALL, "workspace has %zu bytes, needs %zu",
                       workspace_bytes, need);
    }
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(threads);
#endif
    float *sm = (float *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    float *rinv = sm + (size_t)pb.seq_q * (size_t)pb.seq_k;
    const int sq = (int)pb.seq_q, sk = (int)pb.seq_k, d = (int)pb.head_dim;
    for (int64_t b = 0; b < pb.batch; b++)
        for (int64_t h = 0; h < pb.heads_q; h++) {
            float *ob = (float *)fa_row_ptr(o, b, 0, h);
            const int ldo = blas_ld(o);
            if (sk == 0) {
                for (int i = 0; i < sq; i++) memset(ob + (int64_t)i * ldo, 0, (size_t)d * 4);
                continue;
            }
            const int64_t hk = h / pb.group;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sq, sk, d, pb.scale_log2,
                        (const float *)fa_row_ptr(q, b, 0, h), blas_ld(q),
                        (const float *)fa_row_ptr(k, b, 0, hk), blas_ld(k), 0.0f, sm, sk);
            softmax_rows(&pb, kern, sm, rinv, threads);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sq, d, sk, 1.0f, sm, sk,
                        (const float *)fa_row_ptr(v, b, 0, hk), blas_ld(v), 0.0f, ob, ldo);
            scale_rows(&pb, kern, ob, ldo, rinv, threads);
        }
    free(owned);
    return FLASHATTN_OK;
}

const char *fa_standard_cblas_name(void) {
#ifdef OPENBLAS_VERSION
    return openblas_get_config();
#else
    return "CBLAS (not OpenBLAS: likely the unoptimised reference BLAS)";
#endif
}

#else /* no CBLAS in this build */

flashattn_status fa_standard_cblas_workspace_size(const flashattn_tensor *q,
                                                  const flashattn_tensor *k,
                                                  const flashattn_tensor *v,
                                                  const flashattn_tensor *o,
                                                  const flashattn_params *p, size_t *workspace_bytes) {
    return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "this build found no CBLAS");
}

flashattn_status fa_standard_cblas_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                       const flashattn_tensor *v, const flashattn_tensor *o,
                                       const flashattn_params *p, const fa_kernels *kern,
                                       void *workspace, size_t workspace_bytes) {
    return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "this build found no CBLAS");
}

const char *fa_standard_cblas_name(void) { return NULL; }

#endif
