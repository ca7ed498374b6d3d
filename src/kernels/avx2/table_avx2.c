/* The AVX2 kernel table; dispatch hands it out only when fa_cpu_avx2()
 * says the CPU has AVX2, FMA and F16C. */
#include "kernels/avx2/avx2.h"
#include "kernels/ref/ref.h"

const fa_kernels fa_kernels_avx2 = {
    .isa = "avx2",
    .cpu_supported = fa_cpu_avx2,
    .mr = FA_AVX2_MR,
    .nr = FA_AVX2_NR,
    .gemm = fa_gemm_avx2,
    .row_max = fa_row_max_avx2,
    .all_finite = fa_all_finite_avx2,
    .exp2_sum = fa_exp2_sum_avx2,
    .scale = fa_scale_avx2,
    .scale_cols = fa_scale_cols_avx2,
    .load = fa_load_avx2,
    .store = fa_store_avx2,
    .store_stream = fa_store_stream_avx2,
    .store_fence = fa_store_fence_avx2,
    .gemm_nt = fa_gemm_nt_avx2,
    .gemm_rows = fa_gemm_rows_avx2,
    .transpose = fa_transpose_avx2,
    .gemm_bf16 = fa_gemm_bf16_ref, /* no bf16 instruction: bf16 inputs are widened */
    .gemm_bf16_done = fa_noop_ref,
    .dropout_row = fa_dropout_row_avx2,
    .dropout_cols = fa_dropout_cols_avx2,
    .softcap_row = fa_softcap_row_avx2,
    .quant_u8 = fa_quant_u8_avx2,
    .quant_i8_row = fa_quant_i8_row_avx2,
    .amax_acc = fa_amax_acc_avx2,
    .quant_i8_with = fa_quant_i8_with_avx2,
    .gemm_u8 = fa_gemm_u8_avx2,
    .gemm_i8 = fa_gemm_i8_avx2,
    .gemm_i8_way = fa_gemm_i8_way_avx2,
    .alibi_row = fa_alibi_row_avx2,
};
