/*
 * The tool API: everything flashattn's command-line tool (tools/flashattn)
 * takes from inside the library, in one header. Unstable: it follows the
 * library's internals, promises no compatibility and is never installed.
 * The tool layer sits above the library (docs/architecture.md) and holds
 * the tool-only code that the shipped library leaves out: the peak loops
 * and the tuning-file writer. tests/test_layers.sh keeps the CLI to the
 * public header, this one, and the tools' own references (src/reference,
 * src/baseline).
 */
#ifndef FA_TOOL_TOOL_H
#define FA_TOOL_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

/* Kernel paths: a table's name and register tile (fa_kernels: isa, mr, nr,
 * bf16_dot), which paths this CPU runs, and the public calls on a given
 * path (fa_fwd_ex, fa_bwd_ex, fa_decode_ex and their workspace sizes). */
#include "api/backward.h"
#include "api/decode.h"
#include "api/forward.h"
#include "dispatch/isa.h"
#include "kernels/kernels.h"

/* What the planner sees and how it decides: the detected caches, the
 * automatic tile rule with its footprint model, the tuning file's entries. */
#include "plan/cpu_caches.h"
#include "plan/tile_rule.h"
#include "plan/tune_file.h"

/* Loops that measure the machine (tool/peak/). */
#include "tool/peak_loops.h"

/* A forward as the planner plans it on one path: `flashattn plan` and
 * `flashattn tune` show it. */
typedef struct fa_tool_fwd_plan {
    int block_m, block_n;            /* the forward driver's tiles */
    const char *source_m, *source_n; /* "params", "environment", "tuning file", "rule" */
    int rule_m, rule_n;              /* the automatic rule's own choice */
    int bf16_dot;                    /* the bf16 dot-product route */
    int as_decode;                   /* without user tiles these sizes run on the
                                        decode driver (plan/fwd_route.h) */
    int64_t head_dim_pad;
    size_t workspace_bytes;          /* of the forward driver's plan */
    fa_tile_query query;             /* the rule's view of the problem */
    fa_tile_footprint footprint;     /* of block_m x block_n */
} fa_tool_fwd_plan;

/* Plan a forward of these tensors and params on kern with `threads`
 * threads (0: the OpenMP default); the tensors' data is never read. On
 * error the status, with flashattn_last_error() saying why. */
flashattn_status fa_tool_plan_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                  const flashattn_tensor *v, const flashattn_tensor *o,
                                  const flashattn_params *p, const fa_kernels *kern,
                                  fa_tool_fwd_plan *out);

/* Whether a tile the user gave (`what` names where: "--block-n") can run
 * on kern; BAD_TILE with the broken constraint in flashattn_last_error(). */
flashattn_status fa_tool_check_tile(const char *what, int64_t value, int is_block_n,
                                    const fa_kernels *kern);

/* The (query, key) pairs the mask lets through, over one (batch, head):
 * what a forward computes, for FLOP counts; -1 when the inputs are invalid. */
double fa_tool_visible_pairs(const flashattn_tensor *q, const flashattn_tensor *k,
                             const flashattn_tensor *v, const flashattn_tensor *o,
                             const flashattn_params *p);

/* Whether a forward of these sizes, without user tiles, runs on decode's
 * driver (group = heads_q / heads_kv). */
int fa_tool_fwd_as_decode(int64_t seq_q, int64_t seq_k, int64_t group);

/* Write (or replace) the entry with entry's key in the tuning file at
 * path, keeping every other entry. Refuses to overwrite a file that is not
 * a valid tuning file. Returns 0, or -1 with the reason in why. */
int fa_tune_save(const char *path, const fa_tune_entry *entry, char *why, size_t why_n);

#endif
