/*
 * The output of `flashattn bench --varlen`: the lengths' summary, the check
 * lines, the table and the JSON rows (bench_varlen.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_varlen.h"
#include "json_out.h"
#include "placement.h"
#include "tool/tool.h"

/* Variant names in JSON keys. */
static const char *vl_variant_key(int v) {
    return v == VL_VARLEN ? "varlen" : v == VL_PADDED ? "padded" : "perseq";
}

const char *vl_dtype_name(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

/* Pairs the mask lets through in a dense call of seq rows, by the
 * library's own rules. */
static double pairs_of(const vl_opts *o, int64_t seq, int causal) {
    static char unread; /* the tensors' data: never read */
    flashattn_tensor q = flashattn_tensor_bshd(&unread, o->dtype, 1, seq, o->heads, o->head_dim);
    flashattn_tensor k = flashattn_tensor_bshd(&unread, o->dtype, 1, seq, o->heads_kv, o->head_dim);
    flashattn_params p = flashattn_params_default();
    p.causal = causal;
    const double n = fa_tool_visible_pairs(&q, &k, &k, &q, &p);
    return n > 0.0 ? n : 0.0;
}

void vl_flops_of(const vl_opts *o, const vl_batch *b, int causal, double *useful, double *padded) {
    const double per_pair = 4.0 * (double)o->heads * (double)o->head_dim * (o->bwd ? 2.5 : 1.0);
    double u = 0.0;
    for (int64_t i = 0; i < b->n; i++) u += pairs_of(o, b->len[i], causal);
    *useful = per_pair * u;
    *padded = per_pair * (double)b->n * pairs_of(o, b->longest, causal);
}

void vl_print_check(const vl_opts *o, const vl_row *r) {
    const char *names[3] = {o->bwd ? "dQ" : "O", o->bwd ? "dK" : "LSE", "dV"};
    const int nout = o->bwd ? 3 : 2;
    printf("  %-10s %d thread%s: tiles %dx%d%s: ", r->causal ? "causal," : "non-causal,", r->threads,
           r->threads > 1 ? "s" : " ", r->bm, r->bn, o->bwd ? " deterministic" : "");
    if (r->bits) printf("%s bit-identical", o->bwd ? "dQ, dK, dV" : "O, LSE");
    else {
        printf("DIFFER:");
        for (int i = 0; i < nout; i++) printf(" %s %.3g", names[i], r->bits_diff[i]);
    }
    if (r->have_auto) {
        printf("; automatic tiles: max |diff|");
        for (int i = 0; i < nout; i++) printf(" %s %.3g", names[i], r->auto_diff[i]);
    }
    printf("\n");
}


void vl_print_lengths(const vl_opts *o, const vl_batch *b) {
    int64_t *sorted = malloc((size_t)b->n * sizeof *sorted);
    printf("lengths (%lld):", (long long)b->n);
    for (int64_t i = 0; i < b->n; i++) printf(" %lld", (long long)b->len[i]);
    printf("\n");
    if (sorted) {
        memcpy(sorted, b->len, (size_t)b->n * sizeof *sorted);
        for (int64_t i = 1; i < b->n; i++) /* insertion sort: n is small */
            for (int64_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                const int64_t t = sorted[j];
                sorted[j] = sorted[j - 1], sorted[j - 1] = t;
            }
        printf("  count %lld, total %lld, min %lld, median %lld, max %lld, mean %.1f\n",
               (long long)b->n, (long long)b->total, (long long)sorted[0],
               (long long)sorted[b->n / 2], (long long)b->longest, (double)b->total / (double)b->n);
        free(sorted);
    }
    for (int m = 0; m < o->nmasks; m++) {
        double useful, padded;
        vl_flops_of(o, b, o->masks[m], &useful, &padded);
        printf("  %s %s: useful %.4g GFLOP, padded (%lld x %lld) %.4g GFLOP, padded/useful %.2f\n",
               o->masks[m] ? "causal" : "non-causal", o->bwd ? "backward" : "forward", useful / 1e9,
               (long long)b->n, (long long)b->longest, padded / 1e9, padded / useful);
    }
}

static void fmt_time(char *buf, size_t n, const vl_row *r, int v) {
    if (r->ms[v] < 0) snprintf(buf, n, "n/a");
    else snprintf(buf, n, "%.1f (%.0f%%)", r->ms[v], 100.0 * (r->hi[v] - r->lo[v]) / r->ms[v]);
}


vl_ratios vl_ratios_of(const vl_opts *o, const vl_batch *b, const vl_row *r, const vl_row *one) {
    vl_ratios x;
    vl_flops_of(o, b, r->causal, &x.useful, &x.padded);
    const double t = r->ms[VL_VARLEN];
    x.vs_padded = r->ms[VL_PADDED] > 0 && t > 0 ? r->ms[VL_PADDED] / t : -1.0;
    x.target_padded = VL_TARGET_PADDED * x.padded / x.useful;
    x.vs_perseq = r->ms[VL_PERSEQ] > 0 && t > 0 ? r->ms[VL_PERSEQ] / t : -1.0;
    x.gflops = t > 0 ? x.useful / (t * 1e6) : -1.0;
    x.scaling = one && one != r && t > 0 ? one->ms[VL_VARLEN] / t : -1.0;
    x.target_scaling = VL_TARGET_SCALING * r->threads;
    return x;
}

void vl_print_table_header(void) {
    printf("\n%-10s | %7s | %14s | %14s | %14s | %10s | %9s | %14s | %10s | %8s | %19s\n", "mask",
           "threads", "varlen ms", "padded ms", "per-seq ms", "FLOP ratio", "vs padded", "target",
           "vs per-seq", "GFLOP/s", "scaling, target");
}

void vl_print_row(const vl_row *r, const vl_ratios *x) {
    char t[VL_VARIANTS][32], vp[16], tp[32], vs[16], sc[40];
    for (int v = 0; v < VL_VARIANTS; v++) fmt_time(t[v], sizeof t[v], r, v);
    snprintf(tp, sizeof tp, ">= %.2fx", x->target_padded);
    if (x->vs_padded > 0) {
        snprintf(vp, sizeof vp, "%.2fx", x->vs_padded);
        snprintf(tp, sizeof tp, ">= %.2fx %s", x->target_padded,
                 x->vs_padded >= x->target_padded ? "PASS" : "MISS");
    } else snprintf(vp, sizeof vp, "n/a");
    if (x->vs_perseq > 0) snprintf(vs, sizeof vs, "%.2fx", x->vs_perseq);
    else snprintf(vs, sizeof vs, "n/a");
    if (x->scaling > 0)
        snprintf(sc, sizeof sc, "%.2fx >= %.2fx %s", x->scaling, x->target_scaling,
                 x->scaling >= x->target_scaling ? "PASS" : "MISS");
    else snprintf(sc, sizeof sc, "n/a");
    printf("%-10s | %7d | %14s | %14s | %14s | %10.2f | %9s | %14s | %10s | %8.1f | %19s\n",
           r->causal ? "causal" : "non-causal", r->threads, t[0], t[1], t[2], x->padded / x->useful,
           vp, tp, vs, x->gflops, sc);
}

void vl_print_json(const vl_opts *o, const vl_batch *b, const vl_row *r, const vl_ratios *x) {
    const char *names[3] = {o->bwd ? "dq" : "o", o->bwd ? "dk" : "lse", "dv"};
    char key[48];
    printf("{\"mode\": \"varlen %s\", \"seqs\": %lld, \"min_len\": %lld, \"max_len\": %lld, "
           "\"seed\": %llu, \"total\": %lld, \"longest\": %lld, \"heads\": %lld, \"heads_kv\": %lld, "
           "\"head_dim\": %lld, \"dtype\": \"%s\", \"causal\": %s, \"threads\": %d, \"isa\": \"%s\", "
           "\"reps\": %d",
           o->bwd ? "backward" : "forward", (long long)o->seqs, (long long)o->min_len,
           (long long)o->max_len, (unsigned long long)o->seed, (long long)b->total,
           (long long)b->longest, (long long)o->heads, (long long)o->heads_kv,
           (long long)o->head_dim, vl_dtype_name(o->dtype), r->causal ? "true" : "false", r->threads,
           flashattn_isa(), o->reps);
    printf(", \"lengths\": [");
    for (int64_t i = 0; i < b->n; i++) printf("%s%lld", i ? ", " : "", (long long)b->len[i]);
    printf("]");
    for (int v = 0; v < VL_VARIANTS; v++) {
        snprintf(key, sizeof key, "%s_ms", vl_variant_key(v));
        fa_json_num(key, r->ms[v], r->ms[v] >= 0);
        snprintf(key, sizeof key, "%s_min_ms", vl_variant_key(v));
        fa_json_num(key, r->lo[v], r->ms[v] >= 0);
        snprintf(key, sizeof key, "%s_max_ms", vl_variant_key(v));
        fa_json_num(key, r->hi[v], r->ms[v] >= 0);
    }
    fa_json_num("useful_flops", x->useful, 1);
    fa_json_num("padded_flops", x->padded, 1);
    fa_json_num("padded_over_useful", x->padded / x->useful, x->useful > 0);
    fa_json_num("varlen_gflops", x->gflops, x->gflops > 0);
    fa_json_num("speedup_vs_padded", x->vs_padded, x->vs_padded > 0);
    fa_json_num("target_vs_padded", x->target_padded, 1);
    printf(", \"pass_vs_padded\": %s", x->vs_padded < 0 ? "null" : x->vs_padded >= x->target_padded ? "true" : "false");
    fa_json_num("speedup_vs_perseq", x->vs_perseq, x->vs_perseq > 0);
    fa_json_num("scaling_vs_1thread", x->scaling, x->scaling > 0);
    fa_json_num("target_scaling", x->target_scaling, x->scaling > 0);
    printf(", \"pass_scaling\": %s", x->scaling < 0 ? "null" : x->scaling >= x->target_scaling ? "true" : "false");
    printf(", \"check_block_m\": %d, \"check_block_n\": %d, \"check_bit_identical\": %s", r->bm, r->bn,
           r->bits ? "true" : "false");
    for (int i = 0; i < (o->bwd ? 3 : 2); i++) {
        snprintf(key, sizeof key, "check_max_abs_%s", names[i]);
        fa_json_num(key, r->bits_diff[i], 1);
        snprintf(key, sizeof key, "auto_max_abs_%s", names[i]);
        fa_json_num(key, r->auto_diff[i], r->have_auto);
    }
    fa_json_str("placement", fa_cli_placement());
    printf("}\n");
}
