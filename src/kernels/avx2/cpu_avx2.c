/* Whether the CPU runs the AVX2 table. Compiled without the path's flags
 * (the build leaves cpu_*.c at the baseline target), so it runs anywhere.
 * Read from CPUID and XCR0 rather than __builtin_cpu_supports: clang's
 * builtin knows no "f16c". The table needs AVX2 (CPUID.7.0:EBX bit 5), FMA
 * and F16C (CPUID.1:ECX bits 12 and 29) and AVX (bit 28), and the OS
 * saving the SSE and AVX state across context switches (OSXSAVE, bit 27,
 * then XCR0 bits 1 and 2): without that the first ymm instruction faults. */
#include <cpuid.h>

#include "kernels/avx2/avx2.h"

int fa_cpu_avx2(void) {
    unsigned a, b, c, d;
    const unsigned need1 = 1u << 12 | 1u << 27 | 1u << 28 | 1u << 29;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & need1) != need1) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 5))) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
}

int fa_cpu_avx_vnni(void) {
    unsigned a, b, c, d;
    return fa_cpu_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}
