/*
 * flashattn tune: sweep block_m x block_n for one shape on this machine,
 * print the table (time, GFLOP/s, % of the measured FP32 peak, max error
 * against FP64, workspace), mark the best and the automatic rule's choice,
 * and with --save store the best in the tuning file the library reads.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "peak.h"
#include "placement.h"
#include "shape_args.h"
#include "tool/tool.h"
#include "tune_sweep.h"

/* Powers of two and their midpoints: the multiples of every MR and NR in
 * use (4, 6, 8, 12, 14, 16, 32, 64) that matter, few enough points for a
 * sweep well under two minutes at seq 4096. */
static const int grid[] = {16, 32, 48, 64, 96, 128, 192, 256, 384, 512};
#define GRID_N ((int)(sizeof grid / sizeof grid[0]))
#define MAX_POINTS (SHAPE_MAX_BLOCKS * SHAPE_MAX_BLOCKS + 1)

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn tune --seq N --head-dim D [--dtype T] [--causal] [--heads H]\n"
            "                      [--batch B] [--threads T] [--block-m LIST] [--block-n LIST]\n"
            "                      [--reps R] [--save] [--tune-file PATH]\n\n"
            "Times the forward pass for every block_m x block_n (default grid 16..512, block_n\n"
            "multiples of the kernel's NR only) and prints the table with the best marked.\n\n"
            "%s"
            "                   LIST: comma-separated values to sweep instead of the grid\n"
            "  --out-dtype T    O's dtype (default: --dtype); f32 shows the error of the\n"
            "                   computation without the final rounding of O\n"
            "  --sigma S        Q and K drawn from N(0, S^2) (default 1; larger S: peakier\n"
            "                   softmax rows, the hard case for the online softmax)\n"
            "  --reps R         timed rounds over every point, best kept (default 2)\n"
            "  --confirm C      the 3 fastest points and the automatic one are then timed\n"
            "                   afresh in C alternating rounds (marked c), and the best is\n"
            "                   the fastest of them: the sweep's own minimum is biased low\n"
            "                   (default 3; 0: the sweep's minimum)\n"
            "  --save           store the best tiles in the tuning file (keyed by CPU model,\n"
            "                   ISA, head_dim, dtype, causal); forward calls with automatic\n"
            "                   tiles use them when FLASHATTN_TUNE_FILE names that file\n"
            "  --tune-file P    the file --save writes (default: $FLASHATTN_TUNE_FILE, else\n"
            "                   ./flashattn_tune.tsv)\n\n"
            "ms: wall time, best of R rounds over all points; cpu ms: the process's CPU time\n"
            "per thread (preemption by other processes does not count). max err: max |O - FP64\n"
            "reference| over sampled rows (the first, middle and last 16 of every head).\n"
            "GFLOP/s and %% of peak (the FP32 FMA peak measured now) come from ms. Threads are\n"
            "pinned as for bench.\n",
            shape_args_help);
}

static const char *size_text(double bytes, char *buf, size_t n) {
    if (bytes >= 1 << 20) snprintf(buf, n, "%.1f MiB", bytes / (1 << 20));
    else snprintf(buf, n, "%.0f KiB", bytes / 1024);
    return buf;
}

/* Insert (bm, bn) in (block_m, block_n) order unless it is there. */
static int add_point(tune_point *pts, int n, int bm, int bn) {
    int at = 0;
    while (at < n && (pts[at].block_m < bm || (pts[at].block_m == bm && pts[at].block_n < bn))) at++;
    if (at < n && pts[at].block_m == bm && pts[at].block_n == bn) return n;
    memmove(&pts[at + 1], &pts[at], (size_t)(n - at) * sizeof *pts);
    memset(&pts[at], 0, sizeof pts[at]);
    pts[at].block_m = bm, pts[at].block_n = bn;
    return n + 1;
}

/* The grid, without points that differ only past the shape's end (block_m
 * beyond seq, block_n beyond seq rounded to NR run the same tiles). */
static int build_grid(const shape_args *s, int nr, tune_point *pts) {
    int bms[SHAPE_MAX_BLOCKS], bns[SHAPE_MAX_BLOCKS], nm = 0, nn = 0, n = 0;
    if (s->n_block_m) memcpy(bms, s->block_m, sizeof bms), nm = s->n_block_m;
    else
        for (int i = 0; i < GRID_N; i++)
            if (nm == 0 || bms[nm - 1] < s->seq) bms[nm++] = grid[i];
    const int64_t keys = (s->seq + nr - 1) / nr * nr;
    if (s->n_block_n) memcpy(bns, s->block_n, sizeof bns), nn = s->n_block_n;
    else
        for (int i = 0; i < GRID_N; i++)
            if (grid[i] % nr == 0 && (nn == 0 || bns[nn - 1] < keys)) bns[nn++] = grid[i];
    if (nn == 0) bns[nn++] = nr; /* NR above the grid */
    for (int i = 0; i < nm; i++)
        for (int j = 0; j < nn; j++) n = add_point(pts, n, bms[i], bns[j]);
    return n;
}

static int save_best(const shape_args *s, const char *isa, const tune_point *best, int threads,
                     const char *path) {
    fa_tune_entry e;
    char why[512];
    memset(&e, 0, sizeof e);
    fa_tune_key_make(&e.key, isa, s->head_dim, s->dtype, s->causal);
    e.block_m = best->block_m, e.block_n = best->block_n;
    snprintf(e.note, sizeof e.note, "seq %lld heads %lld batch %lld threads %d: %.2f ms",
             (long long)s->seq, (long long)s->heads, (long long)s->batch, threads, best->ms);
    if (fa_tune_save(path, &e, why, sizeof why) != 0) {
        fprintf(stderr, "flashattn tune: --save: %s\n", why);
        return 1;
    }
    printf("saved %d x %d for (%s, %s, head_dim %lld, %s, %s) in %s\n", e.block_m, e.block_n,
           e.key.cpu, isa, (long long)s->head_dim, shape_dtype_name(s->dtype),
           s->causal ? "causal" : "non-causal", path);
    const char *env = getenv("FLASHATTN_TUNE_FILE");
    char full[PATH_MAX];
    if (!env || strcmp(env, path) != 0)
        printf("use it with: export FLASHATTN_TUNE_FILE=%s\n", realpath(path, full) ? full : path);
    return 0;
}

int cmd_tune(int argc, char **argv) {
    shape_args s;
    int reps = 2, confirm = 3, save = 0;
    const char *tune_file = NULL, *out_name = NULL;
    double sigma = 1.0;
    fa_cli_place_threads(argc, argv);
    shape_args_init(&s);
    for (int i = 1; i < argc; i++) {
        int r = shape_args_take(&s, "tune", argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--save") == 0) {
            save = 1;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 1000) {
                fprintf(stderr, "flashattn tune: --reps must be 1..1000\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--confirm") == 0 && i + 1 < argc) {
            confirm = atoi(argv[++i]);
            if (confirm < 0 || confirm > 1000) {
                fprintf(stderr, "flashattn tune: --confirm must be 0..1000\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--tune-file") == 0 && i + 1 < argc) {
            tune_file = argv[++i];
        } else if (strcmp(argv[i], "--sigma") == 0 && i + 1 < argc) {
            sigma = atof(argv[++i]);
            if (!(sigma > 0 && sigma <= 1e3)) {
                fprintf(stderr, "flashattn tune: --sigma must be in (0, 1000]\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--out-dtype") == 0 && i + 1 < argc) {
            out_name = argv[++i];
        } else {
            fprintf(stderr, "flashattn tune: unknown or incomplete option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (shape_args_check(&s, "tune")) return 2;
    flashattn_dtype out_dtype = s.dtype;
    if (out_name) {
        shape_args o;
        char *args[] = {(char *)"tune", (char *)"--dtype", (char *)out_name};
        int at = 1;
        shape_args_init(&o);
        if (shape_args_take(&o, "tune --out-dtype", 3, args, &at) < 0) return 2;
        out_dtype = o.dtype;
    }
    if (!tune_file) tune_file = getenv("FLASHATTN_TUNE_FILE");
    if (!tune_file || !tune_file[0]) tune_file = "flashattn_tune.tsv";

    const fa_kernels *kern = fa_active_kernels();
    if (!kern) {
        fprintf(stderr, "flashattn tune: no kernel path for this CPU\n");
        return 1;
    }
#ifdef _OPENMP
    const int threads = s.threads ? s.threads : omp_get_max_threads();
#else
    const int threads = 1;
#endif
    s.threads = threads;
    static tune_point pts[MAX_POINTS];
    int n = build_grid(&s, kern->nr, pts);

    /* The rule's choice, from the same view of the problem the library
     * takes (planning reads no data, but descriptors need a pointer). */
    static char dummy[64];
    const fa_cpu_caches *cc = fa_cpu_caches_get();
    flashattn_tensor shape = flashattn_tensor_bshd(dummy, s.dtype, s.batch, s.seq, s.heads, s.head_dim);
    flashattn_params p = flashattn_params_default();
    fa_tool_fwd_plan plan;
    p.causal = s.causal, p.num_threads = threads;
    if (fa_tool_plan_fwd(&shape, &shape, &shape, &shape, &p, kern, &plan) != FLASHATTN_OK) {
        fprintf(stderr, "flashattn tune: %s\n", flashattn_last_error());
        return 2;
    }
    const int rule_m = plan.rule_m, rule_n = plan.rule_n;
    if (!s.n_block_m && !s.n_block_n) n = add_point(pts, n, rule_m, rule_n);
    for (int i = 0; i < n; i++) pts[i].is_auto = pts[i].block_m == rule_m && pts[i].block_n == rule_n;

    int team = threads;
    const double peak = fa_peak_compute(fa_peak_widest(), 0, threads, NULL, &team);
    char a[32], b[32];
    printf("flashattn tune: seq %lld, head_dim %lld, %s, %s, batch %lld, heads %lld, %d threads\n",
           (long long)s.seq, (long long)s.head_dim, shape_dtype_name(s.dtype),
           s.causal ? "causal" : "non-causal", (long long)s.batch, (long long)s.heads, threads);
    printf("kernel %s (MR %d, NR %d); caches L1d %s, L2 %s per core (%s); %s\n", kern->isa,
           kern->mr, kern->nr, size_text((double)cc->l1d_bytes, a, sizeof a),
           size_text((double)cc->l2_bytes, b, sizeof b), cc->source, fa_cli_placement());
    printf("peak %.1f GFLOP/s (FP32 FMA, %d threads, measured now)\n", peak, team);
    fflush(stdout);

    tune_info info;
    if (tune_sweep(&s, out_dtype, sigma, reps, confirm, pts, n, &info)) return 1;
    printf("ms, cpu ms: best of %d rounds (points marked c: of %d fresh rounds); max err: max |O - FP64|\n"
           "over %d sampled rows of each of %lld heads; ", reps, confirm, info.sampled_rows,
           (long long)(s.batch * s.heads));
    printf("O in %s; Q, K ~ N(0, %g^2); plain f32 standard attention on the same rows: %.2e\n\n",
           shape_dtype_name(out_dtype), sigma, info.plain_err);

    int best = -1, rule = -1;
    /* With confirmation rounds, the best is the fastest of the re-timed. */
    for (int i = 0; i < n; i++) {
        if (pts[i].ms >= 0 && (!confirm || pts[i].confirmed) && (best < 0 || pts[i].ms < pts[best].ms))
            best = i;
        if (pts[i].block_m == rule_m && pts[i].block_n == rule_n) rule = i;
    }
    printf("block_m  block_n         ms     cpu ms   GFLOP/s  %% peak    max err   workspace\n");
    for (int i = 0; i < n; i++) {
        const tune_point *t = &pts[i];
        printf("%7d  %7d  ", t->block_m, t->block_n);
        if (t->ms < 0) {
            printf("not run: %s\n", t->why);
            continue;
        }
        const double gf = info.flops / (t->ms * 1e6);
        printf("%9.2f  %9.2f  %8.1f  %6.1f  %9.2e  %10s", t->ms, t->cpu_ms, gf, 100.0 * gf / peak, t->max_err,
               size_text((double)t->workspace, a, sizeof a));
        printf(" %s%s%s\n", t->confirmed && confirm ? "c" : " ", i == best ? "  * best" : "",
               i == rule ? "  auto" : "");
    }
    if (best < 0) {
        fprintf(stderr, "flashattn tune: no point ran\n");
        return 1;
    }
    printf("\nbest %d x %d: %.2f ms", pts[best].block_m, pts[best].block_n, pts[best].ms);
    if (rule >= 0 && pts[rule].ms >= 0)
        printf("; automatic rule %d x %d: %.2f ms (%+.1f%%)", rule_m, rule_n, pts[rule].ms,
               100.0 * (pts[rule].ms / pts[best].ms - 1.0));
    printf("\n");
    char warning[512];
    if (fa_tune_take_warning(warning, sizeof warning)) fprintf(stderr, "warning: %s\n", warning);
    return save ? save_best(&s, kern->isa, &pts[best], threads, tune_file) : 0;
}
