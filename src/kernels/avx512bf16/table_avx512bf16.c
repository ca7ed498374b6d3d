/* The AVX512_BF16 kernel table: the AVX-512 one plus the bf16 dot-product
 * tile. isa.c hands it out only when CPUID also reports AVX512_BF16. */
#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"

const fa_kernels fa_kernels_avx512bf16 = {
    .isa = "avx512bf16",
    .mr = FA_AVX512_MR,
    .nr = FA_AVX512_NR,
    .gemm = fa_gemm_avx512,
    .row_max = fa_row_max_avx512,
    .exp2_sum = fa_exp2_sum_avx512,
    .scale = fa_scale_avx512,
    .load = fa_load_avx512,
    .store = fa_store_avx512,
    .gemm_nt = fa_gemm_nt_avx512,
    .gemm_rows = fa_gemm_rows_avx512,
    .transpose = fa_transpose_avx512,
    .gemm_bf16 = fa_gemm_bf16_avx512bf16,
};
