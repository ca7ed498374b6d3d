/* Public merge of partial (O, LSE) results: validate, then the driver's
 * merge (the code decode's split-KV runs too). */
#include "api/decode.h"
#include "api/validate.h"
#include "core/status.h"
#include "core/threads.h"
#include "dispatch/isa.h"
#include "driver/merge.h"


flashattn_status fa_merge_ex(int64_t n_parts, const flashattn_tensor *o_parts,
                             const float *const *lse_parts, const flashattn_tensor *o, float *lse,
                             const flashattn_params *user, const fa_kernels *kern) {
    flashattn_params p;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p))) return s;
    if ((s = fa_validate_merge(n_parts, o_parts, lse_parts, o))) return s;
    const int threads = fa_threads_or_default(p.num_threads);
    const fa_merge_job job = {n_parts, o_parts, lse_parts, o, lse};
    fa_merge_run(kern, &job, threads);
    return FLASHATTN_OK;
}

flashattn_status flashattn_merge(int64_t n_parts, const flashattn_tensor *o_parts,
                                 const float *const *lse_parts, const flashattn_tensor *o,
                                 float *lse, const flashattn_params *p) {
    return fa_merge_ex(n_parts, o_parts, lse_parts, o, lse, p, fa_active_kernels());
}
