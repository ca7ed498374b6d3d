/* The AVX-512 kernel table; isa.c hands it out only when CPUID reports
 * AVX-512 F/BW/VL/DQ (FMA and F16C come with them on every such CPU). */
#include "kernels/avx512/avx512.h"
#include "kernels/ref/ref.h"

const fa_kernels fa_kernels_avx512 = {
    .isa = "avx512",
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
};
