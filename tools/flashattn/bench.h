/*
 * `flashattn bench`: one table row per sequence length, for one mode
 * (forward today). A mode fills bench_row for a shape; cmd_bench.c owns
 * the options, the peak, the repetitions' statistics and the output.
 *
 * Adding a mode (--bwd, --decode): write bench_<mode>.c with a
 * bench_run_fn, and add its line to the modes[] table in cmd_bench.c.
 */
#ifndef FA_CLI_BENCH_H
#define FA_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "flashattn.h"
#include "peak.h"

#define BENCH_MAX_SEQS 64
/* Standard attention needing more than this is reported n/a, not run. */
#define BENCH_STANDARD_LIMIT ((size_t)8 << 30)

typedef struct {
    int64_t batch, heads, heads_kv, head_dim;
    int64_t seq_q[BENCH_MAX_SEQS], seq_k[BENCH_MAX_SEQS];
    int nseq;
    flashattn_dtype dtype;
    int causal, threads, reps, json, standard;
    /* the peak loop the rows' % of peak is read against (cmd_bench.c) */
    const fa_peak_kernels *peak_kernels;
    int peak_loop;
} bench_opts;

/* One measured shape. Times are medians over the repetitions, after one
 * warm-up run; a time < 0 means not run (n/a), with the reason in note. */
typedef struct {
    int64_t seq_q, seq_k;
    double flops;                /* 4 * batch * heads * visible (q, k) pairs * head_dim */
    double flash_ms, standard_ms, cblas_ms;
    size_t workspace_bytes;      /* flash */
    size_t standard_bytes;       /* standard attention's extra memory (S, packing, tiles) */
    size_t cblas_bytes;
    double max_abs_diff;         /* |flash - standard| over O: a sanity check, < 0 if not run */
    double fwd_ms;               /* --bwd: the forward of the same shape, same run */
    double f32_ms;               /* --dtype f16/bf16: the same forward on f32 copies of the
                                    inputs, its calls alternating with the row's; < 0 if not run */
    double noncausal_ms;         /* --causal: the same forward without the mask, its calls
                                    alternating with the causal ones; < 0 if not run */
    double one_thread_ms;        /* forward on several threads: the same call on one thread,
                                    alternating with the row's; < 0 if not run */
    double peak_gflops;          /* the peak loop timed in the row's rounds (median), on the
                                    row's threads; < 0 if not run */
    char note[256];
} bench_row;

/* A row before measuring: the shape, every time and ratio "not run". */
static inline void bench_row_start(bench_row *row, int64_t seq_q, int64_t seq_k) {
    memset(row, 0, sizeof *row);
    row->seq_q = seq_q, row->seq_k = seq_k;
    row->flash_ms = row->standard_ms = row->cblas_ms = row->max_abs_diff = -1.0;
    row->fwd_ms = row->f32_ms = row->noncausal_ms = row->one_thread_ms = -1.0;
    row->peak_gflops = -1.0;
}

/* Measure one shape; returns 0, or non-zero after printing why to stderr
 * (the flash path itself failed: the bench stops). */
typedef int (*bench_run_fn)(const bench_opts *o, int64_t seq_q, int64_t seq_k, bench_row *row);

int bench_fwd(const bench_opts *o, int64_t seq_q, int64_t seq_k, bench_row *row);
/* --bwd: flash_ms is the backward's time, flops 2.5x the forward's. */
int bench_bwd(const bench_opts *o, int64_t seq_q, int64_t seq_k, bench_row *row);

/* `bench --decode`: its own options and table (KV bytes read per second
 * against the read bandwidth), so it takes the command line whole. */
int bench_decode_cmd(int argc, char **argv);
/* `bench --varlen`: packed sequences of mixed lengths (params.varlen)
 * against a padded dense call and per-sequence calls; its own options
 * and table, like --decode. */
int bench_varlen_cmd(int argc, char **argv);
/* `bench --modifiers`: softcap, ALiBi, bias and boolean masks against the
 * calls they should be measured by; its own options and table. */
int bench_modifiers_cmd(int argc, char **argv);
/* `bench --precision int8`: the 8-bit Q K^T forward against the exact one. */
int bench_precision_cmd(int argc, char **argv);
/* `bench --ring` (bench_ring.c, with MPI; else a message and exit 2):
 * ring attention across mpirun's ranks against one process. */
int bench_ring_cmd(int argc, char **argv);
/* `bench --dropout P`: forward and backward with attention dropout against
 * the same calls without it (bench_dropout.c). */
int bench_dropout_cmd(int argc, char **argv);

/* Calls compared with each other: timed in turn, one of each per round
 * (after a warm-up round in order; odd rounds in reverse order), so that
 * all of them see the same moments of a shared machine and their ratios
 * (speed-up, causal over non-causal, backward over forward) are not one
 * call's quiet minute against another's busy one. ms is the median, or -1
 * for a call that failed (it is left out of the rounds after its failure);
 * during the rounds a call's ms holds its warm-up time, which the peak
 * probe below reads. */
typedef struct {
    int (*fn)(void *ctx);
    void *ctx;
    double ms;
} bench_call;

void bench_time_together(bench_call *calls, int n, int reps);
/* The same, also giving each call's fastest and slowest round (the
 * spread): min_ms[i], max_ms[i], -1 for a call that failed. */
void bench_time_spread(bench_call *calls, int n, int reps, double *min_ms, double *max_ms);
/* The median over the last bench_time_spread's rounds of call a's time
 * over call b's in the same round: on a machine whose speed drifts from
 * minute to minute this holds where the ratio of the medians does not
 * (calls a round apart meet the same load); -1 if either failed. */
double bench_round_ratio(int a, int b);

/* The peak loop as one more call of a row's rounds, so that % of peak
 * compares the row's median time with the loop's median rate at the same
 * moments (the peak measured at start is the best of a few runs, often
 * at another minute of a shared machine). On its warm-up run the probe
 * sizes itself to last about as long as the call whose warm-up time
 * *match_ms holds (within [BENCH_PROBE_MIN_MS, BENCH_PROBE_MAX_MS]): a
 * long call and a short loop would see different mixes of a co-tenant's
 * bursts. */
#define BENCH_PROBE_MIN_MS 2.0
#define BENCH_PROBE_MAX_MS 50.0
typedef struct {
    const fa_peak_kernels *pk;
    int loop, threads;
    const double *match_ms;
    int64_t iters; /* 0 until the warm-up run */
    int team;
} bench_peak_probe;

/* bench_call's fn for a probe; never fails. */
int bench_peak_probe_run(void *probe);
/* GFLOP/s of a probe run that took ms. */
double bench_peak_probe_gflops(const bench_peak_probe *p, double ms);

#endif
