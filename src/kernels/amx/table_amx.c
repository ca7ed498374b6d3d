/* The AMX kernel table: the AVX-512 one plus the bf16 tile on TDPBF16PS.
 * isa.c hands it out only when CPUID reports AMX-TILE and AMX-BF16, the
 * OS saves tile state (XCR0) and, on Linux, lets this process use it. */
#include "kernels/amx/amx.h"
#include "kernels/avx512/avx512.h"

const fa_kernels fa_kernels_amx = {
    .isa = "amx",
    FA_AVX512_ENTRIES,
    .gemm_bf16 = fa_gemm_bf16_amx,
    .gemm_bf16_done = fa_gemm_bf16_amx_done,
};
