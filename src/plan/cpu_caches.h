/*
 * Run-time cache sizes of the CPU we run on, for the tile planner and
 * `flashattn info`. Sizes are per cache instance as the OS reports them
 * (L3 is usually shared by many cores; L1d and L2 are per core).
 */
#ifndef FA_CPU_CACHES_H
#define FA_CPU_CACHES_H

#include <stdint.h>

typedef struct fa_cpu_caches {
    int64_t l1d_bytes; /* 0: unknown */
    int64_t l2_bytes;  /* 0: unknown */
    int64_t l3_bytes;  /* 0: unknown, or the CPU has no L3 */
    int64_t line_bytes;
    const char *source; /* "sysfs", "cpuid" or "none" */
} fa_cpu_caches;

/* Detected once per process (thread-safe); never NULL. */
const fa_cpu_caches *fa_cpu_caches_get(void);

/* Each detector on its own, for tests and `info`: returns 1 if it found
 * at least L1d, else 0 with *out zeroed. Neither prints nor allocates. */
int fa_cpu_caches_from_sysfs(fa_cpu_caches *out);
int fa_cpu_caches_from_cpuid(fa_cpu_caches *out);

/* Parse a sysfs size such as "48K", "1280K", "32M" or "512" into bytes;
 * returns 0 on malformed text. */
int fa_parse_cache_size(const char *text, int64_t *bytes);

#endif
