/*
 * The peak loop timed among a row's calls (bench.h: bench_peak_probe).
 */
#include "bench.h"

int bench_peak_probe_run(void *ctx) {
    bench_peak_probe *p = ctx;
    if (!p->iters) {
        double target = p->match_ms && *p->match_ms > 0 ? *p->match_ms : BENCH_PROBE_MIN_MS;
        if (target < BENCH_PROBE_MIN_MS) target = BENCH_PROBE_MIN_MS;
        if (target > BENCH_PROBE_MAX_MS) target = BENCH_PROBE_MAX_MS;
        /* Calibrate on the row's threads from the faster of two short
         * runs (a disturbed run is only slower), doubling until a run is
         * long against the team's start-up. */
        int64_t iters = 1 << 10;
        double ms = 0.0;
        for (;;) {
            ms = 1e3 * fa_peak_seconds(p->pk, p->loop, p->threads, iters, &p->team);
            const double again = 1e3 * fa_peak_seconds(p->pk, p->loop, p->threads, iters, &p->team);
            if (again < ms) ms = again;
            if (ms >= 0.5 || iters >= ((int64_t)1 << 40)) break;
            iters *= 2;
        }
        p->iters = (int64_t)((double)iters * target / (ms > 0 ? ms : 1e-3)) + 1;
    }
    fa_peak_seconds(p->pk, p->loop, p->threads, p->iters, &p->team);
    return 0;
}

double bench_peak_probe_gflops(const bench_peak_probe *p, double ms) {
    if (ms <= 0 || !p->iters) return -1.0;
    return (double)p->team * (double)p->iters * fa_peak_flops_per_iter(p->pk, p->loop) / (ms * 1e6);
}
