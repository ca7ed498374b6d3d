/* The tool API's own calls: the library's validation and planning, seen
 * from outside (tool/tool.h). */
#include "tool/tool.h"

#include "api/validate.h"
#include "core/mask.h"
#include "core/status.h"
#include "core/threads.h"
#include "plan/fwd_route.h"
#include "plan/tiles.h"

flashattn_status fa_tool_plan_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                  const flashattn_tensor *v, const flashattn_tensor *o,
                                  const flashattn_params *user, const fa_kernels *kern,
                                  fa_tool_fwd_plan *out) {
    flashattn_params p;
    fa_problem pb;
    fa_fwd_plan plan;
    flashattn_status s;
    fa_clear_error();
    if (!kern) return fa_fail(FLASHATTN_ERR_UNSUPPORTED, "kernel path not available on this CPU");
    if ((s = fa_read_params(user, &p)) || (s = fa_validate_fwd(q, k, v, o, NULL, &p, &pb)) ||
        (s = fa_plan_fwd(&pb, &p, kern, &plan)))
        return s;
    out->block_m = plan.block_m, out->block_n = plan.block_n;
    out->source_m = plan.source_m, out->source_n = plan.source_n;
    out->bf16_dot = plan.bf16_dot;
    out->as_decode = !p.block_m && !p.block_n && fa_fwd_few_rows(pb.seq_q, pb.seq_k, pb.group);
    out->head_dim_pad = pb.head_dim_pad;
    out->workspace_bytes = plan.workspace_bytes;
    fa_tile_query_of(&pb, kern, plan.threads, &out->query);
    fa_tile_rule(&out->query, &out->rule_m, &out->rule_n);
    fa_tile_footprint_of(&out->query, plan.block_m, plan.block_n, &out->footprint);
    return FLASHATTN_OK;
}

flashattn_status fa_tool_check_tile(const char *what, int64_t value, int is_block_n,
                                    const fa_kernels *kern) {
    fa_clear_error();
    return fa_check_tile(what, value, is_block_n, kern);
}

double fa_tool_visible_pairs(const flashattn_tensor *q, const flashattn_tensor *k,
                             const flashattn_tensor *v, const flashattn_tensor *o,
                             const flashattn_params *user) {
    flashattn_params p;
    fa_problem pb;
    if (fa_read_params(user, &p) || fa_validate_fwd(q, k, v, o, NULL, &p, &pb)) return -1.0;
    const fa_mask mask = fa_seq_of(&pb, 0).mask;
    double n = 0.0;
    for (int64_t i = 0; i < pb.seq_q; i++) {
        const int64_t lo = fa_mask_lo(&mask, i), end = fa_mask_end(&mask, i);
        if (end > lo) n += (double)(end - lo);
    }
    return n;
}

int fa_tool_fwd_as_decode(int64_t seq_q, int64_t seq_k, int64_t group) {
    return fa_fwd_few_rows(seq_q, seq_k, group);
}
