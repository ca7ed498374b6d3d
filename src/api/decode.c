/* Public decode calls: validate, plan, then hand over to the driver. */
#include "api/decode.h"

#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "api/workspace.h"
#include "core/status.h"
#include "dispatch/isa.h"
#include "driver/decode.h"

void flashattn_kv_cache_init_size(flashattn_kv_cache *c, size_t size) {
    if (!c || size < sizeof c->struct_size) return;
    memset(c, 0, size);
    c->struct_size = size;
}

static flashattn_status prepare(const flashattn_tensor *q, const flashattn_kv_cache *cache,
                                const flashattn_tensor *k_new, const flashattn_tensor *v_new,
                                const flashattn_tensor *o, float *lse,
                                const flashattn_params *user, const fa_kernels *kern,
                                fa_decode_problem *dp, fa_decode_plan *plan) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_decode(q, cache, k_new, v_new, o, lse, &p, dp))) return s;
    if (dp->base.batch == 0 || (dp->base.seq_q == 0 && dp->seq_new == 0)) { /* nothing to do */
        plan->workspace_bytes = 0;
        return FLASHATTN_OK;
    }
    return fa_plan_decode(dp, &p, kern, 0, 0, plan);
}

flashattn_status fa_decode_workspace_size_ex(const flashattn_tensor *q,
                                             const flashattn_kv_cache *cache,
                                             const flashattn_tensor *k_new,
                                             const flashattn_tensor *v_new,
                                             const flashattn_tensor *o, const float *lse,
                                             const flashattn_params *p, const fa_kernels *kern,
                                             size_t *workspace_bytes) {
    fa_decode_problem dp;
    fa_decode_plan plan;
    if (!workspace_bytes) return fa_fail(FLASHATTN_ERR_NULL_POINTER, "workspace_bytes is NULL");
    flashattn_status s = prepare(q, cache, k_new, v_new, o, (float *)lse, p, kern, &dp, &plan);
    if (s) return s;
    *workspace_bytes = plan.workspace_bytes;
    return FLASHATTN_OK;
}

flashattn_status fa_decode_ex(const flashattn_tensor *q, const flashattn_kv_cache *cache,
                              const flashattn_tensor *k_new, const flashattn_tensor *v_new,
                              const flashattn_tensor *o, float *lse, const flashattn_params *p,
                              void *workspace, size_t workspace_bytes, const fa_kernels *kern) {
    fa_decode_problem dp;
    fa_decode_plan plan;
    flashattn_status s = prepare(q, cache, k_new, v_new, o, lse, p, kern, &dp, &plan);
    if (s) return s;
    if (dp.base.batch == 0 || (dp.base.seq_q == 0 && dp.seq_new == 0)) return FLASHATTN_OK;
    void *owned;
    if ((s = fa_workspace_get(workspace, workspace_bytes, plan.workspace_bytes, &workspace, &owned)))
        return s;
    fa_decode_run(&dp, &plan, kern, workspace);
    free(owned);
    return FLASHATTN_OK;
}

flashattn_status flashattn_decode_workspace_size(const flashattn_tensor *q,
                                                 const flashattn_kv_cache *cache,
                                                 const flashattn_tensor *k_new,
                                                 const flashattn_tensor *v_new,
                                                 const flashattn_tensor *o, const float *lse,
                                                 const flashattn_params *p,
                                                 size_t *workspace_bytes) {
    return fa_decode_workspace_size_ex(q, cache, k_new, v_new, o, lse, p, fa_active_kernels(),
                                       workspace_bytes);
}

flashattn_status flashattn_decode(const flashattn_tensor *q, const flashattn_kv_cache *cache,
                                  const flashattn_tensor *k_new, const flashattn_tensor *v_new,
                                  const flashattn_tensor *o, float *lse,
                                  const flashattn_params *p, void *workspace,
                                  size_t workspace_bytes) {
    return fa_decode_ex(q, cache, k_new, v_new, o, lse, p, workspace, workspace_bytes,
                        fa_active_kernels());
}
