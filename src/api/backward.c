/* Public backward calls: validate, plan, then hand over to the driver. */
#include "api/backward.h"

#include <stdlib.h>

#include "api/validate.h"
#include "api/workspace.h"
#include "core/status.h"
#include "dispatch/isa.h"
#include "driver/bwd.h"

static flashattn_status prepare(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_tensor *o,
                                const flashattn_tensor *dout, const float *lse,
                                const flashattn_tensor *dq, const flashattn_tensor *dk,
                                const flashattn_tensor *dv, const flashattn_params *user,
                                const fa_kernels *kern, fa_bwd_problem *pb, fa_bwd_plan *plan) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_bwd(q, k, v, o, dout, lse, dq, dk, dv, &p, pb))) return s;
    if (pb->f.batch == 0) { /* no gradient rows: nothing is planned */
        plan->workspace_bytes = 0;
        return FLASHATTN_OK;
    }
    return fa_plan_bwd(&pb->f, pb->dout->dtype, &p, kern, plan);
}

flashattn_status fa_bwd_workspace_size_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const flashattn_tensor *dout, const float *lse,
                                          const flashattn_tensor *dq, const flashattn_tensor *dk,
                                          const flashattn_tensor *dv, const flashattn_params *p,
                                          const fa_kernels *kern, size_t *workspace_bytes) {
    fa_bwd_problem pb;
    fa_bwd_plan plan;
    if (!workspace_bytes) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "workspace_bytes is NULL");
    flashattn_status s = prepare(q, k, v, o, dout, lse, dq, dk, dv, p, kern, &pb, &plan);
    if (s) return s;
    *workspace_bytes = plan.workspace_bytes;
    return FLASHATTN_OK;
}

flashattn_status fa_bwd_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                           const flashattn_tensor *v, const flashattn_tensor *o,
                           const flashattn_tensor *dout, const float *lse,
                           const flashattn_tensor *dq, const flashattn_tensor *dk,
                           const flashattn_tensor *dv, const flashattn_params *p, void *workspace,
                           size_t workspace_bytes, const fa_kernels *kern) {
    fa_bwd_problem pb;
    fa_bwd_plan plan;
    flashattn_status s = prepare(q, k, v, o, dout, lse, dq, dk, dv, p, kern, &pb, &plan);
    if (s) return s;
    if (pb.f.batch == 0) { /* no rows: every sink's gradient is 0 */
        for (int64_t h = 0; pb.dsinks && h < pb.f.heads_q; h++) pb.dsinks[h] = 0.0f;
        return FLASHATTN_OK;
    }
    void *owned;
    if ((s = fa_workspace_get(workspace, workspace_bytes, plan.workspace_bytes, &workspace, &owned)))
        return s;
    fa_bwd_run(&pb, &plan, kern, workspace);
    free(owned);
    return FLASHATTN_OK;
}

flashattn_status flashattn_bwd_workspace_size(const flashattn_tensor *q, const flashattn_tensor *k,
                                              const flashattn_tensor *v, const flashattn_tensor *o,
                                              const flashattn_tensor *dout, const float *lse,
                                              const flashattn_tensor *dq, const flashattn_tensor *dk,
                                              const flashattn_tensor *dv, const flashattn_params *p,
                                              size_t *workspace_bytes) {
    return fa_bwd_workspace_size_ex(q, k, v, o, dout, lse, dq, dk, dv, p, fa_active_kernels(),
                                    workspace_bytes);
}

flashattn_status flashattn_bwd(const flashattn_tensor *q, const flashattn_tensor *k,
                               const flashattn_tensor *v, const flashattn_tensor *o,
                               const flashattn_tensor *dout, const float *lse,
                               const flashattn_tensor *dq, const flashattn_tensor *dk,
                               const flashattn_tensor *dv, const flashattn_params *p,
                               void *workspace, size_t workspace_bytes) {
    return fa_bwd_ex(q, k, v, o, dout, lse, dq, dk, dv, p, workspace, workspace_bytes,
                     fa_active_kernels());
}
