/* The AVX-512 kernel table; isa.c hands it out only when CPUID reports
 * AVX-512 F/BW/VL/DQ (FMA and F16C come with them on every such CPU). */
#include "kernels/avx512/avx512.h"

const fa_kernels fa_kernels_avx512 = {.isa = "avx512", FA_AVX512_ENTRIES};
