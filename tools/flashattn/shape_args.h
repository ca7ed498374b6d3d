/*
 * Options that describe one attention shape, shared by `tune` and `plan`:
 * --seq, --head-dim, --dtype, --causal, --heads, --batch, --threads,
 * --block-m, --block-n. Each command keeps its own other options.
 */
#ifndef FA_CLI_SHAPE_ARGS_H
#define FA_CLI_SHAPE_ARGS_H

#include <stdint.h>

#include "flashattn.h"

#define SHAPE_MAX_BLOCKS 32

typedef struct {
    int64_t seq, head_dim, heads, batch;
    flashattn_dtype dtype;
    int causal, threads; /* threads 0: OpenMP's default */
    /* --block-m / --block-n: comma-separated lists (tune sweeps them, plan
     * takes one value); n == 0 when not given. */
    int block_m[SHAPE_MAX_BLOCKS], n_block_m;
    int block_n[SHAPE_MAX_BLOCKS], n_block_n;
} shape_args;

/* Defaults: heads 8, batch 1, f32, non-causal; seq and head_dim unset (0). */
void shape_args_init(shape_args *s);

/* If argv[*i] is one of the shape options, consume it (and its value) and
 * return 1; 0 if it is not one; -1 after printing why the value is bad. */
int shape_args_take(shape_args *s, const char *cmd, int argc, char **argv, int *i);

/* After parsing: -1 (printed) when --seq or --head-dim is missing. */
int shape_args_check(const shape_args *s, const char *cmd);

const char *shape_dtype_name(flashattn_dtype dt);

/* The options' help lines. */
extern const char shape_args_help[];

#endif
