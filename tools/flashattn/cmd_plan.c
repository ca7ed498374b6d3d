/*
 * flashattn plan: an analytic model of one forward pass on a given piece
 * of hardware (plan_model.h): on-chip footprint against capacity, off-chip
 * bytes of standard and flash attention, arithmetic intensity and roofline
 * time. `--hw cpu` is this machine (detected caches, peak and bandwidth
 * measured now, the library's own tile choice) and can --measure the real
 * run beside the prediction; other names come from data/hw_profiles.tsv.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "hw_profiles.h"
#include "peak.h"
#include "placement.h"
#include "plan_model.h"
#include "reference/random.h"
#include "shape_args.h"
#include "timing.h"
#include "tool/tool.h"

#define BW_ARRAY_BYTES ((size_t)256 << 20) /* far beyond any L3 */
#define MEASURE_REPS 3

typedef struct {
    shape_args s;
    const char *hw, *profiles;
    int measure, list;
} plan_opts;

/* What the report prints, whatever the hardware. */
typedef struct {
    plan_input in;
    plan_counts c;
    double peak_flops, bw;      /* FLOP/s, bytes/s */
    double tile_cap, acc_cap;   /* bytes; acc_cap 0: S/P and O share the tile buffer */
    const char *tile_buffer, *acc_buffer, *tiles_from;
} report;

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn plan [--hw NAME] --seq N --head-dim D [--dtype T] [--causal]\n"
            "                      [--heads H] [--batch B] [--threads T] [--block-m M]\n"
            "                      [--block-n N] [--measure] [--profiles PATH] [--list]\n\n"
            "An analytic model of one forward pass: on-chip footprint against capacity,\n"
            "off-chip bytes of standard and of flash attention, arithmetic intensity and\n"
            "the roofline time max(FLOPs / peak, bytes / bandwidth).\n\n"
            "  --hw NAME        cpu (default: this machine, caches detected, peak and\n"
            "                   bandwidth measured now) or a profile of --list\n"
            "%s"
            "                   (default: the library's choice on cpu, else the largest\n"
            "                   square power-of-two tile that fits on chip)\n"
            "  --measure        (cpu) also run the forward pass and print the measured time\n"
            "  --profiles PATH  the profile file (default: $FLASHATTN_HW_PROFILES, else\n"
            "                   data/hw_profiles.tsv found from the executable)\n"
            "  --list           the profiles, with the source of their figures\n",
            shape_args_help);
}

static const char *kib(double bytes, char *buf, size_t n) {
    snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    return buf;
}

static const char *gb(double bytes, char *buf, size_t n) {
    if (bytes >= 1e9) snprintf(buf, n, "%.2f GB", bytes / 1e9);
    else snprintf(buf, n, "%.2f MB", bytes / 1e6);
    return buf;
}

static void fit_line(const char *where, double used, double cap) {
    char a[32], b[32], label[128];
    snprintf(label, sizeof label, "= in %s", where);
    printf("  %-52s %12s of %s (%.0f%%)  %s\n", label, kib(used, a, sizeof a), kib(cap, b, sizeof b),
           100.0 * used / cap, used <= cap ? "fits" : "OVERFLOW");
}

static void piece(const char *name, const char *formula, int64_t bytes) {
    char a[32];
    printf("  %-13s %-38s %12s\n", name, formula, kib((double)bytes, a, sizeof a));
}

static void print_report(const report *r) {
    const plan_input *in = &r->in;
    const plan_counts *c = &r->c;
    char a[32], b[32], f[96];
    const long long bm = in->block_m, bn = in->block_n, d = in->head_dim, dp = in->head_dim_pad;
    printf("tiles      block_m %lld x block_n %lld (%s)\n\n", bm, bn, r->tiles_from);
    printf("on-chip footprint per core\n");
    snprintf(f, sizeof f, "%lld x %lld x %d B", bm, d, in->tile_bytes);
    piece("Q tile", f, c->q_tile);
    snprintf(f, sizeof f, "%d x %lld x (%lld + %lld) x %d B", in->kv_buffers, bn, d, dp, in->tile_bytes);
    piece(in->kv_buffers > 1 ? "K, V tiles x2" : "K, V tiles", f, c->kv_tiles);
    const double tiles = (double)(c->q_tile + c->kv_tiles), acc = (double)(c->s_tile + c->o_acc + c->stats);
    if (r->acc_cap > 0) fit_line(r->tile_buffer, tiles, r->tile_cap);
    snprintf(f, sizeof f, "%lld x %lld x 4 B", bm, bn);
    piece("S/P tile", f, c->s_tile);
    snprintf(f, sizeof f, "%lld x %lld x 4 B", bm, dp);
    piece("O acc", f, c->o_acc);
    snprintf(f, sizeof f, "2 x %lld x 4 B", bm);
    piece("max, sum", f, c->stats);
    if (r->acc_cap > 0) fit_line(r->acc_buffer, acc, r->acc_cap);
    else fit_line(r->tile_buffer, tiles + acc, r->tile_cap);

    const double tc = c->flops / r->peak_flops;
    const double ts = plan_roofline(c->flops, c->bytes_standard, r->peak_flops, r->bw);
    const double tf = plan_roofline(c->flops, c->bytes_flash, r->peak_flops, r->bw);
    printf("\nFLOPs      %.3g (4 x batch x heads x %.4g visible pairs x head_dim)\n", c->flops,
           c->visible_pairs / (double)(in->batch * in->heads));
    printf("                               standard          flash\n");
    printf("off-chip bytes           %14s %14s   (flash / standard = %.3g)\n",
           gb(c->bytes_standard, a, sizeof a), gb(c->bytes_flash, b, sizeof b),
           c->bytes_flash / c->bytes_standard);
    printf("intensity (FLOP/byte)    %14.1f %14.1f   (machine balance %.1f)\n",
           c->flops / c->bytes_standard, c->flops / c->bytes_flash, r->peak_flops / r->bw);
    printf("memory time (ms)         %14.3f %14.3f\n", 1e3 * c->bytes_standard / r->bw,
           1e3 * c->bytes_flash / r->bw);
    printf("compute time (ms)        %14.3f %14.3f\n", 1e3 * tc, 1e3 * tc);
    printf("roofline time (ms)       %14.3f %14.3f   %s-bound / %s-bound\n", 1e3 * ts, 1e3 * tf,
           ts > tc ? "memory" : "compute", tf > tc ? "memory" : "compute");
}

/* ---- other hardware ----------------------------------------------------- */

/* Largest power-of-two square tile whose footprint fits both buffers. */
static int fit_square(report *r) {
    for (int t = 512; t >= 16; t /= 2) {
        r->in.block_m = r->in.block_n = t;
        plan_count(&r->in, &r->c);
        const double tiles = (double)(r->c.q_tile + r->c.kv_tiles);
        const double acc = (double)(r->c.s_tile + r->c.o_acc + r->c.stats);
        if (r->acc_cap > 0 ? tiles <= r->tile_cap && acc <= r->acc_cap : tiles + acc <= r->tile_cap)
            return t;
    }
    return 16;
}

static int plan_profile(const plan_opts *o, const hw_profile *hw) {
    const shape_args *s = &o->s;
    report r;
    memset(&r, 0, sizeof r);
    flashattn_dtype peak_dt = s->dtype;
    if (hw->tflops[peak_dt] <= 0) peak_dt = hw->tflops[FLASHATTN_F16] > 0 ? FLASHATTN_F16 : FLASHATTN_BF16;
    const int eb = (int)flashattn_dtype_size(s->dtype);
    r.in = (plan_input){.batch = s->batch, .heads = s->heads, .heads_kv = s->heads, .seq_q = s->seq,
                        .seq_k = s->seq, .head_dim = s->head_dim, .head_dim_pad = s->head_dim,
                        .causal = s->causal, .in_bytes = eb, .tile_bytes = eb, .kv_stream_bytes = eb,
                        .pack_kv = 0, .kv_buffers = 2};
    r.peak_flops = hw->tflops[peak_dt] * 1e12;
    r.bw = hw->mem_gbs * 1e9;
    r.tile_cap = hw->tile_kib * 1024, r.acc_cap = hw->acc_kib * 1024;
    r.tile_buffer = hw->tile_buffer, r.acc_buffer = hw->acc_buffer;
    const int auto_tile = fit_square(&r);
    r.in.block_m = s->n_block_m ? s->block_m[0] : auto_tile;
    r.in.block_n = s->n_block_n ? s->block_n[0] : auto_tile;
    r.tiles_from = s->n_block_m || s->n_block_n ? "given" : "largest square power of two that fits";
    plan_count(&r.in, &r.c);

    printf("flashattn plan: one forward pass on %s, batch %lld x heads %lld, seq %lld, head_dim %lld, "
           "%s, %s\n", hw->name, (long long)s->batch, (long long)s->heads, (long long)s->seq,
           (long long)s->head_dim, shape_dtype_name(s->dtype), s->causal ? "causal" : "non-causal");
    printf("hardware   %s: %d cores, %.4g TFLOP/s %s, %.4g GB/s\n", hw->kind, hw->cores,
           hw->tflops[peak_dt], shape_dtype_name(peak_dt), hw->mem_gbs);
    if (peak_dt != s->dtype)
        printf("           (no %s figure for this hardware: %s inputs are assumed converted to %s)\n",
               shape_dtype_name(s->dtype), shape_dtype_name(s->dtype), shape_dtype_name(peak_dt));
    printf("source     %s\n", hw->source);
    print_report(&r);
    printf("note: every q-block's K/V read is counted as off-chip traffic (the FlashAttention paper's\n"
           "      count); an L2 shared by the cores working on one head serves many of them, so\n"
           "      flash's memory time is an upper bound.\n");
    return 0;
}

/* ---- this machine --------------------------------------------------------- */

static int plan_cpu(const plan_opts *o) {
    const shape_args *s = &o->s;
    const fa_kernels *kern = fa_active_kernels();
    const fa_cpu_caches *cc = fa_cpu_caches_get();
    static char dummy[64]; /* planning reads no data, but descriptors need a pointer */
    report r;
    fa_tool_fwd_plan plan;
    memset(&r, 0, sizeof r);
    if (!kern) {
        fprintf(stderr, "flashattn plan: no kernel path for this CPU\n");
        return 1;
    }
#ifdef _OPENMP
    const int threads = s->threads ? s->threads : omp_get_max_threads();
#else
    const int threads = 1;
#endif
    flashattn_params p = flashattn_params_default();
    p.causal = s->causal, p.num_threads = threads;
    p.block_m = s->n_block_m ? s->block_m[0] : 0;
    p.block_n = s->n_block_n ? s->block_n[0] : 0;
    flashattn_tensor q = flashattn_tensor_bshd(dummy, s->dtype, s->batch, s->seq, s->heads, s->head_dim);
    if ((s->n_block_m && fa_tool_check_tile("--block-m", p.block_m, 0, kern)) ||
        (s->n_block_n && fa_tool_check_tile("--block-n", p.block_n, 1, kern)) ||
        fa_tool_plan_fwd(&q, &q, &q, &q, &p, kern, &plan)) {
        fprintf(stderr, "flashattn plan: %s\n", flashattn_last_error());
        return 2;
    }
    const int eb = (int)flashattn_dtype_size(s->dtype);
    r.in = (plan_input){.batch = s->batch, .heads = s->heads, .heads_kv = s->heads, .seq_q = s->seq,
                        .seq_k = s->seq, .head_dim = s->head_dim, .head_dim_pad = plan.head_dim_pad,
                        .causal = s->causal, .in_bytes = eb, .tile_bytes = 4, .kv_stream_bytes = 4,
                        .pack_kv = 1, .kv_buffers = 1, .block_m = plan.block_m, .block_n = plan.block_n};
    plan_count(&r.in, &r.c);
    char from[192];
    snprintf(from, sizeof from, "block_m from %s, block_n from %s%s", plan.source_m, plan.source_n,
             plan.as_decode
                 ? "; these sizes run as decode instead: plan/fwd_route.h"
                 : "");
    r.tiles_from = from;
    r.tile_cap = (double)(cc->l2_bytes > 0 ? cc->l2_bytes : FA_TILE_DEFAULT_L2);
    r.tile_buffer = cc->l2_bytes > 0 ? "L2 (per core, detected)" : "L2 (unknown: 256 KiB assumed)";

    int team = threads;
    fa_peak_array arr;
    const fa_peak_kernels *pk = fa_peak_widest();
    /* the dot-product route's products run at its instructions' peak */
    const int loop = fa_peak_loop_for(pk, kern->isa, plan.bf16_dot);
    r.peak_flops = 1e9 * fa_peak_compute(pk, loop, threads, NULL, &team);
    if (fa_peak_array_alloc(&arr, BW_ARRAY_BYTES, threads) != 0) {
        fprintf(stderr, "flashattn plan: no memory for the bandwidth array\n");
        return 1;
    }
    r.bw = 1e9 * fa_peak_bandwidth(pk, &arr, threads);
    fa_peak_array_free(&arr);

    printf("flashattn plan: one forward pass on this CPU, batch %lld x heads %lld, seq %lld, head_dim "
           "%lld, %s, %s\n", (long long)s->batch, (long long)s->heads, (long long)s->seq,
           (long long)s->head_dim, shape_dtype_name(s->dtype), s->causal ? "causal" : "non-causal");
    printf("hardware   cpu: %d threads (%s), kernel %s (MR %d, NR %d)\n", team, fa_cli_placement(),
           kern->isa, kern->mr, kern->nr);
    printf("           measured now: %.1f GFLOP/s %s peak, %.1f GB/s read bandwidth\n",
           r.peak_flops / 1e9,
           loop == FA_PEAK_AMX ? "AMX BF16 tile" : loop == FA_PEAK_BF16 ? "BF16 dot-product" : "FP32 FMA",
           r.bw / 1e9);
    printf("           caches: L1d %lld KiB, L2 %lld KiB, L3 %lld KiB (%s); %s\n",
           (long long)(cc->l1d_bytes >> 10), (long long)(cc->l2_bytes >> 10),
           (long long)(cc->l3_bytes >> 10), cc->source,
           plan.bf16_dot ? "bf16 dot-product route: Q, K, V and P are bf16 on chip, the footprints "
                           "below (f32) are upper bounds"
                         : "every element is f32 on chip (the kernels widen when loading Q and "
                           "packing K, V)");
    print_report(&r);

    const fa_tile_footprint fp = plan.footprint;
    const double l1 = (double)(cc->l1d_bytes > 0 ? cc->l1d_bytes : FA_TILE_DEFAULT_L1D);
    char a[32];
    printf("\ninner steps (L1d %s)\n", kib(l1, a, sizeof a));
    char f[96];
    snprintf(f, sizeof f, "one K panel + %d rows of Q", kern->mr);
    printf("  %-13s %-38s %12s  %s\n", "Q.K^T step", f, kib((double)fp.qk_step, a, sizeof a),
           fp.qk_step <= l1 ? "fits" : "OVERFLOW");
    snprintf(f, sizeof f, "one %d-column V slice + %d rows of P", kern->nr, kern->mr);
    printf("  %-13s %-38s %12s  %s\n", "P.V step", f, kib((double)fp.pv_step, a, sizeof a),
           fp.pv_step <= l1 ? "fits" : "OVERFLOW");
    printf("note: off-chip here means beyond L2; packed K/V re-reads may hit L3, which is faster than\n"
           "      the DRAM bandwidth used above, so the memory times are upper bounds.\n");
    char warning[512];
    if (fa_tune_take_warning(warning, sizeof warning)) fprintf(stderr, "warning: %s\n", warning);
    if (!o->measure) return 0;

    uint64_t seed = 0x91a7;
    const size_t bytes = (size_t)(s->batch * s->seq * s->heads * s->head_dim) * (size_t)eb;
    flashattn_tensor t[4];
    void *ws = malloc(plan.workspace_bytes);
    int ok = ws != NULL;
    for (int i = 0; i < 4; i++) {
        t[i] = flashattn_tensor_bshd(malloc(bytes), s->dtype, s->batch, s->seq, s->heads, s->head_dim);
        ok = ok && t[i].data;
        if (t[i].data && i < 3) fa_fill_normal(&t[i], &seed, 1.0);
    }
    double best = -1.0;
    p.block_m = plan.block_m, p.block_n = plan.block_n;
    for (int rep = 0; ok && rep <= MEASURE_REPS; rep++) {
        const double t0 = fa_cli_seconds();
        ok = flashattn_fwd(&t[0], &t[1], &t[2], &t[3], NULL, &p, ws, plan.workspace_bytes) == FLASHATTN_OK;
        const double ms = 1e3 * (fa_cli_seconds() - t0);
        if (rep > 0 && (best < 0 || ms < best)) best = ms; /* rep 0 warms up */
    }
    for (int i = 0; i < 4; i++) free(t[i].data);
    free(ws);
    if (!ok) {
        fprintf(stderr, "flashattn plan: --measure failed: %s\n", flashattn_last_error()[0]
                                                                     ? flashattn_last_error()
                                                                     : "out of memory");
        return 1;
    }
    const double pred = 1e3 * plan_roofline(r.c.flops, r.c.bytes_flash, r.peak_flops, r.bw);
    printf("\nmeasured   flash %.3f ms (best of %d), predicted %.3f ms: %.0f%% of the roofline, "
           "%.1f GFLOP/s\n", best, MEASURE_REPS, pred, 100.0 * pred / best, r.c.flops / best / 1e6);
    return 0;
}

/* ---- the command ------------------------------------------------------------ */

static int list_profiles(const hw_profile *hw, int n, const char *path) {
    printf("cpu         this machine: detected caches, peak and bandwidth measured at run time\n");
    for (int i = 0; i < n; i++)
        printf("%-11s %s, %d cores, %.0f KiB %s, %.0f KiB %s, %.4g/%.4g/%.4g TFLOP/s f16/bf16/f32, "
               "%.4g GB/s\n            source: %s\n",
               hw[i].name, hw[i].kind, hw[i].cores, hw[i].tile_kib, hw[i].tile_buffer, hw[i].acc_kib,
               hw[i].acc_buffer, hw[i].tflops[FLASHATTN_F16], hw[i].tflops[FLASHATTN_BF16],
               hw[i].tflops[FLASHATTN_F32], hw[i].mem_gbs, hw[i].source);
    printf("(profiles from %s)\n", path);
    return 0;
}

int cmd_plan(int argc, char **argv) {
    plan_opts o;
    memset(&o, 0, sizeof o);
    o.hw = "cpu";
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--hw") == 0) o.hw = argv[i + 1];
    if (strcasecmp(o.hw, "cpu") == 0) fa_cli_place_threads(argc, argv);
    shape_args_init(&o.s);
    for (int i = 1; i < argc; i++) {
        int r = shape_args_take(&o.s, "plan", argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--measure") == 0) {
            o.measure = 1;
        } else if (strcmp(argv[i], "--list") == 0) {
            o.list = 1;
        } else if (strcmp(argv[i], "--hw") == 0 && i + 1 < argc) {
            o.hw = argv[++i];
        } else if (strcmp(argv[i], "--profiles") == 0 && i + 1 < argc) {
            o.profiles = argv[++i];
        } else {
            fprintf(stderr, "flashattn plan: unknown or incomplete option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (o.s.n_block_m > 1 || o.s.n_block_n > 1) {
        fprintf(stderr, "flashattn plan: --block-m and --block-n take one value each\n");
        return 2;
    }
    const int cpu = strcasecmp(o.hw, "cpu") == 0;
    static hw_profile hw[HW_MAX_PROFILES];
    char path[4096], why[512];
    int n = 0;
    if (o.list || !cpu) {
        if (o.profiles) snprintf(path, sizeof path, "%s", o.profiles);
        else if (hw_profiles_find(path, sizeof path) != 0) {
            fprintf(stderr, "flashattn plan: cannot find data/hw_profiles.tsv (set FLASHATTN_HW_PROFILES "
                            "or --profiles)\n");
            return 1;
        }
        if ((n = hw_profiles_load(path, hw, HW_MAX_PROFILES, why, sizeof why)) < 0) {
            fprintf(stderr, "flashattn plan: profile file %s: %s\n", path, why);
            return 1;
        }
    }
    if (o.list) return list_profiles(hw, n, path);
    if (shape_args_check(&o.s, "plan")) return 2;
    if (cpu) return plan_cpu(&o);
    if (o.measure) {
        fprintf(stderr, "flashattn plan: --measure runs on this machine only (--hw cpu)\n");
        return 2;
    }
    const hw_profile *p = hw_profiles_get(hw, n, o.hw);
    if (!p) {
        fprintf(stderr, "flashattn plan: no profile '%s' in %s (see --list)\n", o.hw, path);
        return 2;
    }
    return plan_profile(&o, p);
}
