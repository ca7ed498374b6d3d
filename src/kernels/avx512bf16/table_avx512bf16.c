/* The AVX512_BF16 kernel table: the AVX-512 one plus the bf16 dot-product
 * tile. isa.c hands it out only when CPUID also reports AVX512_BF16. */
#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"

const fa_kernels fa_kernels_avx512bf16 = {
    .isa = "avx512bf16",
    FA_AVX512_ENTRIES,
    .gemm_bf16 = fa_gemm_bf16_avx512bf16,
};
