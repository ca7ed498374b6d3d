/*
 * flashattn check: randomised correctness sweep against the FP64 reference
 * on every kernel path this CPU can run. Exit status 0 only if every run of
 * every section passes; 1 if any fails; 2 for bad usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cli.h"
#include "tool/tool.h"

static const check_section *const sections[] = {
    &check_section_fwd,
    &check_section_bwd,
};
#define N_SECTIONS (int)(sizeof sections / sizeof sections[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn check [--quick] [--seed N] [--isa NAME] [--section NAME]\n\n"
            "Randomised sweep against the FP64 reference on every kernel path this CPU\n"
            "can run. One line per case and path: max abs error, relative error (max abs\n"
            "error over max |reference|), the bound it must meet, LSE error and bound.\n\n"
            "  --quick         one pass over every feature (a few seconds)\n"
            "  --seed N        change the random shapes and data (default 1)\n"
            "  --isa NAME      only this path:");
    const char *paths[16];
    for (int i = 0, n = fa_listed_isas(paths, 16); i < n; i++) fprintf(f, " %s", paths[i]);
    fprintf(f, "\n  --section NAME  only this section:");
    for (int i = 0; i < N_SECTIONS; i++) fprintf(f, " %s", sections[i]->name);
    fprintf(f, "\n\nPass rules (as tests/test_forward.c): f32 inputs, max abs error <= 1e-5;\n"
               "adversarial (sigma 10) and f16/bf16 inputs, at most twice the error of plain\n"
               "f32 standard attention on the same inputs; LSE within 1e-5 (f32) / 1e-4\n"
               "(16-bit) times max(1, sigma^2), and -inf exactly for rows that see no key.\n"
               "Backward (as tests/test_backward.c): per gradient, max and rms errors each\n"
               "at most twice those of the plain f32 backward on the same inputs, with floors\n"
               "relative to the largest sum of |terms| of one element.\n");
}

int check_report(check_tally *t, const check_result *r) {
    const int pass = !r->failure && r->err <= r->bound && r->lse_err <= r->lse_bound && r->lse_inf_ok;
    char line[sizeof t->worst], tag[24];
    snprintf(tag, sizeof tag, "[%s]", r->isa);
    snprintf(line, sizeof line, "%s %-8s %s  err %.2e rel %.2e bound %.2e  lse %.2e/%.2e%s%s%s",
             pass ? "  ok" : "FAIL", tag, r->desc, r->err, r->rel, r->bound, r->lse_err,
             r->lse_bound, r->lse_inf_ok ? "" : " (-inf rows wrong)", r->failure ? "  " : "",
             r->failure ? r->failure : "");
    puts(line);
    t->runs++;
    if (!pass) t->failed++;
    double ratio = r->bound > 0 ? r->err / r->bound : (r->err > 0 ? INFINITY : 0.0);
    if (isnan(r->err)) ratio = INFINITY;
    if (t->runs == 1 || ratio > t->worst_ratio) {
        t->worst_ratio = ratio;
        snprintf(t->worst, sizeof t->worst, "%s", line);
    }
    return pass;
}

static int parse_u64(const char *s, uint64_t *v) {
    char *end;
    if (!s || !*s || *s == '-') return 0;
    *v = strtoull(s, &end, 0);
    return *end == '\0';
}

int cmd_check(int argc, char **argv) {
    check_opts o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    const char *isa = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            o.quick = 1;
        } else if (strcmp(a, "--seed") == 0 && i + 1 < argc) {
            if (!parse_u64(argv[++i], &o.seed)) {
                fprintf(stderr, "flashattn check: --seed wants a non-negative integer, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--isa") == 0 && i + 1 < argc) {
            isa = argv[++i];
        } else if (strcmp(a, "--section") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "flashattn check: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }

    const char *names[CHECK_MAX_ISAS];
    const int n = fa_available_isas(names, CHECK_MAX_ISAS);
    for (int i = 0; i < n; i++)
        if (!isa || strcmp(isa, names[i]) == 0) o.isas[o.n_isas++] = fa_kernels_by_name(names[i]);
    if (o.n_isas == 0) {
        fprintf(stderr, "flashattn check: kernel path '%s' is not available here; this CPU runs:", isa);
        for (int i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
        fprintf(stderr, "\n");
        return 2;
    }
    int ran = 0;
    for (int s = 0; s < N_SECTIONS; s++) ran += !only || strcmp(only, sections[s]->name) == 0;
    if (!ran) {
        fprintf(stderr, "flashattn check: no section named '%s'\n", only);
        return 2;
    }

    printf("flashattn check: seed %llu, %s sweep, paths:", (unsigned long long)o.seed,
           o.quick ? "quick" : "full");
    for (int i = 0; i < o.n_isas; i++) printf(" %s", o.isas[i]->isa);
    printf("\n");
    int failed = 0, broken = 0;
    check_tally totals[N_SECTIONS];
    double secs[N_SECTIONS];
    for (int s = 0; s < N_SECTIONS; s++) {
        memset(&totals[s], 0, sizeof totals[s]);
        secs[s] = 0;
        if (only && strcmp(only, sections[s]->name) != 0) continue;
        printf("\n== %s: %s\n", sections[s]->name, sections[s]->summary);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (sections[s]->run(&o, &totals[s])) {
            fprintf(stderr, "flashattn check: section %s could not run (out of memory)\n", sections[s]->name);
            broken = 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs[s] = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        failed += totals[s].failed;
    }

    printf("\nsummary (seed %llu):\n", (unsigned long long)o.seed);
    for (int s = 0; s < N_SECTIONS; s++) {
        const check_tally *t = &totals[s];
        if (only && strcmp(only, sections[s]->name) != 0) continue;
        printf("  %-6s %d cases on %d path%s, %d runs: %d passed, %d failed  (%.1f s)\n",
               sections[s]->name, t->cases, o.n_isas, o.n_isas == 1 ? "" : "s", t->runs,
               t->runs - t->failed, t->failed, secs[s]);
        if (t->runs) printf("         worst err/bound %.2f:\n         %s\n", t->worst_ratio, t->worst);
    }
    const int ok = !failed && !broken;
    printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
