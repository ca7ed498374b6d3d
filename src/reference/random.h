/* Reproducible random inputs for tests and `flashattn check`: the same seed
 * gives the same tensors on every machine and build. */
#ifndef FA_REFERENCE_RANDOM_H
#define FA_REFERENCE_RANDOM_H

#include <stdint.h>

#include "flashattn.h"

/* splitmix64: advances *state. */
uint64_t fa_rand_u64(uint64_t *state);
/* N(0, 1) by Box-Muller from two draws. */
double fa_rand_normal(uint64_t *state);
/* Every element of t (any strides) = sigma * N(0, 1), rounded to t's dtype. */
void fa_fill_normal(const flashattn_tensor *t, uint64_t *state, double sigma);

#endif
