/*
 * `flashattn bench --varlen` (bench_varlen.c): its options, the batch, the
 * three variants' calls, and what a row measured, shared by the calls and
 * the check (bench_varlen_calls.c) and the output (bench_varlen_out.c).
 */
#ifndef FA_CLI_BENCH_VARLEN_H
#define FA_CLI_BENCH_VARLEN_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

#define VL_MAX_THREADS 4 /* thread counts: 3 calls each within BENCH_MAX_CALLS */
#define VL_MAX_SEQS 4096

enum { VL_VARLEN, VL_PADDED, VL_PERSEQ, VL_VARIANTS };
static inline const char *vl_variant_name(int v) {
    return v == VL_VARLEN ? "varlen" : v == VL_PADDED ? "padded" : "per-seq";
}

/* The targets of the issue: varlen over padded at least 0.9 x the padded
 * over useful FLOPs; varlen's 2-thread over 1-thread time at least 1.85x
 * (0.925 per thread). */
#define VL_TARGET_PADDED 0.9
#define VL_TARGET_SCALING 0.925

typedef struct {
    int64_t seqs, min_len, max_len, heads, heads_kv, head_dim;
    uint64_t seed;
    int threads[VL_MAX_THREADS], nthreads;
    int masks[2], nmasks; /* causal values, in the order run */
    int reps, json, bwd, block_m, block_n, deterministic;
    flashattn_dtype dtype;
} vl_opts;

/* The batch: lengths, the packed inputs and their padded copies. */
typedef struct {
    int64_t n, total, longest, *len;
    int32_t *cu; /* [n + 1], for both q and k */
    flashattn_varlen varlen;
    int padded;  /* 0: the padded copies would pass BENCH_STANDARD_LIMIT */
    size_t padded_bytes;
} vl_batch;

/* One variant's tensors: inputs (packed or padded) and its own outputs. */
typedef struct {
    flashattn_tensor q, k, v, dout, o, dq, dk, dv;
    float *lse;
} vl_out;

/* One variant on one thread count: what a timed call needs. */
typedef struct {
    int variant;
    const vl_batch *b;
    vl_out *x;
    flashattn_params p;
    void *ws, *bws; /* forward and backward workspaces */
    size_t ws_bytes, bws_bytes;
    char err[256];
} vl_call;

/* What one (mask, threads) measured. */
typedef struct {
    int causal, threads;
    double ms[VL_VARIANTS], lo[VL_VARIANTS], hi[VL_VARIANTS];
    int bm, bn, bits;     /* the bit-identity check's tiles and result */
    double bits_diff[3];  /* max |varlen - per-seq| of each output there */
    int have_auto;        /* automatic tiles were checked too */
    double auto_diff[3];
} vl_row;

/* Speed-up of varlen over padded, its target, and the 2-over-1 scaling
 * against the 1-thread row of the same mask; -1 where not measured. */
typedef struct {
    double vs_padded, target_padded, vs_perseq, scaling, target_scaling, gflops, useful, padded;
} vl_ratios;

/* ---- the calls and the check (bench_varlen_calls.c) ---- */

/* Rows r0 .. r0 + n - 1 of a packed tensor, as a dense batch of one. */
flashattn_tensor vl_rows_of(const flashattn_tensor *t, int64_t r0, int64_t n);
/* Grow the call's workspaces (forward, and backward when bwd) to what its
 * current params need, outside the timed rounds. 0, or -1 with the reason
 * in c->err. */
int vl_prepare(vl_call *c, int bwd);
/* bench_call fns: the variant's forward or backward; non-zero on failure
 * (the reason in err). */
int vl_run_fwd(void *call);
int vl_run_bwd(void *call);
/* The check of one (mask, threads), before timing: varlen (var) against
 * the per-sequence calls (seq) with the same explicit tiles (timed's, or
 * those varlen's plan picks; the backward deterministic) fills row->bm,
 * bn, bits, bits_diff; when timed leaves a tile automatic, the timed
 * params too (have_auto, auto_diff). 0, or -1 after printing why. */
int vl_check_config(const vl_opts *o, vl_call *var, vl_call *seq, const flashattn_params *timed,
                    vl_row *row);

/* ---- output (bench_varlen_out.c) ---- */

/* Useful (the sequences' own) and padded FLOPs of one call. */
void vl_flops_of(const vl_opts *o, const vl_batch *b, int causal, double *useful, double *padded);
vl_ratios vl_ratios_of(const vl_opts *o, const vl_batch *b, const vl_row *r, const vl_row *one);
const char *vl_dtype_name(flashattn_dtype dt);
void vl_print_lengths(const vl_opts *o, const vl_batch *b);
void vl_print_check(const vl_opts *o, const vl_row *r);
void vl_print_table_header(void);
void vl_print_row(const vl_row *r, const vl_ratios *x);
void vl_print_json(const vl_opts *o, const vl_batch *b, const vl_row *r, const vl_ratios *x);

#endif
