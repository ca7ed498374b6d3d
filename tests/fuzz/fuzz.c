#include "fuzz.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/quant.h"
#include "reference/random.h"

unsigned fz_byte(fz_in *in) { return in->at < in->n ? in->p[in->at++] : 0u; }

unsigned fz_below(fz_in *in, unsigned n) {
    unsigned v = fz_byte(in);
    if (n > 256) v = v << 8 | fz_byte(in);
    return v % n;
}

int64_t fz_pick(fz_in *in, const int64_t *from, unsigned n) { return from[fz_below(in, n)]; }

int fz_chance(fz_in *in, unsigned one_in) { return fz_below(in, one_in) == one_in - 1; }

void fz_fail(const char *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nfuzz: property broken: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n  call: %s\n  library: %s\n", ctx, flashattn_last_error());
    va_end(ap);
    abort();
}

int64_t fz_extent(const flashattn_tensor *t) {
    const int64_t size[4] = {t->batch, t->seqlen, t->heads, t->head_dim};
    const int64_t stride[4] = {t->stride_batch, t->stride_seq, t->stride_head, t->stride_dim};
    for (int i = 0; i < 4; i++)
        if (size[i] < 0) return -1;
    for (int i = 0; i < 4; i++)
        if (size[i] == 0) return 0;
    int64_t last = 0;
    for (int i = 0; i < 4; i++) {
        int64_t step;
        if (stride[i] < 0 || __builtin_mul_overflow(size[i] - 1, stride[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    }
    return last < INT64_MAX ? last + 1 : -1;
}

size_t fz_esize(flashattn_dtype dt) { return fa_dtype_valid(dt) ? (size_t)fa_dtype_bytes(dt) : 4; }

static void put_elem(unsigned char *mem, flashattn_dtype dt, size_t i, double v) {
    if (dt == FLASHATTN_F16) {
        const uint16_t h = fa_f32_to_f16((float)v);
        memcpy(mem + 2 * i, &h, 2);
    } else if (dt == FLASHATTN_BF16) {
        const uint16_t h = fa_f32_to_bf16((float)v);
        memcpy(mem + 2 * i, &h, 2);
    } else if (fa_dtype_quant(dt)) {
        /* a code standing for v at scale 3 / qmax: N(0, sigma) spans about
         * the dtype's range, as a per-token quantised row does */
        fa_quant_put(mem, dt, (int64_t)i, (float)v, 3.0f / fa_quant_max(dt));
    } else {
        const float f = (float)v;
        memcpy(mem + 4 * i, &f, 4);
    }
}

char fz_unallocated[1];

void fz_buf_alloc(fz_buf *x, uint64_t *rng, double sigma) {
    const int64_t ext = fz_extent(&x->t);
    const size_t es = fz_esize(x->t.dtype);
    x->covered = ext >= 0 && ext <= FZ_MAX_ELEMS;
    x->bytes = x->covered ? (size_t)ext * es : 64;
    x->mem = malloc(x->bytes ? x->bytes : 1);
    for (size_t i = 0; i < x->bytes / es; i++) put_elem(x->mem, x->t.dtype, i, sigma * fa_rand_normal(rng));
    if (x->t.data) x->t.data = x->mem;
}

void fz_buf_free(fz_buf *x) {
    free(x->mem);
    x->mem = NULL;
}

void fz_buf_sentinel(fz_buf *x) { memset(x->mem, 0x5a, x->bytes); }

unsigned char *fz_copy(const void *p, size_t n) {
    unsigned char *c = malloc(n ? n : 1);
    if (n) memcpy(c, p, n);
    return c;
}

double fz_ulp(flashattn_dtype dt, double x) {
    if (dt == FLASHATTN_F32) return 0.0;
    const int mant = dt == FLASHATTN_F16 ? 10 : 7;
    int e;
    frexp(fmax(fabs(x), dt == FLASHATTN_F16 ? 0x1p-14 : 0x1p-126), &e);
    return ldexp(1.0, e - 1 - mant);
}
