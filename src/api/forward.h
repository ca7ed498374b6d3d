/* Forward entry with an explicit kernel table (tests and tools run every
 * ISA path in one process through it; the public calls use the active one). */
#ifndef FA_API_FORWARD_H
#define FA_API_FORWARD_H

#include "flashattn.h"
#include "kernels/kernels.h"

flashattn_status fa_fwd_workspace_size_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const float *lse, const flashattn_params *p,
                                          const fa_kernels *kern, size_t *workspace_bytes);

flashattn_status fa_fwd_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                           const flashattn_tensor *v, const flashattn_tensor *o, float *lse,
                           const flashattn_params *p, void *workspace, size_t workspace_bytes,
                           const fa_kernels *kern);

#endif
