/* Dropout for the references: Z = keep / (1 - p) of element (b, h, i, j),
 * from the header's definition, element by element (core/philox.h), in
 * double. 1 without dropout. */
#ifndef FA_REFERENCE_DROPOUT_REF_H
#define FA_REFERENCE_DROPOUT_REF_H

#include "core/philox.h"
#include "core/problem.h"

static inline double fa_ref_dropout_z(const fa_problem *pb, const flashattn_params *p, int64_t b,
                                      int64_t h, int64_t i, int64_t j) {
    if (p->dropout_p == 0.0f) return 1.0;
    uint32_t key[2], r[4];
    fa_dropout_key(&pb->dropout, b * pb->heads_q + h, key);
    const uint32_t ctr[4] = {(uint32_t)(j >> 3), (uint32_t)i, (uint32_t)p->dropout_offset,
                             (uint32_t)(p->dropout_offset >> 32)};
    fa_philox4x32_10(ctr, key, r);
    return fa_dropout_bits(r, j) >= pb->dropout.threshold ? 1.0 / (1.0 - (double)p->dropout_p) : 0.0;
}

#endif
