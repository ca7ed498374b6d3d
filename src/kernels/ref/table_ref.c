/* The portable kernel table: runs anywhere, defines the contract. */
#include "kernels/ref/ref.h"

void fa_noop_ref(void) {}

int fa_cpu_scalar(void) { return 1; }

const fa_kernels fa_kernels_scalar = {
    .isa = "scalar",
    .cpu_supported = fa_cpu_scalar,
    .mr = FA_REF_MR,
    .nr = FA_REF_NR,
    .gemm = fa_gemm_ref,
    .row_max = fa_row_max_ref,
    .all_finite = fa_all_finite_ref,
    .exp2_sum = fa_exp2_sum_ref,
    .scale = fa_scale_ref,
    .scale_cols = fa_scale_cols_ref,
    .load = fa_load_ref,
    .store = fa_store_ref,
    .store_stream = fa_store_ref, /* portable C has no non-temporal store */
    .store_fence = fa_noop_ref,
    .gemm_nt = fa_gemm_nt_ref,
    .gemm_rows = fa_gemm_rows_ref,
    .transpose = fa_transpose_ref,
    .gemm_bf16 = fa_gemm_bf16_ref, /* the definition; bf16 inputs are widened here */
    .gemm_bf16_done = fa_noop_ref,
    .dropout_row = fa_dropout_row_ref,
    .dropout_cols = fa_dropout_cols_ref,
    .softcap_row = fa_softcap_row_ref,
    .quant_u8 = fa_quant_u8_ref,
    .quant_i8_row = fa_quant_i8_row_ref,
    .amax_acc = fa_amax_acc_ref,
    .quant_i8_with = fa_quant_i8_with_ref,
    .gemm_u8 = fa_gemm_u8_ref,
    .gemm_i8 = fa_gemm_i8_ref,
    .gemm_i8_way = fa_gemm_i8_way_ref,
    .alibi_row = fa_alibi_row_ref,
};
