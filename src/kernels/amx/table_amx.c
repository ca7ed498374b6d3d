/* The AMX kernel table: the AVX-512 one plus the bf16 tile on TDPBF16PS,
 * which bf16 inputs then run on. Dispatch hands it out only when
 * fa_cpu_amx() says the CPU has AMX-TILE and AMX-BF16, the OS saves tile
 * state (XCR0) and, on Linux, lets this process use it. */

#include "kernels/avx2/avx2.h"
#include "kernels/ref/ref.h"
#include "kernels/amx/amx.h"
#include "kernels/avx512/avx512.h"

const fa_kernels fa_kernels_amx = {
    .isa = "amx",
    .cpu_supported = fa_cpu_amx,
    FA_AVX512_ENTRIES,
    .bf16_dot = 1,
    .gemm_bf16 = fa_gemm_bf16_amx,
    .gemm_bf16_done = fa_gemm_bf16_amx_done,
    .dropout_row = fa_dropout_row_avx2, /* AVX2 is there; the mask is the same bits */
    .dropout_cols = fa_dropout_cols_avx2,
    .softcap_row = fa_softcap_row_avx2,
    .alibi_row = fa_alibi_row_avx2,
    .quant_u8 = fa_quant_u8_avx512,
    .quant_i8_row = fa_quant_i8_row_avx512,
    .amax_acc = fa_amax_acc_avx512,
    .quant_i8_with = fa_quant_i8_with_avx512,
    .gemm_u8 = fa_gemm_u8_amx,
    .gemm_i8 = fa_gemm_i8_amx,
    .gemm_i8_way = fa_gemm_i8_way_amx,
};

static atomic_int int8;

const char *fa_gemm_i8_way_amx(void) {
    return fa_cpu_once(&int8, fa_cpu_amx_int8) ? "TDPBUSD (AMX-INT8)" : fa_gemm_i8_way_avx512();
}

void fa_gemm_i8_amx(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                    const float *add, float *c, int64_t ldc) {
    if (fa_cpu_once(&int8, fa_cpu_amx_int8))
        fa_gemm_i8_amx_tiles(m, n, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc);
    else
        fa_gemm_i8_avx512(m, n, k4, a, lda, b, ldb, bsum, bscale, ascale, add, c, ldc);
}

void fa_gemm_u8_amx(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                    int accumulate) {
    if (fa_cpu_once(&int8, fa_cpu_amx_int8))
        fa_gemm_u8_amx_tiles(m, n, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate);
    else
        fa_gemm_u8_avx512(m, n, k4, a, lda, b, ldb, bscale, ascale, c, ldc, accumulate);
}
