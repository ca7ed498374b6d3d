/*
 * The measuring half of `flashattn tune`: one forward shape, many
 * (block_m, block_n) points, each timed with the public API and checked
 * against an FP64 reference on sampled rows.
 */
#ifndef FA_CLI_TUNE_SWEEP_H
#define FA_CLI_TUNE_SWEEP_H

#include <stddef.h>

#include "flashattn.h"
#include "shape_args.h"

typedef struct {
    int block_m, block_n;
    double ms;          /* wall time, best of the repetitions; < 0: not run (see status) */
    double cpu_ms;      /* process CPU time / threads, best of the repetitions */
    double max_err;     /* max |O - FP64| over the sampled rows */
    size_t workspace;   /* bytes */
    flashattn_status status;
    char why[160];      /* the library's message when status != OK */
    int is_auto;        /* the automatic rule's choice: always re-timed */
    int confirmed;      /* timed afresh in the confirmation rounds */
} tune_point;

typedef struct {
    double flops;        /* 4 * batch * heads * visible (q, k) pairs * head_dim */
    int sampled_rows;    /* per (batch, head) */
    double plain_err;    /* the same error for plain f32 standard attention (the yardstick) */
} tune_info;

/* Time every point on s->threads threads, with Q, K, V in s->dtype and O
 * in out_dtype, inputs drawn from N(0, sigma^2), `reps` rounds; then time
 * the three fastest points and the automatic one afresh in `confirm`
 * rounds (their ms and cpu_ms then come from those rounds only). Returns
 * 0, or -1 after printing why (no memory). */
int tune_sweep(const shape_args *s, flashattn_dtype out_dtype, double sigma, int reps, int confirm,
               tune_point *pts, int n, tune_info *info);

#endif
