/* The AVX512_BF16 GEMM tile built with VDPBF16PS emulated in AVX-512F
 * (see its source), so that its layout, tile and epilogue are tested on
 * CPUs without the instruction. */
#define FA_BF16_EMULATE
#include "kernels/avx512bf16/gemm_bf16_avx512bf16.c"
