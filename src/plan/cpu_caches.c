/*
 * Cache detection: Linux sysfs first (it is what the kernel itself
 * enumerated, and it works on any architecture), CPUID's deterministic
 * cache leaves as the fallback where sysfs is missing (containers that hide
 * /sys, other x86 systems). Nothing here is process-wide beyond the
 * once-initialised result.
 */
#include "plan/cpu_caches.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h> /* inline asm wrappers for CPUID, not SIMD intrinsics */
#endif

int fa_parse_cache_size(const char *text, int64_t *bytes) {
    int64_t v = 0;
    const char *c = text;
    if (*c < '0' || *c > '9') return 0;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*c - '0');
    }
    int shift = 0;
    if (*c == 'K') shift = 10, c++;
    else if (*c == 'M') shift = 20, c++;
    else if (*c == 'G') shift = 30, c++;
    if (*c == '\n') c++;
    if (*c != '\0' || v > (INT64_MAX >> shift)) return 0;
    *bytes = v << shift;
    return 1;
}

/* One sysfs attribute, trailing newline kept; 0 if it cannot be read. */
static int read_attr(int index, const char *name, char *buf, size_t n) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    if (got <= 0) return 0;
    buf[got] = '\0';
    return 1;
}

/* Record one cache; instruction caches are of no use to the planner. */
static void note_cache(fa_cpu_caches *out, int level, int is_instruction, int64_t bytes,
                       int64_t line) {
    if (is_instruction || bytes <= 0) return;
    if (level == 1) {
        out->l1d_bytes = bytes;
        if (line > 0) out->line_bytes = line;
    } else if (level == 2) {
        out->l2_bytes = bytes;
    } else if (level == 3) {
        out->l3_bytes = bytes;
    }
}

int fa_cpu_caches_from_sysfs(fa_cpu_caches *out) {
    memset(out, 0, sizeof *out);
    out->source = "none";
    /* Index numbers are dense from 0; 16 is far above any CPU's count. */
    for (int i = 0; i < 16; i++) {
        char level[16], type[32], size[32], line[16];
        int64_t bytes, line_bytes = 0;
        if (!read_attr(i, "level", level, sizeof level) || !read_attr(i, "type", type, sizeof type) ||
            !read_attr(i, "size", size, sizeof size))
            break;
        if (!fa_parse_cache_size(size, &bytes)) continue;
        if (read_attr(i, "coherency_line_size", line, sizeof line) &&
            !fa_parse_cache_size(line, &line_bytes))
            line_bytes = 0;
        note_cache(out, level[0] - '0', strncmp(type, "Instruction", 11) == 0, bytes, line_bytes);
    }
    if (!out->l1d_bytes) {
        memset(out, 0, sizeof *out);
        out->source = "none";
        return 0;
    }
    out->source = "sysfs";
    return 1;
}

#if defined(__x86_64__) || defined(__i386__)
/* Intel's leaf 4 and AMD's leaf 0x8000001D share one layout: EAX[4:0] type
 * (0 ends the list, 2 is instruction), EAX[7:5] level, and the size is
 * ways * partitions * line * sets, each field stored minus one. */
static int walk_cache_leaf(unsigned leaf, fa_cpu_caches *out) {
    for (unsigned sub = 0; sub < 16; sub++) {
        unsigned a, b, c, d;
        if (!__get_cpuid_count(leaf, sub, &a, &b, &c, &d)) return 0;
        unsigned type = a & 31u;
        if (type == 0) break;
        int64_t ways = (b >> 22) + 1, parts = ((b >> 12) & 1023u) + 1, line = (b & 4095u) + 1;
        int64_t sets = (int64_t)c + 1;
        note_cache(out, (int)((a >> 5) & 7u), type == 2, ways * parts * line * sets, line);
    }
    return out->l1d_bytes > 0;
}

int fa_cpu_caches_from_cpuid(fa_cpu_caches *out) {
    unsigned a, b, c, d;
    memset(out, 0, sizeof *out);
    out->source = "none";
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    const unsigned max_leaf = a;
    char vendor[13];
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    int found = 0;
    if (strcmp(vendor, "GenuineIntel") == 0 && max_leaf >= 4) {
        found = walk_cache_leaf(4, out);
    } else if (strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0) {
        /* leaf 0x8000001D exists only with the TOPOEXT feature */
        if (__get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 22)) &&
            (unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x8000001Du)
            found = walk_cache_leaf(0x8000001Du, out);
    }
    if (!found) {
        memset(out, 0, sizeof *out);
        out->source = "none";
        return 0;
    }
    out->source = "cpuid";
    return 1;
}
#else
int fa_cpu_caches_from_cpuid(fa_cpu_caches *out) {
    memset(out, 0, sizeof *out);
    out->source = "none";
    return 0;
}
#endif

static fa_cpu_caches detected;
static pthread_once_t detected_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    if (!fa_cpu_caches_from_sysfs(&detected)) fa_cpu_caches_from_cpuid(&detected);
}

const fa_cpu_caches *fa_cpu_caches_get(void) {
    pthread_once(&detected_once, detect);
    return &detected;
}
