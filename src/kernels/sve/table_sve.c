/* The SVE kernel table: SVE's GEMM tile and exp2, the NEON path's other
 * entries; dispatch hands it out only when fa_cpu_sve() says yes. */
#include "kernels/neon/neon.h"
#include "kernels/ref/ref.h"
#include "kernels/sve/sve.h"

const fa_kernels fa_kernels_sve = {
    .isa = "sve",
    .cpu_supported = fa_cpu_sve,
    .mr = FA_SVE_MR,
    .nr = FA_SVE_NR,
    .gemm = fa_gemm_sve,
    .row_max = fa_row_max_neon,
    .all_finite = fa_all_finite_ref, /* portable C, vectorised by the compiler */
    .exp2_sum = fa_exp2_sum_sve,
    .scale = fa_scale_neon,
    .scale_cols = fa_scale_cols_ref,
    .load = fa_load_neon,
    .store = fa_store_neon,
    .store_stream = fa_store_neon,
    .store_fence = fa_noop_ref,
    .gemm_nt = fa_gemm_nt_neon,
    .gemm_rows = fa_gemm_rows_neon,
    .transpose = fa_transpose_neon,
    .gemm_bf16 = fa_gemm_bf16_ref, /* as in the NEON table (docs/arm.md) */
    .gemm_bf16_done = fa_noop_ref,
    .dropout_row = fa_dropout_row_neon,
    .dropout_cols = fa_dropout_cols_neon,
    .softcap_row = fa_softcap_row_neon,
    .quant_u8 = fa_quant_u8_ref,
    .quant_i8_row = fa_quant_i8_row_ref,
    .amax_acc = fa_amax_acc_ref,
    .quant_i8_with = fa_quant_i8_with_ref,
    .gemm_u8 = fa_gemm_u8_ref, /* no SDOT kernel yet: the portable definition */
    .gemm_i8 = fa_gemm_i8_ref, /* no SDOT kernel yet: the portable definition */
    .gemm_i8_way = fa_gemm_i8_way_ref,
    .alibi_row = fa_alibi_row_neon,
};
