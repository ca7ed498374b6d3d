/*
 * Kernel dispatch. The library is built for the baseline x86-64 (or any
 * other) target; SIMD tables are compiled per file with their own flags and
 * only handed out when CPUID says the CPU (and the OS, via XSAVE state) can
 * run them. No SIGILL probing, no process-wide side effects beyond a
 * once-initialised pointer and, on Linux CPUs with AMX, the one request
 * that lets the process use tile data (below).
 */
#include "dispatch/isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

#if defined(FA_HAVE_AMX) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* AMX needs the CPU (CPUID.7.0:EDX AMX-BF16 bit 22, AMX-TILE bit 24), the
 * OS saving tile state (XCR0 bits 17 and 18) and, on Linux, the process's
 * permission to use tile data, asked once (arch_prctl ARCH_REQ_XCOMP_PERM
 * for XFEATURE_XTILEDATA; without it the first tile load faults). Other
 * systems are not offered AMX. The permission enlarges the process's
 * signal frames (Linux then refuses alternate signal stacks smaller than
 * AT_MINSIGSTKSZ); FLASHATTN_ISA=avx512 keeps the library from asking. */
static int amx_ready;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void probe_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return;
#ifdef __linux__
    amx_ready = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#endif
}

static int have_amx(void) {
    pthread_once(&amx_once, probe_amx);
    return amx_ready;
}
#endif

static int cpu_has(const char *isa) {
    if (strcmp(isa, "scalar") == 0) return 1;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#ifdef FA_HAVE_AVX2
    if (strcmp(isa, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
#endif
#ifdef FA_HAVE_AVX512
    if (strcmp(isa, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
#ifdef FA_HAVE_AVX512BF16
    if (strcmp(isa, "avx512bf16") == 0)
        return cpu_has("avx512") && __builtin_cpu_supports("avx512bf16");
#endif
#ifdef FA_HAVE_AMX
    if (strcmp(isa, "amx") == 0) return cpu_has("avx512") && have_amx();
#endif
#endif
    return 0;
}

const fa_kernels *fa_kernels_by_name(const char *isa) {
    if (!isa || !cpu_has(isa)) return NULL;
    if (strcmp(isa, "scalar") == 0) return &fa_kernels_scalar;
#ifdef FA_HAVE_AVX2
    if (strcmp(isa, "avx2") == 0) return &fa_kernels_avx2;
#endif
#ifdef FA_HAVE_AVX512
    if (strcmp(isa, "avx512") == 0) return &fa_kernels_avx512;
#endif
#ifdef FA_HAVE_AVX512BF16
    if (strcmp(isa, "avx512bf16") == 0) return &fa_kernels_avx512bf16;
#endif
#ifdef FA_HAVE_AMX
    if (strcmp(isa, "amx") == 0) return &fa_kernels_amx;
#endif
    return NULL;
}

static const char *const all_isas[] = {"scalar", "avx2", "avx512", "avx512bf16", "amx"};

int fa_available_isas(const char *names[], int max) {
    int n = 0;
    for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++)
        if (n < max && fa_kernels_by_name(all_isas[i])) names[n++] = all_isas[i];
    return n;
}

static const fa_kernels *active;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

/* The paths the library picks on its own, best first. amx is avx512 but
 * for bf16 inputs: it runs both products of the forward (and S and dP of
 * the backward) on AMX tiles, where avx512 and avx2 widen bf16 to f32
 * when packing, as they do f16. Measured on a 16-core Sapphire Rapids server
 * (2026-11-29, one thread, seq 1024 and 4096, against the same call on f32
 * copies of the inputs): amx 2.40x and 2.37x the f32 speed, widening
 * 1.00-1.01x.
 *
 * avx512bf16 is not among them; FLASHATTN_ISA=avx512bf16 selects it. On
 * that CPU VDPBF16PS ran at half the rate of the FP32 FMA (the peak loops:
 * 80-84 against 156-174 GFLOP/s), and that route took 1.4-1.7x the time
 * of widening. It stays for CPUs where the instruction runs at full rate
 * and AMX is absent (none measured so far). On a 2-core Emerald Rapids VM
 * without AMX (2026-11-30) it was the same: the dot-product peak 87-88
 * against 176-179 GFLOP/s, the route 0.55-0.57x the speed of widening. */
static const char *const default_order[] = {"amx", "avx512", "avx2", "scalar"};

static void choose_active(void) {
    const char *forced = getenv("FLASHATTN_ISA");
    const fa_kernels *k = forced ? fa_kernels_by_name(forced) : NULL;
    for (size_t i = 0; !k && i < sizeof default_order / sizeof default_order[0]; i++)
        k = fa_kernels_by_name(default_order[i]);
    active = k;
}

const fa_kernels *fa_active_kernels(void) {
    pthread_once(&active_once, choose_active);
    return active;
}

const char *flashattn_isa(void) { return fa_active_kernels()->isa; }
