/* The portable kernel table: runs anywhere, defines the contract. */
#include "kernels/ref/ref.h"

const fa_kernels fa_kernels_scalar = {
    .isa = "scalar",
    .mr = FA_REF_MR,
    .nr = FA_REF_NR,
    .gemm = fa_gemm_ref,
    .row_max = fa_row_max_ref,
    .exp2_sum = fa_exp2_sum_ref,
    .scale = fa_scale_ref,
    .load = fa_load_ref,
    .store = fa_store_ref,
    .store_stream = fa_store_ref, /* portable C has no non-temporal store */
    .gemm_nt = fa_gemm_nt_ref,
    .gemm_rows = fa_gemm_rows_ref,
    .transpose = fa_transpose_ref,
};
