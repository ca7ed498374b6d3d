/* Decode and merge entries with an explicit kernel table (tests and tools
 * run every ISA path in one process through them; the public calls use the
 * active one). */
#ifndef FA_API_DECODE_H
#define FA_API_DECODE_H

#include "flashattn.h"
#include "kernels/kernels.h"

flashattn_status fa_decode_workspace_size_ex(const flashattn_tensor *q,
                                             const flashattn_kv_cache *cache,
                                             const flashattn_tensor *k_new,
                                             const flashattn_tensor *v_new,
                                             const flashattn_tensor *o, const float *lse,
                                             const flashattn_params *p, const fa_kernels *kern,
                                             size_t *workspace_bytes);

flashattn_status fa_decode_ex(const flashattn_tensor *q, const flashattn_kv_cache *cache,
                              const flashattn_tensor *k_new, const flashattn_tensor *v_new,
                              const flashattn_tensor *o, float *lse, const flashattn_params *p,
                              void *workspace, size_t workspace_bytes, const fa_kernels *kern);

flashattn_status fa_merge_ex(int64_t n_parts, const flashattn_tensor *o_parts,
                             const float *const *lse_parts, const flashattn_tensor *o, float *lse,
                             const flashattn_params *p, const fa_kernels *kern);

#endif
