/* Public forward calls: validate, plan, then hand over to the driver. */
#include "api/forward.h"

#include <stdlib.h>

#include "api/status.h"
#include "api/workspace.h"
#include "api/validate.h"
#include "dispatch/isa.h"
#include "driver/fwd.h"

static flashattn_status prepare(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_tensor *o, float *lse,
                                const flashattn_params *user, const fa_kernels *kern,
                                fa_problem *pb, fa_fwd_plan *plan) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_fwd(q, k, v, o, lse, &p, pb))) return s;
    return fa_plan_fwd(pb, &p, kern, plan);
}

flashattn_status fa_fwd_workspace_size_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const float *lse, const flashattn_params *p,
                                          const fa_kernels *kern, size_t *workspace_bytes) {
    fa_problem pb;
    fa_fwd_plan plan;
    if (!workspace_bytes) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "workspace_bytes is NULL");
    flashattn_status s = prepare(q, k, v, o, (float *)lse, p, kern, &pb, &plan);
    if (s) return s;
    *workspace_bytes = plan.workspace_bytes;
    return FLASHATTN_OK;
}

flashattn_status fa_fwd_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                           const flashattn_tensor *v, const flashattn_tensor *o, float *lse,
                           const flashattn_params *p, void *workspace, size_t workspace_bytes,
                           const fa_kernels *kern) {
    fa_problem pb;
    fa_fwd_plan plan;
    flashattn_status s = prepare(q, k, v, o, lse, p, kern, &pb, &plan);
    if (s) return s;
    if (pb.batch == 0 || pb.seq_q == 0) return FLASHATTN_OK;
    void *owned;
    if ((s = fa_workspace_get(workspace, workspace_bytes, plan.workspace_bytes, &workspace, &owned)))
        return s;
    fa_fwd_run(&pb, &plan, kern, workspace);
    free(owned);
    return FLASHATTN_OK;
}

flashattn_status flashattn_fwd_workspace_size(const flashattn_tensor *q, const flashattn_tensor *k,
                                              const flashattn_tensor *v, const flashattn_tensor *o,
                                              const float *lse, const flashattn_params *p,
                                              size_t *workspace_bytes) {
    return fa_fwd_workspace_size_ex(q, k, v, o, lse, p, fa_active_kernels(), workspace_bytes);
}

flashattn_status flashattn_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                               const flashattn_tensor *v, const flashattn_tensor *o, float *lse,
                               const flashattn_params *p, void *workspace, size_t workspace_bytes) {
    return fa_fwd_ex(q, k, v, o, lse, p, workspace, workspace_bytes, fa_active_kernels());
}
