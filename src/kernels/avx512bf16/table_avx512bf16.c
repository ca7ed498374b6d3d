/* The AVX512_BF16 kernel table: the AVX-512 one plus the bf16 dot-product
 * tile, which bf16 inputs then run on. Dispatch hands it out only when
 * fa_cpu_avx512bf16() says the CPU also has AVX512_BF16. */
#include "kernels/avx2/avx2.h"
#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"
#include "kernels/ref/ref.h"

const fa_kernels fa_kernels_avx512bf16 = {
    .isa = "avx512bf16",
    .cpu_supported = fa_cpu_avx512bf16,
    FA_AVX512_ENTRIES,
    .bf16_dot = 1,
    .gemm_bf16 = fa_gemm_bf16_avx512bf16,
    .gemm_bf16_done = fa_noop_ref,
    .dropout_row = fa_dropout_row_avx2, /* AVX2 is there; the mask is the same bits */
    .dropout_cols = fa_dropout_cols_avx2,
    .softcap_row = fa_softcap_row_avx2,
    .alibi_row = fa_alibi_row_avx2,
    .quant_u8 = fa_quant_u8_avx512,
    .quant_i8_row = fa_quant_i8_row_avx512,
    .amax_acc = fa_amax_acc_avx512,
    .quant_i8_with = fa_quant_i8_with_avx512,
    .gemm_u8 = fa_gemm_u8_avx512,
    .gemm_i8 = fa_gemm_i8_avx512,
    .gemm_i8_way = fa_gemm_i8_way_avx512,
};
