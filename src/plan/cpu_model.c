/*
 * CPUID's brand string first (x86: no file to open, works where /proc is
 * hidden), /proc/cpuinfo's "model name" elsewhere.
 */
#include "plan/cpu_model.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h> /* inline asm wrappers for CPUID, not SIMD intrinsics */
#endif

/* Copy src into out, folding white space: the brand string pads with
 * spaces, and a tab would break the tuning file's columns. */
static void fold_spaces(const char *src, char *out, size_t n) {
    size_t w = 0;
    int space = 0;
    for (const char *c = src; *c && w + 1 < n; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r') {
            space = w > 0;
            continue;
        }
        if (space && w + 2 < n) out[w++] = ' ';
        space = 0;
        out[w++] = *c;
    }
    out[w] = '\0';
}

static int from_cpuid(char *out, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned int regs[12], max = __get_cpuid_max(0x80000000u, NULL);
    if (max < 0x80000004u) return 0;
    for (unsigned int i = 0; i < 3; i++)
        __cpuid(0x80000002u + i, regs[4 * i], regs[4 * i + 1], regs[4 * i + 2], regs[4 * i + 3]);
    char brand[sizeof regs + 1];
    memcpy(brand, regs, sizeof regs);
    brand[sizeof regs] = '\0';
    fold_spaces(brand, out, n);
    return out[0] != '\0';
#else
    (void)out, (void)n;
    return 0;
#endif
}

static int from_proc(char *out, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !v) continue;
        fold_spaces(v + 1, out, n);
        found = out[0] != '\0';
    }
    fclose(f);
    return found;
}

static char model[128];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Once per process: CPUID traps to the hypervisor in a VM (microseconds),
 * and the forward pass asks on every call that reads a tuning file. */
static void detect(void) {
    if (!from_cpuid(model, sizeof model) && !from_proc(model, sizeof model))
        snprintf(model, sizeof model, "unknown");
}

void fa_cpu_model(char *out, size_t n) {
    pthread_once(&once, detect);
    if (n) snprintf(out, n, "%s", model);
}
