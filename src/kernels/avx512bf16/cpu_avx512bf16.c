/* Whether the CPU runs the AVX512_BF16 table: AVX-512 and VDPBF16PS.
 * Compiled without the path's flags (the build leaves cpu_*.c at the
 * baseline target). */
#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"

int fa_cpu_avx512bf16(void) {
    __builtin_cpu_init();
    return fa_cpu_avx512() && __builtin_cpu_supports("avx512bf16");
}
