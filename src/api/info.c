/* flashattn_info: the build and machine report `flashattn info` and
 * `python -m flashattn info` print. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "dispatch/isa.h"
#include "flashattn.h"
#include "plan/cpu_caches.h"

typedef struct {
    char *p;
    size_t left;
} text;

static void add(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(t->p, t->left, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    const size_t used = (size_t)n < t->left ? (size_t)n : t->left ? t->left - 1 : 0;
    t->p += used, t->left -= used;
}

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

const char *flashattn_info(void) {
    static _Thread_local char buf[2048];
    text t = {buf, sizeof buf};
    char model[256], a[32], b[32], c[32];
    const char *names[8];
    const int n = fa_available_isas(names, 8);
    const char *forced = getenv("FLASHATTN_ISA");
    const fa_cpu_caches *cc = fa_cpu_caches_get();
    cpu_model(model, sizeof model);
    add(&t, "flashattn       %s\n", flashattn_version());
    add(&t, "kernel path     %s", flashattn_isa());
    if (forced) add(&t, "  (FLASHATTN_ISA=%s)", forced);
    add(&t, "\navailable paths");
    for (int i = 0; i < n; i++) add(&t, " %s", names[i]);
    /* paths the library never picks on its own (kernels/isa_list.h says why) */
    for (int i = 0; !forced && i < n; i++)
        if (!fa_isa_automatic(names[i])) add(&t, "  (%s only with FLASHATTN_ISA=%s)", names[i], names[i]);
    const fa_kernels *kern = fa_active_kernels();
    if (kern) add(&t, "\nint8 q k^T      %s", kern->gemm_i8_way());
    add(&t, "\ncpu             %s\n", model);
    add(&t, "caches          L1d %s, L2 %s, L3 %s, line %lld B  (from %s)\n",
        size_text(cc->l1d_bytes, a, sizeof a), size_text(cc->l2_bytes, b, sizeof b),
        size_text(cc->l3_bytes, c, sizeof c), (long long)cc->line_bytes, cc->source);
#ifdef _OPENMP
    add(&t, "threads         %d (OpenMP max; OMP_NUM_THREADS changes it)\n", omp_get_max_threads());
#else
    add(&t, "threads         1 (built without OpenMP)\n");
#endif
    return buf;
}
