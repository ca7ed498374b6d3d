/*
 * Tile choice (the sources in tiles.h, the rule in tile_rule.c) and the
 * forward workspace layout.
 *
 * block_n never depends on the thread count: rows see the same kv-blocks
 * in the same order whatever the threads, which is what makes results
 * bit-identical across thread counts. block_m may follow the threads; a
 * row's arithmetic does not depend on block_m (see kernels.h).
 */
#include "plan/tiles.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/size.h"
#include "core/status.h"
#include "core/share.h"
#include "core/threads.h"
#include "plan/cpu_caches.h"
#include "plan/tile_rule.h"
#include "plan/tune_file.h"

#define FA_PACK_BUDGET_BYTES ((size_t)64 << 20)

/* The constraint a tile value breaks, or NULL when the kernels can run it. */
static const char *tile_problem(int64_t v, int is_block_n, const fa_kernels *kern, char *buf,
                                size_t n) {
    if (v < 1) snprintf(buf, n, "must be >= 1 (0 means automatic only in params)");
    else if (v > FA_MAX_BLOCK) snprintf(buf, n, "must be <= %d", FA_MAX_BLOCK);
    else if (is_block_n && v % kern->nr != 0)
        snprintf(buf, n, "must be a multiple of %d (the %s kernel's NR)", kern->nr, kern->isa);
    else return NULL;
    return buf;
}

flashattn_status fa_check_tile(const char *what, int64_t value, int is_block_n,
                               const fa_kernels *kern) {
    char why[96];
    if (!tile_problem(value, is_block_n, kern, why, sizeof why)) return FLASHATTN_OK;
    return fa_fail(FLASHATTN_ERR_BAD_TILE, "%s=%lld: %s", what, (long long)value, why);
}

/* FLASHATTN_BLOCK_M / _N: 0 in *v when unset or empty. */
static flashattn_status env_tile(const char *name, int is_block_n, const fa_kernels *kern, int *v) {
    const char *text = getenv(name);
    *v = 0;
    if (!text || !text[0]) return FLASHATTN_OK;
    char *end;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno)
        return fa_fail(FLASHATTN_ERR_BAD_TILE, "%s='%s': not an integer (unset it for automatic tiles)",
                       name, text);
    flashattn_status s = fa_check_tile(name, x, is_block_n, kern);
    if (!s) *v = (int)x;
    return s;
}

/* Tiles from the tuning file for this shape and kernel, 0 where none. */
static void tuned_tiles(const fa_problem *pb, const flashattn_params *p, const fa_kernels *kern,
                        int *bm, int *bn) {
    fa_tune_key key;
    char why[96];
    *bm = *bn = 0;
    if (!fa_tune_file_named()) return;
    fa_tune_key_make(&key, kern->isa, pb->head_dim, pb->q->dtype, p->causal);
    if (!fa_tune_lookup(&key, bm, bn)) return;
    const char *bad_m = tile_problem(*bm, 0, kern, why, sizeof why);
    const char *bad_n = bad_m ? NULL : tile_problem(*bn, 1, kern, why, sizeof why);
    if (bad_m || bad_n) {
        fa_tune_warn("tuning file entry for %s head_dim %lld ignored: block_%s=%d %s", kern->isa,
                     (long long)pb->head_dim, bad_m ? "m" : "n", bad_m ? *bm : *bn, why);
        *bm = *bn = 0;
    }
}

/* The rule's view of pb, or of its sequence `one` alone (its own lengths)
 * when not NULL. */
static void query_of(const fa_problem *pb, const fa_kernels *kern, int threads, const fa_seq *one,
                     fa_tile_query *q) {
    const fa_cpu_caches *cc = fa_cpu_caches_get();
    *q = (fa_tile_query){
        .batch = one ? 1 : pb->batch, .heads_q = pb->heads_q,
        .seq_q = one ? one->seq_q : pb->seq_q, .seq_k = one ? one->seq_k : pb->seq_k,
        .head_dim = pb->head_dim, .head_dim_v = pb->head_dim_v,
        .elem_bytes = (int)sizeof(float), /* the kernels widen every dtype to f32 */
        .pv8 = pb->int8_pv,
        .mr = kern->mr, .nr = kern->nr, .l1d_bytes = cc->l1d_bytes, .l2_bytes = cc->l2_bytes,
        .threads = threads,
    };
}

void fa_tile_query_of(const fa_problem *pb, const fa_kernels *kern, int threads, fa_tile_query *q) {
    /* a varlen batch is asked as its longest sequence */
    query_of(pb, kern, threads, NULL, q);
}

/* The passes of groups_per_pass cut as evenly as their count allows, in a
 * multiple of the threads where that fits: 8 groups in passes of 5 left a
 * second pass of 3, whose packing and items two threads share unevenly,
 * and a pass of one group on two threads leaves each reading half of its
 * panels from the other's packing (docs/performance.md, "Even passes"). */
static int64_t even_passes(int64_t groups, int64_t per_pass, int threads, int64_t budget) {
    if (per_pass >= groups) return per_pass;
    const int64_t passes = (groups + per_pass - 1) / per_pass;
    per_pass = (groups + passes - 1) / passes;
    const int64_t whole = (per_pass + threads - 1) / threads * threads;
    return whole <= groups && whole <= budget ? whole : per_pass;
}

void fa_seq_tiles(const fa_problem *pb, const fa_kernels *kern, int64_t b, int *block_m, int *block_n) {
    fa_tile_query q;
    const fa_seq one = fa_seq_of(pb, b);
    query_of(pb, kern, 1, &one, &q);
    fa_tile_rule(&q, block_m, block_n);
}

static flashattn_status choose_tiles(const fa_problem *pb, const flashattn_params *p,
                                     const fa_kernels *kern, fa_fwd_plan *plan) {
    flashattn_status s;
    int env_m = 0, env_n = 0, tune_m = 0, tune_n = 0, rule_m, rule_n;
    if (p->block_m > 0 && (s = fa_check_tile("params.block_m", p->block_m, 0, kern))) return s;
    if (p->block_n > 0 && (s = fa_check_tile("params.block_n", p->block_n, 1, kern))) return s;
    if (p->block_m == 0 && (s = env_tile("FLASHATTN_BLOCK_M", 0, kern, &env_m))) return s;
    if (p->block_n == 0 && (s = env_tile("FLASHATTN_BLOCK_N", 1, kern, &env_n))) return s;
    if ((p->block_m == 0 && env_m == 0) || (p->block_n == 0 && env_n == 0))
        tuned_tiles(pb, p, kern, &tune_m, &tune_n);

    fa_tile_query q;
    fa_tile_query_of(pb, kern, plan->threads, &q);
    fa_tile_rule(&q, &rule_m, &rule_n);
    /* A tuned block_n shrinks to the keys there are (as the rule's does),
     * a tuned block_m to the work there is: a file entry measured on long
     * sequences must not leave threads idle on short ones. */
    const int64_t keys = pb->seq_k > FA_MAX_BLOCK ? FA_MAX_BLOCK + 1
                                                  : fa_round_up_i64(pb->seq_k > 0 ? pb->seq_k : 1, kern->nr);
    if (tune_n > keys && keys <= FA_MAX_BLOCK) tune_n = (int)keys;
    if (tune_m) tune_m = fa_tile_fit_threads(&q, tune_m);

    /* Under a boolean mask the tile summary is one grid for the batch. */
    plan->per_seq = pb->cu_q && !pb->mask && !p->block_m && !env_m && !tune_m && !p->block_n && !env_n &&
                    !tune_n && pb->batch > 0;
    for (int64_t b = 0; plan->per_seq && b < pb->batch; b++) {
        int bm, bn;
        fa_seq_tiles(pb, kern, b, &bm, &bn);
        if (b == 0 || bm > rule_m) rule_m = bm;
        if (b == 0 || bn > rule_n) rule_n = bn;
    }
    plan->block_m = p->block_m ? p->block_m : env_m ? env_m : tune_m ? tune_m : rule_m;
    plan->source_m = p->block_m ? "params" : env_m ? "environment" : tune_m ? "tuning file" : "rule";
    plan->block_n = p->block_n ? p->block_n : env_n ? env_n : tune_n ? tune_n : rule_n;
    plan->source_n = p->block_n ? "params" : env_n ? "environment" : tune_n ? "tuning file" : "rule";
    return FLASHATTN_OK;
}

flashattn_status fa_plan_fwd(const fa_problem *pb, const flashattn_params *p,
                             const fa_kernels *kern, fa_fwd_plan *plan) {
    flashattn_status s;
    plan->threads = fa_threads_or_default(p->num_threads);
    if ((s = choose_tiles(pb, p, kern, plan))) return s;

    const size_t d = (size_t)pb->head_dim, dp = (size_t)pb->head_dim_v_pad; /* Q, K; V, O */
    const size_t bm = (size_t)plan->block_m, bn = (size_t)plan->block_n, f = sizeof(float);
    const size_t kpanels = ((size_t)pb->seq_k + (size_t)kern->nr - 1) / (size_t)kern->nr;
    size_t kf, vf;
    if (!fa_mul_size(kpanels * (size_t)kern->nr, d * f, &kf) ||
        !fa_mul_size((size_t)pb->seq_k, dp * f, &vf))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "packed K/V size overflows");
    plan->bf16_dot = kern->bf16_dot && pb->q->dtype == FLASHATTN_BF16 &&
                     pb->k->dtype == FLASHATTN_BF16 && pb->v->dtype == FLASHATTN_BF16;
    /* The dot route's pairs take no more room than f32 (head_dim rounded
     * up to even, halved), so only P's bf16 copy is added. */
    const int i8 = pb->int8_qk;
    if (i8) plan->bf16_dot = 0;
    plan->i8_pv_dot = i8 && pb->bf16_pv && kern->bf16_dot;
    const size_t k4 = (d + 3) / 4, keys = kpanels * (size_t)kern->nr;
    const size_t chunks = ((size_t)pb->seq_k + (size_t)fa_pack_chunk(kern) - 1) / (size_t)fa_pack_chunk(kern);
    size_t k8 = 0;
    if (i8 && !fa_mul_size(keys, 4 * k4, &k8)) return fa_fail(FLASHATTN_ERR_OVERFLOW, "packed K size overflows");
    fa_layout_init(&plan->group, "fwd group");
    fa_layout_array(&plan->group, FA_FWD_GROUP_K, "k panels", 1, i8 ? 0 : kf);
    const int v8 = i8 && pb->int8_pv;
    size_t v8b = 0;
    if (v8 && !fa_mul_size(((size_t)pb->seq_k + 3) / 4 * 4, dp, &v8b))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "packed V size overflows");
    fa_layout_array(&plan->group, FA_FWD_GROUP_V, "v panels", 1, v8 ? 0 : vf);
    fa_layout_array(&plan->group, FA_FWD_GROUP_K8, "k int8 panels", 1, k8);
    fa_layout_array(&plan->group, FA_FWD_GROUP_KSUM, "k int8 sums", i8 ? keys : 0, sizeof(int32_t));
    fa_layout_array(&plan->group, FA_FWD_GROUP_KSCALE, "k scales", i8 ? keys : 0, f);
    fa_layout_array(&plan->group, FA_FWD_GROUP_KMEAN, "k chunk means", i8 ? chunks : 0, d * f);
    fa_layout_array(&plan->group, FA_FWD_GROUP_V8, "v int8 panels", 1, v8b);
    fa_layout_array(&plan->group, FA_FWD_GROUP_VSCALE, "v channel scales", v8 ? chunks : 0, dp * f);
    fa_layout_init(&plan->thread, "fwd thread");
    fa_layout_array(&plan->thread, FA_FWD_THREAD_Q, "q", 1, bm * d * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_S, "s", 1, bm * bn * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_ACC, "acc", 1, bm * dp * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_MAX, "row max", 1, bm * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_SUM, "row sum", 1, bm * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_P16, "p bf16", 1, plan->bf16_dot || plan->i8_pv_dot ? bm * bn * 2 : 0);
    const size_t long_rows = pb->seq_k > FA_SUM_CHUNK ? bm : 0;
    fa_layout_array(&plan->thread, FA_FWD_THREAD_TOTAL_ACC, "total acc", 1, long_rows * dp * sizeof(double));
    fa_layout_array(&plan->thread, FA_FWD_THREAD_TOTAL_SUM, "total row sum", 1, long_rows * sizeof(double));
    fa_layout_array(&plan->thread, FA_FWD_THREAD_TOTAL_MAX, "total row max", 1, long_rows * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_Q8, "q int8", i8 ? bm : 0, 4 * k4);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_QSCALE, "q scales", i8 ? bm : 0, f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_QADD, "q mean terms", i8 ? bm : 0, f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_I8TMP, "k and v packing", i8 ? 1 : 0,
                    d * sizeof(double) + (size_t)fa_pack_chunk(kern) * (d > dp ? d : dp) * f + dp * 2 * f);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_P8, "p u8", v8 ? bm : 0, bn);
    fa_layout_array(&plan->thread, FA_FWD_THREAD_PSCALE, "p scales", v8 ? bm : 0, f);
    if (plan->group.overflow || plan->thread.overflow)
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "workspace size overflows size_t");

    /* A pass packs just enough groups to give every thread about 16 work
     * items (finer items even out causal's unequal ones and the barrier at
     * the end of each pass), so the workspace holds a few groups' K/V rather
     * than all of them; never more than the byte budget, always one. One
     * thread has nothing to even out: it packs one group at a time, whose
     * panels then stay in its L2 for the q-blocks. */
    const size_t group_bytes = plan->group.size;
    int64_t groups = pb->batch * pb->heads_kv;
    int64_t items_per_group = pb->group * ((pb->seq_q + plan->block_m - 1) / plan->block_m);
    if (pb->cu_q && pb->batch > 0) { /* the mean over the sequences' own q-blocks */
        int64_t blocks = 0;
        for (int64_t b = 0; b < pb->batch; b++)
            blocks += (fa_seq_q_of(pb, b) + plan->block_m - 1) / plan->block_m;
        items_per_group = pb->group * ((blocks + pb->batch - 1) / pb->batch);
    }
    if (items_per_group < 1) items_per_group = 1;
    int64_t per_pass = (16 * (int64_t)plan->threads + items_per_group - 1) / items_per_group;
    const int64_t budget = group_bytes ? (int64_t)(FA_PACK_BUDGET_BYTES / group_bytes) : groups;
    if (per_pass > budget) per_pass = budget;
    if (plan->threads == 1) per_pass = 1;
    if (per_pass > groups) per_pass = groups;
    if (per_pass < 1) per_pass = 1;
    per_pass = even_passes(groups, per_pass, plan->threads, budget);
    plan->groups_per_pass = per_pass;

    fa_layout_init(&plan->ws, "fwd workspace");
    fa_layout_array(&plan->ws, FA_FWD_WS_GROUPS, "groups", (size_t)per_pass, group_bytes);
    fa_layout_array(&plan->ws, FA_FWD_WS_THREADS, "threads", (size_t)plan->threads, plan->thread.size);
    const size_t qb = (size_t)((pb->seq_q + plan->block_m - 1) / plan->block_m);
    const size_t kb = (size_t)((pb->seq_k + plan->block_n - 1) / plan->block_n);
    size_t tiles = 0;
    if (pb->mask && (!fa_mul_size((size_t)(pb->mask->batch * pb->mask->heads), qb, &tiles) ||
                     !fa_mul_size(tiles, kb, &tiles)))
        return fa_fail(FLASHATTN_ERR_OVERFLOW, "mask tile summary overflows size_t");
    fa_layout_array(&plan->ws, FA_FWD_WS_TILES, "mask tiles", 1, tiles);
    fa_layout_array(&plan->ws, FA_FWD_WS_SEQS, "sequence tiles", plan->per_seq ? (size_t)pb->batch + 1 : 0,
                    sizeof(fa_fwd_seq_tiles));
    fa_layout_array(&plan->ws, FA_FWD_WS_SHARE, "work ranges", 2 * (size_t)plan->threads, sizeof(fa_share_range));
    if (plan->ws.overflow) return fa_fail(FLASHATTN_ERR_OVERFLOW, "workspace size overflows size_t");
    plan->workspace_bytes = fa_layout_workspace_bytes(&plan->ws);
    return FLASHATTN_OK;
}
