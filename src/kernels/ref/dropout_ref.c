/* Portable dropout of a row: the definition of dropout_row (kernels.h),
 * one Philox call per four columns (a group of four: j / 4). */
#include "core/philox.h"
#include "kernels/ref/ref.h"

void fa_dropout_row_ref(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                        int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && j0 >= 0);
    for (int64_t g = j0 >> 2; g << 2 < j0 + n; g++) {
        const uint32_t ctr[4] = {(uint32_t)g, row, (uint32_t)offset, (uint32_t)(offset >> 32)};
        uint32_t r[4];
        fa_philox4x32_10(ctr, key, r);
        for (int w = 0; w < 4; w++) {
            const int64_t t = (g << 2) + w - j0;
            if (t >= 0 && t < n) x[t] = r[w] >= threshold ? x[t] * scale : 0.0f;
        }
    }
}
