#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/isa.h"
#include "kernels/amx/amx.h"
#include "kernels/avx512bf16/avx512bf16.h"
#include "kernels/ref/ref.h"
#include "plan/fwd_route.h"
#include "reference/attn_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_std_f32.h"
#include "reference/compare.h"
#include "reference/random.h"

int tt_passed, tt_failed;

uint64_t tt_rand_u64(uint64_t *s) { return fa_rand_u64(s); }

double tt_rand_normal(uint64_t *s) { return fa_rand_normal(s); }

tt_tensor tt_alloc(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d, int bshd,
                   int64_t pad) {
    tt_tensor x;
    memset(&x, 0, sizeof x);
    int64_t row = d + pad;
    x.t.dtype = dt;
    x.t.batch = b, x.t.seqlen = s, x.t.heads = h, x.t.head_dim = d;
    x.t.stride_dim = 1;
    if (bshd) {
        x.t.stride_head = row;
        x.t.stride_seq = row * h;
        x.t.stride_batch = row * h * s;
    } else {
        x.t.stride_seq = row;
        x.t.stride_head = row * s;
        x.t.stride_batch = row * s * h;
    }
    size_t es = flashattn_dtype_size(dt);
    x.bytes = (size_t)(b * s * h * row) * es;
    x.mem = malloc(x.bytes ? x.bytes : 1);
    tt_fill_sentinel(x.mem, x.bytes);
    x.t.data = x.mem;
    return x;
}

void tt_free(tt_tensor *x) {
    free(x->mem);
    x->mem = NULL;
}

void tt_fill_normal(tt_tensor *x, uint64_t *state, double sigma) {
    fa_fill_normal(&x->t, state, sigma);
}

void tt_fill_sentinel(void *p, size_t bytes) { memset(p, 0x5a, bytes); }

int tt_untouched(const void *p, size_t bytes) {
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        if (c[i] != 0x5a) return 0;
    return 1;
}

double tt_max_abs_err(const tt_tensor *x, const double *ref) { return fa_max_abs_err(&x->t, ref); }

int tt_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tt_passed, tt_failed);
    return tt_failed ? 1 : 0;
}

/* Equal apart from the isa name and the bf16 tile. */
static int same_but_bf16(const fa_kernels *a, const fa_kernels *b) {
    fa_kernels x, y; /* memcpy: padding bytes too, for memcmp */
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    x.isa = y.isa = NULL;
    x.cpu_supported = y.cpu_supported = NULL;
    x.bf16_dot = y.bf16_dot = 0;
    x.gemm_bf16 = y.gemm_bf16 = NULL;
    x.gemm_bf16_done = y.gemm_bf16_done = NULL;
    x.gemm_i8 = y.gemm_i8 = NULL; /* the amx table's AMX-INT8 one: test_kernels and test_int8_qk run it */
    x.gemm_i8_way = y.gemm_i8_way = NULL;
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Paths whose tables equal an earlier path's but for gemm_bf16 (avx512bf16
 * and amx are the avx512 table with another bf16 tile) are left out unless
 * with_bf16: gemm_bf16 is the one entry they add, and only the bf16 dot
 * route reaches it, so f32 and f16 cases there would run the same kernels
 * again (tt_isas_dot lists them for the bf16 cases). */
static int isas(const fa_kernels *out[], int max, int with_bf16) {
    const char *names[8], *only = getenv("FLASHATTN_TEST_ISA");
    int n = fa_available_isas(names, 8);
    int k = 0;
    for (int i = 0; i < n && k < max; i++) {
        if (only && *only && strcmp(only, names[i]) != 0) continue;
        const fa_kernels *t = fa_kernels_by_name(names[i]);
        int dup = 0;
        for (int j = 0; j < k && !with_bf16; j++) dup |= same_but_bf16(t, out[j]);
        if (!dup) out[k++] = t;
    }
    return k;
}

int tt_isas(const fa_kernels *out[], int max) { return isas(out, max, 0); }

int tt_quick(void) {
    const char *q = getenv("FLASHATTN_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

void tt_standard_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                     const flashattn_tensor *v, const flashattn_params *p,
                     flashattn_dtype out_dtype, double *out) {
    fa_reference_std_f32(q, k, v, p, out_dtype, out);
}

double tt_fwd_bound(flashattn_dtype dt, const flashattn_tensor *q, const flashattn_tensor *k,
                    const flashattn_tensor *v, const flashattn_params *p, const double *ref, size_t n) {
    if (dt == FLASHATTN_F32) return 1e-5;
    double *std = malloc((n ? n : 1) * sizeof(double)), e = 0.0;
    tt_standard_f32(q, k, v, p, dt, std);
    for (size_t x = 0; x < n; x++) e = fmax(e, fabs(std[x] - ref[x]));
    free(std);
    return 2.0 * e;
}

int tt_grad_pass(const flashattn_tensor *got, const double *ref, const double *plain, size_t n, double mag,
                 tt_grad_errs *r) {
    double perr = 0.0;
    for (size_t e = 0; e < n; e++) perr = fmax(perr, fabs(plain[e] - ref[e]));
    const fa_bwd_bounds bd = fa_bwd_pass_bounds(got->dtype, perr, fa_rms_diff(plain, ref, n), mag);
    r->max = fa_max_abs_err(got, ref), r->rms = fa_rms_err(got, ref);
    r->max_bound = bd.max_bound, r->rms_bound = bd.rms_bound;
    return r->max <= r->max_bound && r->rms <= r->rms_bound;
}

int tt_fwd_as_decode(int64_t seq_q, int64_t seq_k, int64_t heads_q, int64_t heads_kv) {
    return fa_fwd_few_rows(seq_q, seq_k, heads_kv > 0 ? heads_q / heads_kv : 1);
}

int tt_bf16_state_left(const fa_kernels *kern) {
    int left = 0;
#if defined(FA_HAVE_AVX512) && defined(FA_TEST_BF16_EMULATED)
    if (kern->gemm_bf16_done != fa_gemm_bf16_amx_emulated_done) return 0;
    /* libgomp keeps its pool's threads, so these are the threads that ran
     * the call's work items (as many as the call used, or more) */
#pragma omp parallel reduction(| : left)
    left |= fa_gemm_bf16_amx_emulated_loaded();
#else
    (void)kern;
#endif
    return left;
}

int tt_isas_dot(const fa_kernels *out[], int max) {
    static fa_kernels scalar_dot, avx512_dot, amx_dot;
    int k = isas(out, max, 1);
    scalar_dot = fa_kernels_scalar;
    scalar_dot.isa = "scalar+bf16ref";
    scalar_dot.gemm_bf16 = fa_gemm_bf16_ref;
    scalar_dot.bf16_dot = 1;
    if (k < max) out[k++] = &scalar_dot;
#if defined(FA_HAVE_AVX512) && defined(FA_TEST_BF16_EMULATED)
    if (fa_kernels_by_name("avx512") && k < max) {
        avx512_dot = fa_kernels_avx512;
        avx512_dot.isa = "avx512+bf16emul";
        avx512_dot.gemm_bf16 = fa_gemm_bf16_emulated;
        avx512_dot.bf16_dot = 1;
        out[k++] = &avx512_dot;
    }
    if (fa_kernels_by_name("avx512") && k < max) {
        amx_dot = fa_kernels_avx512;
        amx_dot.isa = "avx512+amxemul";
        amx_dot.gemm_bf16 = fa_gemm_bf16_amx_emulated;
        amx_dot.bf16_dot = 1;
        amx_dot.gemm_bf16_done = fa_gemm_bf16_amx_emulated_done;
        amx_dot.gemm_i8 = fa_gemm_i8_amx_emulated;
        amx_dot.gemm_u8 = fa_gemm_u8_amx_emulated;
        out[k++] = &amx_dot;
    }
#else
    (void)avx512_dot, (void)amx_dot;
#endif
    return k;
}
