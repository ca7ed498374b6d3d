/*
 * The machine's measured peaks, for `flashattn peak` and for bench's
 * pct_peak (measured in the same process, so both see the same clocks,
 * load and placement). Compute peaks: best of a few runs of the register-
 * blocked loops of tool/peak_loops.h on every thread; bandwidth: best of a
 * few full reads of an array far larger than the last-level cache.
 */
#ifndef FA_CLI_PEAK_H
#define FA_CLI_PEAK_H

#include <stddef.h>
#include <stdint.h>

#include "tool/peak_loops.h"

#define FA_PEAK_MAX_THREADS 1024

/* The loops of the widest ISA this CPU runs. */
const fa_peak_kernels *fa_peak_widest(void);

/* The loops of kernel path `isa` (flashattn_isa()): the AVX2 loop for
 * "avx2", the portable one for "scalar", else the widest. With the path
 * forced to AVX2 on an AVX-512 CPU, % of peak is then read against the
 * FMA rate that path can reach, not against twice that. */
const fa_peak_kernels *fa_peak_for_path(const char *isa);

/* Whether the CPU (and this build) can run the BF16 dot-product loop
 * (AVX512_BF16) and the AMX-BF16 tile loop. */
int fa_peak_has_bf16(const fa_peak_kernels *pk);
int fa_peak_has_amx(const fa_peak_kernels *pk);

/* The compute loops. */
enum { FA_PEAK_FP32 = 0, FA_PEAK_BF16 = 1, FA_PEAK_AMX = 2 };

/* The loop whose peak a call on kernel path `isa` runs at: bf16 inputs
 * run on AMX tiles on the amx path and on VDPBF16PS on avx512bf16, and
 * are widened to f32 elsewhere. */
int fa_peak_loop_for(const fa_peak_kernels *pk, const char *isa, int bf16_inputs);

/* GFLOP/s of one compute loop (FA_PEAK_*) on `threads` threads. cpus (may
 * be NULL) receives, per thread, the CPU it finished on, and *team the
 * team size OpenMP gave. */
double fa_peak_compute(const fa_peak_kernels *pk, int loop, int threads, int *cpus, int *team);

/* One run of a compute loop: seconds for `iters` iterations on every one
 * of `threads` threads at once (*team: the team size OpenMP gave), and the
 * FLOPs one thread's iteration does. bench times the loop this way in the
 * rounds of its rows. */
double fa_peak_seconds(const fa_peak_kernels *pk, int loop, int threads, int64_t iters, int *team);
double fa_peak_flops_per_iter(const fa_peak_kernels *pk, int loop);

/* A read-bandwidth array, first touched by the threads that will read it. */
typedef struct {
    float *x;
    int64_t n; /* floats */
} fa_peak_array;

/* 0 on success; -1 when the memory could not be had. */
int fa_peak_array_alloc(fa_peak_array *a, size_t bytes, int threads);
void fa_peak_array_free(fa_peak_array *a);

/* GB/s (1e9 bytes) reading the whole array on `threads` threads: the best
 * of a few reads, or one read (_once). */
double fa_peak_bandwidth(const fa_peak_kernels *pk, const fa_peak_array *a, int threads);
double fa_peak_bandwidth_once(const fa_peak_kernels *pk, const fa_peak_array *a, int threads);

/* Whether `threads` threads scaled: at least 0.75 x threads times the one-
 * thread figure (on 2 threads: 1.5x); below that, they likely shared a core. */
int fa_peak_scaled(double one, double all, int threads);

#endif
