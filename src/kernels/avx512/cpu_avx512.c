/* Whether the CPU runs the AVX-512 table. Compiled without the path's
 * flags (the build leaves cpu_*.c at the baseline target). Read from CPUID
 * and XCR0 rather than __builtin_cpu_supports, which clang does not accept
 * for every feature (cpu_avx2.c). The table needs AVX-512 F, DQ, BW and VL
 * (CPUID.7.0:EBX bits 16, 17, 30, 31), FMA and F16C (CPUID.1:ECX bits 12
 * and 29, which every AVX-512 CPU has, but the table is compiled with
 * them), and the OS saving the SSE, AVX, opmask and zmm state (OSXSAVE,
 * CPUID.1:ECX bit 27, then XCR0 bits 1, 2 and 5 to 7): without it the
 * first zmm instruction faults. */
#include <cpuid.h>

#include "kernels/avx512/avx512.h"

int fa_cpu_avx512(void) {
    unsigned a, b, c, d;
    const unsigned need1 = 1u << 12 | 1u << 27 | 1u << 29;
    const unsigned need7 = 1u << 16 | 1u << 17 | 1u << 30 | 1u << 31;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & need1) != need1) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (b & need7) != need7) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6u) == 0xe6u;
}

int fa_cpu_avx512_vnni(void) {
    unsigned a, b, c, d;
    return fa_cpu_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
}
