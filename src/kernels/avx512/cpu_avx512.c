/* Whether the CPU runs the AVX-512 table (FMA and F16C come with
 * AVX-512 F/BW/VL/DQ on every such CPU). Compiled without the path's
 * flags (the build leaves cpu_*.c at the baseline target). */
#include "kernels/avx512/avx512.h"

int fa_cpu_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
