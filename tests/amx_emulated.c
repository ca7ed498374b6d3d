/* The AMX bf16 tile with its tile instructions emulated in C (see its
 * source), so that its configuration, strides, remainders and epilogue are
 * tested bit for bit on CPUs without AMX. */
#define FA_AMX_EMULATE
#include "kernels/amx/gemm_bf16_amx.c"
