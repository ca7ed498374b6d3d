/*
 * exp2_sum (kernels.h) on SVE, any vector length: two vectors a step,
 * the row's end under a predicate (no padded copy). Inactive lanes leave
 * the sums as they are, and elements past a grain of trailing -inf add
 * exact zeros to them, which keeps the contract's grain rule whatever
 * the vector length.
 */
#include <arm_sve.h>

#include "kernels/sve/exp2_sve.h"
#include "kernels/sve/sve.h"

float fa_exp2_sum_sve(float *x, int64_t n, float m) {
    FA_KERNEL_CONTRACT(n >= 0);
    /* At most 16 lanes a vector, so that a lane's partial sum meets the
     * same columns modulo FA_EXP2_SUM_GRAIN whatever the vector length:
     * leading grains of -inf then leave every lane's sum as it was. */
    const int64_t vl = (int64_t)svcntw() < 16 ? (int64_t)svcntw() : 16;
    const svbool_t all = svptrue_b32();
    svfloat32_t s0 = svdup_n_f32(0.0f), s1 = s0;
    for (int64_t i = 0; i < n; i += 2 * vl) {
        const int64_t end0 = i + vl < n ? i + vl : n, end1 = i + 2 * vl < n ? i + 2 * vl : n;
        const svbool_t p0 = svwhilelt_b32_s64(i, end0), p1 = svwhilelt_b32_s64(i + vl, end1);
        const svfloat32_t e0 = fa_exp2_sve(p0, svsub_n_f32_x(p0, svld1_f32(p0, x + i), m));
        const svfloat32_t e1 = fa_exp2_sve(p1, svsub_n_f32_x(p1, svld1_f32(p1, x + i + vl), m));
        svst1_f32(p0, x + i, e0);
        svst1_f32(p1, x + i + vl, e1);
        s0 = svadd_f32_m(p0, s0, e0);
        s1 = svadd_f32_m(p1, s1, e1);
    }
    return svaddv_f32(all, svadd_f32_x(all, s0, s1));
}
