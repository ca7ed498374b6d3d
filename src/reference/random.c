/* Seeded inputs: splitmix64 + Box-Muller, values rounded to the dtype. */
#include "reference/random.h"

#include <math.h>

#include "core/dtype.h"

uint64_t fa_rand_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double fa_rand_normal(uint64_t *s) {
    /* u1 in (0, 1): log(u1) is finite */
    double u1 = ((double)(fa_rand_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(fa_rand_u64(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void set_elem(const flashattn_tensor *t, int64_t off, double v) {
    switch (t->dtype) {
    case FLASHATTN_F32: ((float *)t->data)[off] = (float)v; break;
    case FLASHATTN_F16: ((uint16_t *)t->data)[off] = fa_f32_to_f16((float)v); break;
    case FLASHATTN_BF16: ((uint16_t *)t->data)[off] = fa_f32_to_bf16((float)v); break;
    default: break;
    }
}

void fa_fill_normal(const flashattn_tensor *t, uint64_t *state, double sigma) {
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t s = 0; s < t->seqlen; s++)
            for (int64_t h = 0; h < t->heads; h++)
                for (int64_t c = 0; c < t->head_dim; c++)
                    set_elem(t, b * t->stride_batch + s * t->stride_seq + h * t->stride_head + c,
                             sigma * fa_rand_normal(state));
}
