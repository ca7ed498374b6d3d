#define _GNU_SOURCE /* sched_getcpu */
#include "peak.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"
#include "tool/tool.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define PEAK_REPS 4
#define PEAK_RUN_SECONDS 0.05 /* per repetition, after calibration */
#define BW_REPS 3

/* Results go here so no loop's work can be optimised away. */
static volatile double peak_sink;

const fa_peak_kernels *fa_peak_widest(void) {
#ifdef FA_HAVE_AVX512
    if (fa_kernels_by_name("avx512")) return &fa_peak_avx512;
#endif
#ifdef FA_HAVE_AVX2
    if (fa_kernels_by_name("avx2")) return &fa_peak_avx2;
#endif
    return &fa_peak_scalar;
}

const fa_peak_kernels *fa_peak_for_path(const char *isa) {
    if (strcmp(isa, "scalar") == 0) return &fa_peak_scalar;
#ifdef FA_HAVE_AVX2
    if (strcmp(isa, "avx2") == 0) return &fa_peak_avx2;
#endif
    return fa_peak_widest();
}

int fa_peak_has_amx(const fa_peak_kernels *pk) {
    return pk->amx_loop != NULL && fa_kernels_by_name("amx") != NULL;
}

int fa_peak_loop_for(const fa_peak_kernels *pk, const char *isa, int bf16_inputs) {
    if (bf16_inputs && strcmp(isa, "amx") == 0 && fa_peak_has_amx(pk)) return FA_PEAK_AMX;
    if (bf16_inputs && strcmp(isa, "avx512bf16") == 0 && fa_peak_has_bf16(pk)) return FA_PEAK_BF16;
    return FA_PEAK_FP32;
}

int fa_peak_has_bf16(const fa_peak_kernels *pk) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return pk->bf16_loop != NULL && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static int team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Seconds for `iters` iterations of the loop on every thread at once. */
static double timed_compute(const fa_peak_kernels *pk, int loop, int threads, int64_t iters,
                            int *cpus, int *team) {
    double t0 = 0.0, t1 = 0.0;
#pragma omp parallel num_threads(threads)
    {
#pragma omp barrier
#pragma omp single
        t0 = fa_cli_seconds();
        float r = loop == FA_PEAK_AMX    ? pk->amx_loop(iters)
                  : loop == FA_PEAK_BF16 ? pk->bf16_loop(iters)
                                         : pk->fma_loop(iters);
        const int id = thread_id();
        if (cpus && id < FA_PEAK_MAX_THREADS) cpus[id] = sched_getcpu();
#pragma omp atomic
        peak_sink += r;
#pragma omp barrier
#pragma omp single
        {
            t1 = fa_cli_seconds();
            if (team) *team = team_size();
        }
    }
    return t1 - t0;
}

double fa_peak_flops_per_iter(const fa_peak_kernels *pk, int loop) {
    return loop == FA_PEAK_AMX ? pk->amx_flops : loop == FA_PEAK_BF16 ? pk->bf16_flops : pk->fma_flops;
}

double fa_peak_seconds(const fa_peak_kernels *pk, int loop, int threads, int64_t iters, int *team) {
    return timed_compute(pk, loop, threads, iters, NULL, team);
}

double fa_peak_compute(const fa_peak_kernels *pk, int loop, int threads, int *cpus, int *team) {
    const double flops = fa_peak_flops_per_iter(pk, loop);
    /* Size the runs from one thread's fastest rate (a preempted run is only
     * slower), so that every run is long against thread wake-up and timer
     * costs even when calibration itself was disturbed. */
    int64_t iters = 1 << 14;
    double t = timed_compute(pk, loop, 1, iters, NULL, NULL);
    while (t < 0.01) {
        iters *= 2;
        t = timed_compute(pk, loop, 1, iters, NULL, NULL);
    }
    for (int rep = 0; rep < 2; rep++) {
        double u = timed_compute(pk, loop, 1, iters, NULL, NULL);
        if (u < t) t = u;
    }
    iters = (int64_t)((double)iters * PEAK_RUN_SECONDS / t) + 1;
    double best = 0.0;
    int n = threads;
    for (int rep = 0; rep < PEAK_REPS; rep++) {
        t = timed_compute(pk, loop, threads, iters, cpus, &n);
        double g = (double)n * (double)iters * flops / t * 1e-9;
        if (g > best) best = g;
    }
    if (team) *team = n;
    return best;
}

/* Thread `id`'s slice of the array: 64-float (256-byte) aligned bounds. */
static void slice(const fa_peak_array *a, int id, int threads, int64_t *lo, int64_t *hi) {
    const int64_t blocks = a->n / 64;
    *lo = blocks * id / threads * 64;
    *hi = blocks * (id + 1) / threads * 64;
}

int fa_peak_array_alloc(fa_peak_array *a, size_t bytes, int threads) {
    a->n = (int64_t)(bytes / sizeof(float)) / 64 * 64;
    a->x = a->n > 0 ? aligned_alloc(64, (size_t)a->n * sizeof(float)) : NULL;
    if (!a->x) return -1;
#pragma omp parallel num_threads(threads)
    {
        int64_t lo, hi;
        slice(a, thread_id(), team_size(), &lo, &hi);
        for (int64_t i = lo; i < hi; i++) a->x[i] = 1.0f;
    }
    return 0;
}

void fa_peak_array_free(fa_peak_array *a) {
    free(a->x);
    a->x = NULL;
    a->n = 0;
}

double fa_peak_bandwidth_once(const fa_peak_kernels *pk, const fa_peak_array *a, int threads) {
    double t0 = 0.0, t1 = 0.0;
#pragma omp parallel num_threads(threads)
    {
        int64_t lo, hi;
        slice(a, thread_id(), team_size(), &lo, &hi);
#pragma omp barrier
#pragma omp single
        t0 = fa_cli_seconds();
        double r = pk->read_sum(a->x + lo, hi - lo);
#pragma omp atomic
        peak_sink += r;
#pragma omp barrier
#pragma omp single
        t1 = fa_cli_seconds();
    }
    return (double)a->n * sizeof(float) / (t1 - t0) * 1e-9;
}

double fa_peak_bandwidth(const fa_peak_kernels *pk, const fa_peak_array *a, int threads) {
    double best = 0.0;
    for (int rep = 0; rep < BW_REPS; rep++) {
        const double g = fa_peak_bandwidth_once(pk, a, threads);
        if (g > best) best = g;
    }
    return best;
}

int fa_peak_scaled(double one, double all, int threads) {
    return threads <= 1 || all >= 0.75 * threads * one;
}
