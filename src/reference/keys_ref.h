/* The keys a query sees, for the references, straight from the header's
 * formula rather than from core/mask.h: the tests compare the library's
 * masking with this. */
#ifndef FA_REFERENCE_KEYS_REF_H
#define FA_REFERENCE_KEYS_REF_H

#include "core/problem.h"

/* Query i of a dense problem sees keys [*lo, *end) (empty when end <= lo):
 * i + diag - left <= j <= i + diag + right, 0 <= j < seq_k. */
static inline void fa_ref_keys(const fa_problem *pb, int64_t i, int64_t *lo, int64_t *end) {
    const int64_t diag = pb->top_left ? 0 : pb->seq_k - pb->seq_q;
    int64_t a = 0, e = pb->seq_k;
    if (pb->left >= 0 && i + diag - pb->left > a) a = i + diag - pb->left;
    if (pb->right >= 0 && i + diag + pb->right + 1 < e) e = i + diag + pb->right + 1;
    *lo = a;
    *end = e;
}

#endif
