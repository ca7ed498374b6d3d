/* Checks of user input shared by every entry point. */
#ifndef FA_VALIDATE_H
#define FA_VALIDATE_H

#include <stddef.h>

#include "driver/problem.h"

/* Copy user params (NULL: defaults) into a full-size struct after checking
 * struct_size, so later fields can be added without breaking old callers. */
flashattn_status fa_read_params(const flashattn_params *user, flashattn_params *out);

/* Validate a forward problem and fill pb. */
flashattn_status fa_validate_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 float *lse, const flashattn_params *p, fa_problem *pb);

/* Checked size arithmetic: return 0 on overflow. */
static inline int fa_mul_size(size_t a, size_t b, size_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline int fa_add_size(size_t a, size_t b, size_t *r) { return !__builtin_add_overflow(a, b, r); }

size_t fa_dtype_size(flashattn_dtype dt);

#endif
