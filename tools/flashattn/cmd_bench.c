/*
 * flashattn bench: the source documents' table, seq_len | standard ms |
 * flash ms | speed-up | standard extra memory | flash workspace, plus
 * flash GFLOP/s and its share of this machine's peak, measured at start in
 * the same process on the same threads, and again in each row's rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline/standard.h"
#include "bench.h"
#include "cli.h"
#include "json_out.h"
#include "peak.h"
#include "placement.h"
#include "timing.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Modes: the first is the default. A new mode is one line here and its
 * bench_<mode>.c (see bench.h). */
typedef struct {
    const char *flag, *what;
    bench_run_fn run;
} bench_mode;

static const bench_mode modes[] = {
    {"--fwd", "forward", bench_fwd},
    {"--bwd", "backward", bench_bwd},
};

typedef struct {
    const fa_peak_kernels *kernels; /* the kernel path's loops */
    double gflops;     /* at the bench's thread count, for the dtype's path */
    double one_thread; /* FP32, 1 thread; 0 when the bench runs on 1 thread */
    int team, scaled, loop; /* loop: FA_PEAK_FP32, _BF16 or _AMX */
} bench_peak;

static const char *dtype_name(flashattn_dtype dt) {
    return dt == FLASHATTN_F32 ? "f32" : dt == FLASHATTN_F16 ? "f16" : "bf16";
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn bench [--seq 512,1024,...] [--seq-k ...] [--batch B] [--heads H]\n"
            "                       [--heads-kv HK] [--head-dim D] [--dtype f32|f16|bf16]\n"
            "                       [--causal] [--threads T] [--reps R] [--json] [--no-standard]\n\n"
            "Defaults: --seq 512,1024,2048,4096,8192 (seq_k = seq_q), batch 1, heads 8,\n"
            "heads_kv = heads, head_dim 128, f32, 5 reps (medians, after a warm-up run).\n"
            "--seq-k: one value for every row, or one per --seq value.\n"
            "A row's calls (flash, standard, cblas; --causal: also the unmasked flash call;\n"
            "--bwd: the forward and the backward) are timed in turn, one of each per round, so\n"
            "their ratios compare the same moments of the machine.\n"
            "--causal (forward): the row gives causal/non-causal (JSON: noncausal_ms,\n"
            "causal_over_noncausal).\n"
            "--dtype f16/bf16 (forward): the same call on f32 copies of the inputs is timed\n"
            "too, and the row gives the speed against it (JSON: f32_ms, speed_vs_f32).\n"
            "--threads T > 1 (forward): the same call on 1 thread is timed too, and the row\n"
            "gives the threads' speed-up over it (JSON: one_thread_ms, speedup_vs_1thread).\n"
            "%% peak is against the peak measured at start (best of a few runs); %% rounds\n"
            "against the same loop timed once per round among the row's calls (median, as\n"
            "the row's times; JSON: peak_rounds_gflops, pct_peak_rounds).\n"
            "Modes: ");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        fprintf(f, "%s%s (%s%s)", i ? ", " : "", modes[i].flag, modes[i].what,
                i ? "" : ", the default");
    fprintf(f, ", --decode (KV-cache decode against read bandwidth: see bench --decode --help)");
    fprintf(f, ", --varlen (packed sequences of mixed lengths against padded and per-sequence\n"
               "calls, forward or --bwd: see bench --varlen --help), --precision int8 (the 8-bit\n"
               "Q K^T against the exact forward: see bench --precision --help), --modifiers (softcap, ALiBi,\n"
               "bias and boolean masks against the calls they should cost like), --ring (under\n"
               "mpirun: ring attention across the ranks against one process; builds with MPI only)");
    fprintf(f,
            ".\nStandard attention needing more than %.0f GiB is reported n/a.\n"
            "Threads are pinned (OMP_PROC_BIND=spread OMP_PLACES=cores, by re-running itself)\n"
            "unless you set OMP_PROC_BIND or OMP_PLACES yourself.\n",
            (double)BENCH_STANDARD_LIMIT / (1 << 30));
}

static int parse_list(const char *s, int64_t *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || n == max) return -1;
        out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* 0 ok, 1 --help, 2 error (printed). */
static int parse_args(int argc, char **argv, bench_opts *o, const bench_mode **mode) {
    int64_t seqk[BENCH_MAX_SEQS], v = 0;
    int nseqk = 0;
    memset(o, 0, sizeof *o);
    o->batch = 1, o->heads = 8, o->heads_kv = 0, o->head_dim = 128;
    o->dtype = FLASHATTN_F32, o->reps = 5, o->standard = 1;
    o->nseq = 5;
    for (int i = 0; i < 5; i++) o->seq_q[i] = (int64_t)512 << i;
    *mode = &modes[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--causal")) o->causal = 1;
        else if (!strcmp(a, "--no-standard")) o->standard = 0;
        else if (!val) bad = 1;
        else if (!strcmp(a, "--seq")) bad = (o->nseq = parse_list(val, o->seq_q, BENCH_MAX_SEQS)) < 1, i++;
        else if (!strcmp(a, "--seq-k")) bad = (nseqk = parse_list(val, seqk, BENCH_MAX_SEQS)) < 1, i++;
        else if (!strcmp(a, "--batch")) bad = parse_int(val, 1, 1 << 20, &o->batch), i++;
        else if (!strcmp(a, "--heads")) bad = parse_int(val, 1, 1 << 16, &o->heads), i++;
        else if (!strcmp(a, "--heads-kv")) bad = parse_int(val, 1, 1 << 16, &o->heads_kv), i++;
        else if (!strcmp(a, "--head-dim")) bad = parse_int(val, 1, FLASHATTN_MAX_HEAD_DIM, &o->head_dim), i++;
        else if (!strcmp(a, "--threads")) bad = parse_int(val, 1, FA_PEAK_MAX_THREADS, &v), o->threads = (int)v, i++;
        else if (!strcmp(a, "--reps")) bad = parse_int(val, 1, 1000, &v), o->reps = (int)v, i++;
        else if (!strcmp(a, "--dtype")) {
            i++;
            if (!strcmp(val, "f32")) o->dtype = FLASHATTN_F32;
            else if (!strcmp(val, "f16")) o->dtype = FLASHATTN_F16;
            else if (!strcmp(val, "bf16")) o->dtype = FLASHATTN_BF16;
            else bad = 1;
        } else {
            size_t m = 0;
            while (m < sizeof modes / sizeof modes[0] && strcmp(a, modes[m].flag)) m++;
            if (m == sizeof modes / sizeof modes[0]) {
                fprintf(stderr, "flashattn bench: unknown option '%s'\n\n", a);
                return 2;
            }
            *mode = &modes[m];
        }
        if (bad) {
            fprintf(stderr, "flashattn bench: bad or missing value for %s\n", a);
            return 2;
        }
    }
    if (o->heads_kv == 0) o->heads_kv = o->heads;
    if (o->heads % o->heads_kv) {
        fprintf(stderr, "flashattn bench: --heads must be a multiple of --heads-kv\n");
        return 2;
    }
    if (nseqk != 0 && nseqk != 1 && nseqk != o->nseq) {
        fprintf(stderr, "flashattn bench: --seq-k takes one value or one per --seq value\n");
        return 2;
    }
    for (int i = 0; i < o->nseq; i++) o->seq_k[i] = nseqk == 0 ? o->seq_q[i] : seqk[nseqk == 1 ? 0 : i];
    return 0;
}

#define BENCH_MAX_CALLS 12

void bench_time_together(bench_call *calls, int n, int reps) {
    bench_time_spread(calls, n, reps, NULL, NULL);
}

/* the last bench_time_spread's rounds, in the order they ran */
static double round_ms[BENCH_MAX_CALLS][1000];
static int round_count;

void bench_time_spread(bench_call *calls, int n, int reps, double *min_ms, double *max_ms) {
    static double t[BENCH_MAX_CALLS][1000];
    int failed[BENCH_MAX_CALLS] = {0};
    for (int i = BENCH_MAX_CALLS; i < n; i++) calls[i].ms = -1.0; /* more than it times */
    if (n > BENCH_MAX_CALLS) n = BENCH_MAX_CALLS;
    if (reps > 1000) reps = 1000;
    /* Round -1 is the warm-up (page faults, caches, thread start), in
     * order: a later call may need an earlier one's output, as the
     * backward needs the forward's. Odd rounds go in reverse order, so no
     * call always follows the same one (the first of a round finds the
     * caches as the last one left them). */
    for (int r = -1; r < reps; r++)
        for (int k = 0; k < n; k++) {
            const int i = r > 0 && r % 2 ? n - 1 - k : k;
            if (failed[i]) continue;
            const double t0 = fa_cli_seconds();
            if (calls[i].fn(calls[i].ctx)) {
                failed[i] = 1;
                continue;
            }
            if (r >= 0) t[i][r] = 1e3 * (fa_cli_seconds() - t0);
            else calls[i].ms = 1e3 * (fa_cli_seconds() - t0);
        }
    round_count = reps > 0 ? reps : 0;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < round_count; r++) round_ms[i][r] = failed[i] ? -1.0 : t[i][r];
    for (int i = 0; i < n; i++) {
        calls[i].ms = failed[i] ? -1.0 : fa_cli_median(t[i], reps); /* sorts t[i] */
        if (min_ms) min_ms[i] = failed[i] ? -1.0 : t[i][0];
        if (max_ms) max_ms[i] = failed[i] ? -1.0 : t[i][reps - 1];
    }
}

double bench_round_ratio(int a, int b) {
    static double q[1000];
    if (a < 0 || b < 0 || a >= BENCH_MAX_CALLS || b >= BENCH_MAX_CALLS || round_count < 1) return -1.0;
    for (int r = 0; r < round_count; r++) {
        if (round_ms[a][r] <= 0.0 || round_ms[b][r] <= 0.0) return -1.0;
        q[r] = round_ms[a][r] / round_ms[b][r];
    }
    return fa_cli_median(q, round_count);
}

/* Extra peak measurements when the threads did not scale. */
#define PEAK_RETRIES 6

static void measure_peak(const bench_opts *o, bench_peak *pk) {
    /* pct_peak is read against the peak of the kernel path and dtype's
     * loop (FLASHATTN_ISA=avx2 on an AVX-512 CPU: the AVX2 loop). */
    const fa_peak_kernels *k = fa_peak_for_path(flashattn_isa());
    pk->kernels = k;
    pk->loop = fa_peak_loop_for(k, flashattn_isa(), o->dtype == FLASHATTN_BF16);
    pk->gflops = fa_peak_compute(k, pk->loop, o->threads, NULL, &pk->team);
    pk->one_thread = 0.0;
    pk->scaled = 1;
    if (o->threads > 1) {
        pk->one_thread = fa_peak_compute(k, FA_PEAK_FP32, 1, NULL, NULL);
        /* A shared VM sometimes runs both threads on one core for a while,
         * pinned or not: then measure again, a few times, and keep the best
         * (a disturbed run is only slower). Without this one bad moment
         * made the peak the 1-thread one and pct_peak read over 100%. */
        for (int retry = 0;; retry++) {
            const double all =
                pk->loop ? fa_peak_compute(k, FA_PEAK_FP32, o->threads, NULL, NULL) : pk->gflops;
            pk->scaled = fa_peak_scaled(pk->one_thread, all, pk->team);
            if (pk->scaled || retry == PEAK_RETRIES) break;
            int team = pk->team;
            const double again = fa_peak_compute(k, pk->loop, o->threads, NULL, &team);
            if (again > pk->gflops) pk->gflops = again, pk->team = team;
        }
    }
}

static void fmt_bytes(char *buf, size_t n, double b) {
    if (b >= (double)(1 << 30)) snprintf(buf, n, "%.2f GiB", b / (1 << 30));
    else if (b >= (double)(1 << 20)) snprintf(buf, n, "%.1f MiB", b / (1 << 20));
    else snprintf(buf, n, "%.1f KiB", b / 1024);
}

static void fmt_ms(char *buf, size_t n, double ms) {
    if (ms < 0) snprintf(buf, n, "n/a");
    else snprintf(buf, n, "%.3f", ms);
}

static void print_header(const bench_opts *o, const bench_mode *m, const bench_peak *pk) {
    printf("flashattn bench (%s): batch %lld, heads %lld (kv %lld), head_dim %lld, %s, %s, "
           "threads %d, kernels %s, %d reps (median)\n",
           m->what, (long long)o->batch, (long long)o->heads, (long long)o->heads_kv,
           (long long)o->head_dim, dtype_name(o->dtype), o->causal ? "causal" : "non-causal",
           o->threads, flashattn_isa(), o->reps);
    printf("peak (%s loops, measured now, threads %d): %.1f GFLOP/s %s", pk->kernels->isa, pk->team,
           pk->gflops, pk->loop == FA_PEAK_AMX ? "amx bf16" : pk->loop == FA_PEAK_BF16 ? "bf16" : "fp32");
    if (pk->one_thread > 0) printf(" (1 thread: %.1f fp32)", pk->one_thread);
    printf("; threads: %s\n", fa_cli_placement());
    printf("%% rounds: against the same loops timed in each row's rounds, between its calls "
           "(median, as the row's times)\n");
    if (o->standard && fa_standard_cblas_name()) printf("cblas: %s\n", fa_standard_cblas_name());
    printf("\n%-11s | %11s | %10s | %8s | %21s | %15s | %13s | %6s | %8s", "seq_len", "standard ms",
           "flash ms", "speed-up", "standard extra memory", "flash workspace", "flash GFLOP/s",
           "% peak", "% rounds");
    if (o->standard && fa_standard_cblas_name()) printf(" | %9s | %8s", "cblas ms", "vs cblas");
    printf("\n");
}

static void print_row(const bench_opts *o, const bench_row *r, const bench_peak *pk) {
    char seq[32], sms[24], fms[24], sp[24], smem[24], ws[24], cms[24], csp[24];
    if (r->seq_q == r->seq_k) snprintf(seq, sizeof seq, "%lld", (long long)r->seq_q);
    else snprintf(seq, sizeof seq, "%lldx%lld", (long long)r->seq_q, (long long)r->seq_k);
    fmt_ms(sms, sizeof sms, r->standard_ms);
    fmt_ms(fms, sizeof fms, r->flash_ms);
    if (r->standard_ms >= 0 && r->flash_ms > 0) snprintf(sp, sizeof sp, "%.2fx", r->standard_ms / r->flash_ms);
    else snprintf(sp, sizeof sp, "n/a");
    if (o->standard) fmt_bytes(smem, sizeof smem, (double)r->standard_bytes);
    else snprintf(smem, sizeof smem, "n/a");
    fmt_bytes(ws, sizeof ws, (double)r->workspace_bytes);
    const double gf = r->flash_ms > 0 ? r->flops / (r->flash_ms * 1e6) : 0.0;
    char rp[24];
    if (r->peak_gflops > 0) snprintf(rp, sizeof rp, "%.1f%%", 100.0 * gf / r->peak_gflops);
    else snprintf(rp, sizeof rp, "n/a");
    printf("%-11s | %11s | %10s | %8s | %21s | %15s | %13.1f | %5.1f%% | %8s", seq, sms, fms, sp,
           smem, ws, gf, 100.0 * gf / pk->gflops, rp);
    if (o->standard && fa_standard_cblas_name()) {
        fmt_ms(cms, sizeof cms, r->cblas_ms);
        if (r->cblas_ms >= 0 && r->flash_ms > 0) snprintf(csp, sizeof csp, "%.2fx", r->cblas_ms / r->flash_ms);
        else snprintf(csp, sizeof csp, "n/a");
        printf(" | %9s | %8s", cms, csp);
    }
    if (r->note[0]) printf("   (%s)", r->note);
    printf("\n");
}



static void print_json(const bench_opts *o, const bench_mode *m, const bench_row *r,
                       const bench_peak *pk) {
    const double gf = r->flash_ms > 0 ? r->flops / (r->flash_ms * 1e6) : 0.0;
    printf("{\"mode\": \"%s\", \"seq_q\": %lld, \"seq_k\": %lld, \"batch\": %lld, \"heads\": %lld, "
           "\"heads_kv\": %lld, \"head_dim\": %lld, \"dtype\": \"%s\", \"causal\": %s, "
           "\"threads\": %d, \"isa\": \"%s\", \"reps\": %d",
           m->what, (long long)r->seq_q, (long long)r->seq_k, (long long)o->batch,
           (long long)o->heads, (long long)o->heads_kv, (long long)o->head_dim,
           dtype_name(o->dtype), o->causal ? "true" : "false", o->threads, flashattn_isa(), o->reps);
    fa_json_num("flash_ms", r->flash_ms, 1);
    fa_json_num("standard_ms", r->standard_ms, r->standard_ms >= 0);
    fa_json_num("speedup", r->standard_ms / r->flash_ms, r->standard_ms >= 0 && r->flash_ms > 0);
    fa_json_num("cblas_ms", r->cblas_ms, r->cblas_ms >= 0);
    fa_json_num("speedup_cblas", r->cblas_ms / r->flash_ms, r->cblas_ms >= 0 && r->flash_ms > 0);
    fa_json_num("flops", r->flops, 1);
    fa_json_num("flash_gflops", gf, 1);
    fa_json_num("pct_peak", 100.0 * gf / pk->gflops, pk->gflops > 0);
    fa_json_num("peak_gflops", pk->gflops, 1);
    printf(", \"peak_isa\": \"%s\"", pk->kernels->isa);
    fa_json_num("peak_1thread_gflops", pk->one_thread, pk->one_thread > 0);
    fa_json_num("peak_rounds_gflops", r->peak_gflops, r->peak_gflops > 0);
    fa_json_num("pct_peak_rounds", 100.0 * gf / r->peak_gflops, r->peak_gflops > 0);
    if (m->run == bench_bwd) {
        fa_json_num("bwd_ms", r->flash_ms, 1);
        fa_json_num("bwd_gflops", gf, 1);
        fa_json_num("fwd_ms", r->fwd_ms, 1);
        fa_json_num("bwd_over_fwd", r->flash_ms / r->fwd_ms, r->fwd_ms > 0);
    }
    if (r->f32_ms >= 0) {
        fa_json_num("f32_ms", r->f32_ms, 1);
        fa_json_num("speed_vs_f32", r->f32_ms / r->flash_ms, r->flash_ms > 0);
    }
    if (r->one_thread_ms >= 0) {
        fa_json_num("one_thread_ms", r->one_thread_ms, 1);
        fa_json_num("speedup_vs_1thread", r->one_thread_ms / r->flash_ms, r->flash_ms > 0);
    }
    if (r->noncausal_ms >= 0) {
        fa_json_num("noncausal_ms", r->noncausal_ms, 1);
        fa_json_num("causal_over_noncausal", r->flash_ms / r->noncausal_ms, r->noncausal_ms > 0);
    }
    printf(", \"peak_scaled\": %s", pk->scaled ? "true" : "false");
    fa_json_size("workspace_bytes", r->workspace_bytes, 1);
    fa_json_size("standard_bytes", r->standard_bytes, o->standard);
    fa_json_size("cblas_bytes", r->cblas_bytes, r->cblas_bytes > 0);
    fa_json_num("max_abs_diff", r->max_abs_diff, r->max_abs_diff >= 0);
    fa_json_str("placement", fa_cli_placement());
    if (r->note[0]) fa_json_str("note", r->note);
    printf("}\n");
}

int cmd_bench(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--decode")) return bench_decode_cmd(argc, argv);
        else if (!strcmp(argv[i], "--varlen")) return bench_varlen_cmd(argc, argv);
        else if (!strcmp(argv[i], "--modifiers")) return bench_modifiers_cmd(argc, argv);
        else if (!strcmp(argv[i], "--precision")) return bench_precision_cmd(argc, argv);
        else if (!strcmp(argv[i], "--dropout")) return bench_dropout_cmd(argc, argv);
        else if (!strcmp(argv[i], "--ring")) return bench_ring_cmd(argc, argv);
    bench_opts o;
    const bench_mode *mode;
    int rc = parse_args(argc, argv, &o, &mode);
    if (rc == 1) usage(stdout);
    if (rc) return rc == 1 ? 0 : 2;
    fa_cli_place_threads(argc, argv);
#ifdef _OPENMP
    if (o.threads == 0) o.threads = omp_get_max_threads();
#else
    o.threads = 1;
#endif
    bench_peak pk;
    measure_peak(&o, &pk);
    o.peak_kernels = pk.kernels;
    o.peak_loop = pk.loop;
    if (!o.json) print_header(&o, mode, &pk);
    if (!pk.scaled)
        fprintf(stderr,
                "flashattn bench: WARNING: %d threads did not scale on the peak loop (1 thread "
                "%.1f GFLOP/s): threads share a core or the machine is busy; placement: %s\n",
                pk.team, pk.one_thread, fa_cli_placement());
    for (int i = 0; i < o.nseq; i++) {
        bench_row r;
        if (mode->run(&o, o.seq_q[i], o.seq_k[i], &r)) return 1;
        if (o.json) print_json(&o, mode, &r, &pk);
        else print_row(&o, &r, &pk);
        fflush(stdout);
    }
    return 0;
}
