/* Backward entry with an explicit kernel table (tests and tools run every
 * ISA path in one process through it; the public calls use the active one). */
#ifndef FA_API_BACKWARD_H
#define FA_API_BACKWARD_H

#include "flashattn.h"
#include "kernels/kernels.h"

flashattn_status fa_bwd_workspace_size_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const flashattn_tensor *dout, const float *lse,
                                          const flashattn_tensor *dq, const flashattn_tensor *dk,
                                          const flashattn_tensor *dv, const flashattn_params *p,
                                          const fa_kernels *kern, size_t *workspace_bytes);

flashattn_status fa_bwd_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                           const flashattn_tensor *v, const flashattn_tensor *o,
                           const flashattn_tensor *dout, const float *lse,
                           const flashattn_tensor *dq, const flashattn_tensor *dk,
                           const flashattn_tensor *dv, const flashattn_params *p, void *workspace,
                           size_t workspace_bytes, const fa_kernels *kern);

#endif
