/* The NEON kernel table; dispatch hands it out only when fa_cpu_neon()
 * says the CPU (and OS) run Advanced SIMD. */
#include "kernels/neon/neon.h"
#include "kernels/ref/ref.h"

const fa_kernels fa_kernels_neon = {
    .isa = "neon",
    .cpu_supported = fa_cpu_neon,
    .mr = FA_NEON_MR,
    .nr = FA_NEON_NR,
    .gemm = fa_gemm_neon,
    .row_max = fa_row_max_neon,
    .all_finite = fa_all_finite_ref, /* portable C, vectorised by the compiler */
    .exp2_sum = fa_exp2_sum_neon,
    .scale = fa_scale_neon,
    .scale_cols = fa_scale_cols_ref, /* a few dozen floats a decode piece */
    .load = fa_load_neon,
    .store = fa_store_neon,
    .store_stream = fa_store_neon, /* no non-temporal store in the intrinsics: see docs/arm.md */
    .store_fence = fa_noop_ref,
    .gemm_nt = fa_gemm_nt_neon,
    .gemm_rows = fa_gemm_rows_neon,
    .transpose = fa_transpose_neon,
    .gemm_bf16 = fa_gemm_bf16_ref, /* BFDOT/BFMMLA round otherwise (docs/arm.md): bf16 is widened */
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
