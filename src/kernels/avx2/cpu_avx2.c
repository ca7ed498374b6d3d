/* Whether the CPU runs the AVX2 table. Compiled without the path's flags
 * (the build leaves cpu_*.c at the baseline target), so it runs anywhere. */
#include "kernels/avx2/avx2.h"

int fa_cpu_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}
