/*
 * Kernel dispatch. The library is built for the baseline x86-64 (or any
 * other) target; SIMD tables are compiled per file with their own flags and
 * only handed out when CPUID says the CPU (and the OS, via XSAVE state) can
 * run them. No SIGILL probing, no process-wide side effects beyond a
 * once-initialised pointer.
 */
#include "dispatch/isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

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
    return NULL;
}

static const char *const all_isas[] = {"scalar", "avx2", "avx512", "avx512bf16"};

int fa_available_isas(const char *names[], int max) {
    int n = 0;
    for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++)
        if (n < max && fa_kernels_by_name(all_isas[i])) names[n++] = all_isas[i];
    return n;
}

static const fa_kernels *active;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

/* The paths the library picks on its own, best first. avx512bf16 is not
 * among them; FLASHATTN_ISA=avx512bf16 selects it. On the one AVX512_BF16
 * CPU measured so far (16 cores of a Sapphire Rapids server with AMX,
 * 2026-11-29, one thread), VDPBF16PS ran at half the rate of the FP32 FMA
 * (the peak loops: 80-83 against 156-170 GFLOP/s), and the forward with
 * bf16 inputs on that route took 1.6-1.7x the time of the same call on f32
 * copies (seq 1024 and 4096), where f16 inputs, widened to f32 when
 * packed, took 1.1x. Widening bf16 the same way is the faster default;
 * the dot-product route stays for CPUs where the instruction runs at
 * full rate (unmeasured here). */
static const char *const default_order[] = {"avx512", "avx2", "scalar"};

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
