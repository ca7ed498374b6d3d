/* Checks of user input shared by every entry point. */
#ifndef FA_VALIDATE_H
#define FA_VALIDATE_H

#include <stddef.h>

#include "core/decode_problem.h"
#include "core/problem.h"

/* Copy user params (NULL: defaults) into a full-size struct after checking
 * struct_size, so later fields can be added without breaking old callers. */
flashattn_status fa_read_params(const flashattn_params *user, flashattn_params *out);

/* Validate a decode problem (q, the cache, optional appends, o, lse) and
 * fill dp; reads the seqlens and the block table, writes nothing. */
flashattn_status fa_validate_decode(const flashattn_tensor *q, const flashattn_kv_cache *cache,
                                    const flashattn_tensor *k_new, const flashattn_tensor *v_new,
                                    const flashattn_tensor *o, float *lse,
                                    const flashattn_params *p, fa_decode_problem *dp);

/* Validate the inputs of flashattn_merge (lse is never checked: optional). */
/* flashattn_quantize's arguments. */
flashattn_status fa_validate_quantize(const flashattn_tensor *src, const flashattn_tensor *dst,
                                      const flashattn_tensor *scale, flashattn_scale_kind kind, int calibrate);

flashattn_status fa_validate_merge(int64_t n, const flashattn_tensor *parts,
                                   const float *const *lse_parts, const flashattn_tensor *o);

/* Validate a forward problem and fill pb. */
flashattn_status fa_validate_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 float *lse, const flashattn_params *p, fa_problem *pb);

/* Validate a backward problem (the forward's checks plus dout, lse and the
 * three gradients) and fill pb. */
flashattn_status fa_validate_bwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 const flashattn_tensor *dout, const float *lse,
                                 const flashattn_tensor *dq, const flashattn_tensor *dk,
                                 const flashattn_tensor *dv, const flashattn_params *p,
                                 fa_bwd_problem *pb);

#endif
