/*
 * flashattn peak: this machine's FP32 FMA peak, BF16 dot-product peak
 * (where AVX512_BF16 exists), AMX-BF16 tile peak (where AMX is usable) and
 * memory read bandwidth, on 1 thread and on all threads, measured now. The
 * yardstick bench's pct_peak is read against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json_out.h"
#include "peak.h"
#include "placement.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    int threads, team;
    double fp32, bf16, amx, bandwidth; /* bf16, amx < 0: absent; bandwidth < 0: not measured */
    int cpus[FA_PEAK_MAX_THREADS];
} peak_row;

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn peak [--json] [--threads N] [--bw-mib M]\n\n"
            "  --threads N  the 'all threads' count (default: OpenMP's, i.e. the cores)\n"
            "  --bw-mib M   bandwidth array size in MiB (default 1024: far beyond any L3)\n"
            "  --json       one JSON object per thread count\n\n"
            "Threads are pinned (OMP_PROC_BIND=spread OMP_PLACES=cores, set by re-running\n"
            "itself) unless you set OMP_PROC_BIND or OMP_PLACES yourself. Under valgrind,\n"
            "set them yourself: the re-run would leave valgrind.\n");
}

static void measure(const fa_peak_kernels *pk, const fa_peak_array *arr, peak_row *r) {
    r->fp32 = fa_peak_compute(pk, FA_PEAK_FP32, r->threads, r->cpus, &r->team);
    r->bf16 = fa_peak_has_bf16(pk) ? fa_peak_compute(pk, FA_PEAK_BF16, r->threads, NULL, NULL) : -1.0;
    r->amx = fa_peak_has_amx(pk) ? fa_peak_compute(pk, FA_PEAK_AMX, r->threads, NULL, NULL) : -1.0;
    r->bandwidth = arr->x ? fa_peak_bandwidth(pk, arr, r->threads) : -1.0;
}

static void print_cpus(const peak_row *r, const char *sep) {
    for (int i = 0; i < r->team && i < FA_PEAK_MAX_THREADS; i++)
        printf("%s%d", i ? sep : "", r->cpus[i]);
}

static void print_json(const char *isa, const peak_row *r, const peak_row *one) {
    printf("{\"threads\": %d", r->team);
    fa_json_str("isa", isa);
    fa_json_num("fp32_gflops", r->fp32, 1);
    fa_json_num("bf16_gflops", r->bf16, r->bf16 >= 0);
    fa_json_num("amx_bf16_gflops", r->amx, r->amx >= 0);
    fa_json_num("bandwidth_gbs", r->bandwidth, r->bandwidth >= 0);
    printf(", \"cpus\": [");
    print_cpus(r, ", ");
    printf("]");
    fa_json_str("placement", fa_cli_placement());
    if (one) {
        fa_json_num("scaling", r->fp32 / one->fp32, 1);
        printf(", \"scaled\": %s", fa_peak_scaled(one->fp32, r->fp32, r->team) ? "true" : "false");
    }
    printf("}\n");
}

static void figure(char *buf, size_t size, double x) {
    if (x < 0) snprintf(buf, size, "n/a");
    else snprintf(buf, size, "%.1f", x);
}

static void print_text_row(const peak_row *r) {
    char bf[32], amx[32], bw[32];
    figure(bf, sizeof bf, r->bf16);
    figure(amx, sizeof amx, r->amx);
    figure(bw, sizeof bw, r->bandwidth);
    printf("%7d | %12.1f | %12s | %16s | %13s | ", r->team, r->fp32, bf, amx, bw);
    print_cpus(r, ",");
    printf("\n");
}

int cmd_peak(int argc, char **argv) {
    int json = 0, threads = 0;
    long mib = 1024;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
            if (threads < 1 || threads > FA_PEAK_MAX_THREADS) {
                fprintf(stderr, "flashattn peak: --threads must be 1..%d\n", FA_PEAK_MAX_THREADS);
                return 2;
            }
        } else if (strcmp(argv[i], "--bw-mib") == 0 && i + 1 < argc) {
            mib = atol(argv[++i]);
            if (mib < 1 || mib > (1L << 20)) {
                fprintf(stderr, "flashattn peak: --bw-mib must be 1..1048576\n");
                return 2;
            }
        } else {
            fprintf(stderr, "flashattn peak: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    fa_cli_place_threads(argc, argv);
#ifdef _OPENMP
    if (threads == 0) threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    if (threads > FA_PEAK_MAX_THREADS) threads = FA_PEAK_MAX_THREADS;

    const fa_peak_kernels *pk = fa_peak_widest();
    fa_peak_array arr;
    if (fa_peak_array_alloc(&arr, (size_t)mib << 20, threads) != 0)
        fprintf(stderr, "flashattn peak: could not allocate %ld MiB: no bandwidth figure\n", mib);
    static peak_row rows[2];
    int nrows = threads > 1 ? 2 : 1;
    rows[0].threads = 1;
    rows[1].threads = threads;
    for (int r = 0; r < nrows; r++) measure(pk, &arr, &rows[r]);
    fa_peak_array_free(&arr);

    const int scaled = nrows == 1 || fa_peak_scaled(rows[0].fp32, rows[1].fp32, rows[1].team);
    if (json) {
        for (int r = 0; r < nrows; r++) print_json(pk->isa, &rows[r], r ? &rows[0] : NULL);
    } else {
        printf("flashattn peak: %s loops, %ld MiB read array, threads %s\n\n", pk->isa, mib,
               fa_cli_placement());
        printf("threads | fp32 GFLOP/s | bf16 GFLOP/s | amx bf16 GFLOP/s | read GB/s     | cpus\n");
        printf("--------|--------------|--------------|------------------|---------------|-----\n");
        for (int r = 0; r < nrows; r++) print_text_row(&rows[r]);
        if (nrows == 2)
            printf("\n%d threads: x%.2f the one-thread FP32 peak, x%.2f its bandwidth\n",
                   rows[1].team, rows[1].fp32 / rows[0].fp32,
                   rows[0].bandwidth > 0 ? rows[1].bandwidth / rows[0].bandwidth : 0.0);
        if (rows[0].bf16 < 0)
            printf("bf16: n/a (no AVX512_BF16 on this CPU or build)\n");
        if (rows[0].amx < 0)
            printf("amx bf16: n/a (no AMX-BF16 on this CPU or build, or the OS does not allow it)\n");
    }
    if (!scaled)
        fprintf(stderr,
                "flashattn peak: WARNING: %d threads reached only x%.2f of one thread: they "
                "probably shared a core (cpus above) or the machine is busy; placement: %s\n",
                rows[1].team, rows[1].fp32 / rows[0].fp32, fa_cli_placement());
    return 0;
}
