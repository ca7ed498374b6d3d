/* flashattn info: what this build and this machine offer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "flashattn.h"
#include "tool/tool.h"

/* "model name" from /proc/cpuinfo (x86 Linux); "unknown" elsewhere. */
static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v += 1 + (v[1] == ' ');
        snprintf(out, n, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

static const char *size_text(int64_t bytes, char *buf, size_t n) {
    if (bytes <= 0) snprintf(buf, n, "unknown");
    else if (bytes % (1 << 20) == 0) snprintf(buf, n, "%lld MiB", (long long)(bytes >> 20));
    else snprintf(buf, n, "%lld KiB", (long long)(bytes >> 10));
    return buf;
}

int cmd_info(int argc, char **argv) {
    if (argc > 1) {
        int help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
        fprintf(help ? stdout : stderr, "usage: flashattn info\n\n"
                "Version, the kernel path in use and those this CPU can run, the CPU,\n"
                "its caches (as the tile planner sees them) and the thread count.\n");
        return help ? 0 : 2;
    }
    char model[256], a[32], b[32], c[32];
    const char *names[8];
    const int n = fa_available_isas(names, 8);
    const char *forced = getenv("FLASHATTN_ISA");
    const fa_cpu_caches *cc = fa_cpu_caches_get();
    cpu_model(model, sizeof model);

    printf("flashattn       %s\n", flashattn_version());
    printf("kernel path     %s", flashattn_isa());
    if (forced) printf("  (FLASHATTN_ISA=%s)", forced);
    printf("\navailable paths");
    for (int i = 0; i < n; i++) printf(" %s", names[i]);
    /* paths the library never picks on its own (kernels/isa_list.h says why) */
    for (int i = 0; !forced && i < n; i++)
        if (!fa_isa_automatic(names[i]))
            printf("  (%s only with FLASHATTN_ISA=%s)", names[i], names[i]);
    printf("\ncpu             %s\n", model);
    printf("caches          L1d %s, L2 %s, L3 %s, line %lld B  (from %s)\n",
           size_text(cc->l1d_bytes, a, sizeof a), size_text(cc->l2_bytes, b, sizeof b),
           size_text(cc->l3_bytes, c, sizeof c), (long long)cc->line_bytes, cc->source);
#ifdef _OPENMP
    printf("threads         %d (OpenMP max; OMP_NUM_THREADS changes it)\n", omp_get_max_threads());
#else
    printf("threads         1 (built without OpenMP)\n");
#endif
    return 0;
}
