/* Public forward calls: validate, plan, then hand over to the driver. */
#include "api/forward.h"

#include <stdlib.h>

#include "api/validate.h"
#include "api/workspace.h"
#include "core/status.h"
#include "dispatch/isa.h"
#include "driver/decode.h"
#include "driver/fwd.h"
#include "plan/fwd_route.h"

/* A validated, planned forward: for the forward driver, or run as decode
 * (plan/fwd_route.h). */
typedef struct {
    fa_problem pb;
    int empty; /* no output row: nothing is planned, nothing runs */
    int as_decode;
    fa_fwd_plan plan;
    fa_decode_problem dp;
    fa_decode_plan dplan;
} fwd_call;

static flashattn_status prepare(const flashattn_tensor *q, const flashattn_tensor *k,
                                const flashattn_tensor *v, const flashattn_tensor *o, float *lse,
                                const flashattn_params *user, const fa_kernels *kern,
                                fwd_call *c) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_fwd(q, k, v, o, lse, &p, &c->pb))) return s;
    c->empty = c->pb.batch == 0 || c->pb.seq_q == 0;
    c->as_decode = 0;
    if (c->empty) return FLASHATTN_OK;
    c->as_decode = fa_fwd_route_decode(&c->pb, &p, kern, &c->dp, &c->dplan, &s);
    if (c->as_decode) return s;
    return fa_plan_fwd(&c->pb, &p, kern, &c->plan);
}

flashattn_status fa_fwd_workspace_size_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                                          const flashattn_tensor *v, const flashattn_tensor *o,
                                          const float *lse, const flashattn_params *p,
                                          const fa_kernels *kern, size_t *workspace_bytes) {
    fwd_call c;
    if (!workspace_bytes) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "workspace_bytes is NULL");
    flashattn_status s = prepare(q, k, v, o, (float *)lse, p, kern, &c);
    if (s) return s;
    *workspace_bytes = c.empty ? 0 : c.as_decode ? c.dplan.workspace_bytes : c.plan.workspace_bytes;
    return FLASHATTN_OK;
}

flashattn_status fa_fwd_ex(const flashattn_tensor *q, const flashattn_tensor *k,
                           const flashattn_tensor *v, const flashattn_tensor *o, float *lse,
                           const flashattn_params *p, void *workspace, size_t workspace_bytes,
                           const fa_kernels *kern) {
    fwd_call c;
    flashattn_status s = prepare(q, k, v, o, lse, p, kern, &c);
    if (s) return s;
    if (c.empty) return FLASHATTN_OK;
    const size_t need = c.as_decode ? c.dplan.workspace_bytes : c.plan.workspace_bytes;
    void *owned;
    if ((s = fa_workspace_get(workspace, workspace_bytes, need, &workspace, &owned))) return s;
    if (c.as_decode)
        fa_decode_run(&c.dp, &c.dplan, kern, workspace);
    else
        fa_fwd_run(&c.pb, &c.plan, kern, workspace);
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
