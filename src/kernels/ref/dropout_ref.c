/* Portable dropout of a row: the definition of dropout_row (kernels.h),
 * one Philox call per eight columns (a group: j / 8). */
#include "core/philox.h"
#include "kernels/ref/ref.h"

void fa_dropout_row_ref(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                        int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && j0 >= 0 && threshold < 65536u);
    for (int64_t g = j0 >> 3; g << 3 < j0 + n; g++) {
        const uint32_t ctr[4] = {(uint32_t)g, row, (uint32_t)offset, (uint32_t)(offset >> 32)};
        uint32_t r[4];
        fa_philox4x32_10(ctr, key, r);
        for (int w = 0; w < 8; w++) {
            const int64_t j = (g << 3) + w, t = j - j0;
            if (t >= 0 && t < n) x[t] = fa_dropout_bits(r, j) >= threshold ? x[t] * scale : 0.0f;
        }
    }
}

void fa_dropout_cols_ref(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                         uint64_t offset, int64_t j0, uint32_t threshold, float scale) {
    FA_KERNEL_CONTRACT(n >= 0 && m >= 0 && ld >= m && j0 >= 0 && threshold < 65536u);
    for (int64_t c = 0; c < m; c++)
        for (int64_t g = j0 >> 3; g << 3 < j0 + n; g++) {
            const uint32_t ctr[4] = {(uint32_t)g, row0 + (uint32_t)c, (uint32_t)offset, (uint32_t)(offset >> 32)};
            uint32_t r[4];
            fa_philox4x32_10(ctr, key, r);
            for (int w = 0; w < 8; w++) {
                const int64_t j = (g << 3) + w, t = j - j0;
                if (t >= 0 && t < n) z[t * ld + c] = fa_dropout_bits(r, j) >= threshold ? scale : 0.0f;
            }
        }
}
