#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/isa.h"
#include "kernels/ref/half.h"
#include "reference/attn_f64.h"

int tt_passed, tt_failed;

uint64_t tt_rand_u64(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tt_rand_normal(uint64_t *s) {
    double u1 = ((double)(tt_rand_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(tt_rand_u64(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

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
    size_t es = dt == FLASHATTN_F32 ? 4 : 2;
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

static void set_elem(tt_tensor *x, int64_t off, double v) {
    switch (x->t.dtype) {
    case FLASHATTN_F32: ((float *)x->mem)[off] = (float)v; break;
    case FLASHATTN_F16: ((uint16_t *)x->mem)[off] = fa_f32_to_f16((float)v); break;
    case FLASHATTN_BF16: ((uint16_t *)x->mem)[off] = fa_f32_to_bf16((float)v); break;
    default: break;
    }
}

void tt_fill_normal(tt_tensor *x, uint64_t *state, double sigma) {
    const flashattn_tensor *t = &x->t;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++)
                    set_elem(x, b * t->stride_batch + s * t->stride_seq + h * t->stride_head + c,
                             sigma * tt_rand_normal(state));
}

void tt_fill_sentinel(void *p, size_t bytes) { memset(p, 0x5a, bytes); }

int tt_untouched(const void *p, size_t bytes) {
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        if (c[i] != 0x5a) return 0;
    return 1;
}

double tt_max_abs_err(const tt_tensor *x, const double *ref) {
    const flashattn_tensor *t = &x->t;
    double err = 0.0;
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++) {
                    double got = fa_tensor_get(t, b, s, h, c);
                    double want = ref[((b * t->seqlen + s) * t->heads + h) * t->head_dim + c];
                    double e = fabs(got - want);
                    if (!(e <= err)) err = e; /* NaN propagates as the max */
                }
    return err;
}

int tt_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tt_passed, tt_failed);
    return tt_failed ? 1 : 0;
}

int tt_isas(const fa_kernels *out[], int max) {
    const char *names[8];
    int n = fa_available_isas(names, 8);
    int k = 0;
    for (int i = 0; i < n && k < max; i++) out[k++] = fa_kernels_by_name(names[i]);
    return k;
}

void tt_standard_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                     const flashattn_tensor *v, const flashattn_params *p,
                     flashattn_dtype out_dtype, double *out) {
    /* Reuse the reference's masking rules through a fresh validation. */
    const int64_t B = q->batch, Sq = q->seqlen, Sk = k->seqlen, Hq = q->heads, D = q->head_dim;
    const int64_t group = Hq / k->heads;
    const float scale = p && p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)D);
    const int64_t diag = (!p || p->align == FLASHATTN_ALIGN_BOTTOM_RIGHT) ? Sk - Sq : 0;
    int64_t left = p ? p->window_left : -1, right = p ? p->window_right : -1;
    if (p && p->causal && right != 0) right = 0;
    float *s = malloc((size_t)(Sk > 0 ? Sk : 1) * sizeof(float));
    float *o = malloc((size_t)D * sizeof(float));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                int64_t lo = left < 0 ? 0 : i + diag - left, end = right < 0 ? Sk : i + diag + right + 1;
                if (lo < 0) lo = 0;
                if (end > Sk) end = Sk;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = lo; j < end; j++) {
                    float acc = 0.0f;
                    for (int64_t c = 0; c < D; c++)
                        acc += (float)fa_tensor_get(q, b, i, h, c) * (float)fa_tensor_get(k, b, j, h / group, c);
                    s[j] = acc * scale;
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t c = 0; c < D; c++) o[c] = 0.0f;
                for (int64_t j = lo; j < end; j++) {
                    s[j] = expf(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t j = lo; j < end; j++)
                    for (int64_t c = 0; c < D; c++) o[c] += s[j] / sum * (float)fa_tensor_get(v, b, j, h / group, c);
                double *orow = out + ((b * Sq + i) * Hq + h) * D;
                for (int64_t c = 0; c < D; c++) {
                    float r = o[c];
                    if (out_dtype == FLASHATTN_F16) r = fa_f16_to_f32(fa_f32_to_f16(r));
                    if (out_dtype == FLASHATTN_BF16) r = fa_bf16_to_f32(fa_f32_to_bf16(r));
                    orow[c] = r;
                }
            }
    free(s);
    free(o);
}
