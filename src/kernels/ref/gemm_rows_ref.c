/*
 * Portable C (=, +=) A . B with B given as rows in a storage dtype: the
 * definition of gemm_rows in kernels.h. Column blocks of NR go through the
 * portable gemm on an f32 copy of B's block (widening is exact), so each
 * element is gemm's FMA chain by construction.
 */
#include "core/dtype.h"
#include "kernels/ref/ref.h"

#define KSTEP 64 /* rows of B widened at a time */

void fa_gemm_rows_ref(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                      flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                      int64_t pf) {
    FA_KERNEL_CONTRACT(m >= 0 && n >= 0 && k >= 0 && fa_dtype_valid(bt));
    (void)pf; /* a hint the portable kernel does not take */
    float w[KSTEP * FA_REF_NR];
    for (int i0 = 0; i0 < m; i0 += FA_REF_MR) {
        const int mm = m - i0 < FA_REF_MR ? m - i0 : FA_REF_MR;
        for (int j0 = 0; j0 < n; j0 += FA_REF_NR) {
            const int nn = n - j0 < FA_REF_NR ? n - j0 : FA_REF_NR;
            float *cb = c + i0 * ldc + j0;
            if (k == 0 && !accumulate)
                fa_gemm_block_ref(mm, nn, 0, a, lda, w, FA_REF_NR, cb, ldc, 0);
            for (int64_t p0 = 0; p0 < k; p0 += KSTEP) {
                const int64_t kk = k - p0 < KSTEP ? k - p0 : KSTEP;
                for (int64_t p = 0; p < kk; p++)
                    for (int j = 0; j < nn; j++) {
                        const int64_t at = (p0 + p) * ldb + j0 + j;
                        w[p * FA_REF_NR + j] = fa_widen(b, bt, at);
                    }
                fa_gemm_block_ref(mm, nn, kk, a + i0 * lda + p0, lda, w, FA_REF_NR, cb, ldc,
                            accumulate || p0 > 0);
            }
        }
    }
}
