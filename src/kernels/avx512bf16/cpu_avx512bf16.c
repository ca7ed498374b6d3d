/* Whether the CPU runs the AVX512_BF16 table: AVX-512 and VDPBF16PS
 * (CPUID.7.1:EAX bit 5). Compiled without the path's flags (the build
 * leaves cpu_*.c at the baseline target). */
#include <cpuid.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"

int fa_cpu_avx512bf16(void) {
    unsigned a, b, c, d;
    if (!fa_cpu_avx512()) return 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
