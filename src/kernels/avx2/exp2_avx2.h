/*
 * exp2 of 8 floats for the softmax, AVX2 + FMA: t = x - max, so t <= 0.
 *
 * The reduction of exp2_avx512.h: t = n + r with n = round(t), r in
 * [-1/2, 1/2], both exact; 2^r by its degree-6 polynomial with p(0) = 1
 * exactly, evaluated here in powers of r^2 rather than by Horner's rule.
 * A softmax row's exp2 is bound by the latency of each vector's chain,
 * not by the FMA pipes: the out-of-order window holds only a few vectors'
 * chains, and Horner's six dependent FMAs were most of a chain. In powers
 * of r^2 the chain is three FMAs after r^2 (one product more), and
 * VROUNDPS gives n in one step where adding and subtracting 1.5 * 2^23
 * took two. AVX2 has no VSCALEFPS, so 2^n is built in the exponent field,
 * split in two factors so that subnormal results are still rounded once
 * and correctly; where every result of a vector is normal
 * (fa_exp2_normal_avx2), n is added to the exponent field of 2^r instead,
 * which gives the same bits for a third of the scaling's instructions.
 *
 * Error bound: measured maximum over every float t in [-160, 0] is 1.30
 * ulp of the result (for subnormal results 1 ulp is 2^-149), against the
 * 4 ulp the kernel contract allows. t = -inf and t < -150 give exactly +0;
 * never NaN for t in [-inf, 0]; NaN for a NaN t.
 */
#ifndef FA_EXP2_AVX2_H
#define FA_EXP2_AVX2_H

#include <immintrin.h>

/* t = n + r with n = round-to-nearest-even(t), r in [-1/2, 1/2], both
 * exact, and 2^r: returns 2^r, and in *v the sum t + 1.5 * 2^23 whose low
 * mantissa bits hold n. Valid for finite |t| < 2^22. */
static inline __attribute__((always_inline)) __m256 fa_exp2_reduce_avx2(__m256 t, __m256 *v) {
    /* Adding 1.5 * 2^23 leaves no fraction bits in the sum, so the integer
     * n sits in v's low mantissa bits: bits(v) - bits(1.5 * 2^23) = n.
     * VROUNDPS gives the same n (to nearest even) off v's chain. */
    *v = _mm256_add_ps(t, _mm256_set1_ps(0x1.8p23f));
    const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

    /* r = t - n is exact (Sterbenz: n and t are within a factor 2, or n = 0). */
    const __m256 r = _mm256_sub_ps(t, n);

    /* 2^r ~ 1 + c1 r + ... + c6 r^6 = A + r^2 (B + r^2 (C + r^2 c6)),
     * with A = 1 + c1 r, B = c2 + c3 r, C = c4 + c5 r independent. */
    const __m256 r2 = _mm256_mul_ps(r, r);
    const __m256 a = _mm256_fmadd_ps(_mm256_set1_ps(0x1.62e432p-1f), r, _mm256_set1_ps(1.0f));          /* c1 */
    const __m256 b = _mm256_fmadd_ps(_mm256_set1_ps(0x1.c6ae72p-5f), r, _mm256_set1_ps(0x1.ebfbe2p-3f)); /* c3, c2 */
    const __m256 c = _mm256_fmadd_ps(_mm256_set1_ps(0x1.5f7276p-10f), r, _mm256_set1_ps(0x1.3b270ep-7f)); /* c5, c4 */
    const __m256 z = _mm256_fmadd_ps(_mm256_set1_ps(0x1.470b4ap-13f), r2, c);                           /* c6 */
    return _mm256_fmadd_ps(_mm256_fmadd_ps(z, r2, b), r2, a);
}

/* Every t in [-inf, 0] (and the few ulp above 0 the backward passes). */
static inline __m256 fa_exp2_avx2(__m256 t) {
    /* Clamp first: 2^-160 rounds to 0 like everything below it, and a
     * finite t keeps r = t - n from becoming -inf - -inf = NaN. VMAXPS
     * returns its second operand when either is NaN, so a NaN t (outside
     * the contract) stays NaN, as on the other paths. */
    t = _mm256_max_ps(_mm256_set1_ps(-160.0f), t);
    __m256 v;
    const __m256 p = fa_exp2_reduce_avx2(t, &v);

    /* 2^n = 2^n1 * 2^n2 with n1 = floor(n/2), n2 = n - n1, both in
     * [-80, 0]: each factor is a normal float built as (e + 127) << 23.
     * p * 2^n1 is exact (p in [0.70, 1.42]); the second product rounds once,
     * to a subnormal or to 0 where the result is that small. */
    const __m256 magic = _mm256_set1_ps(0x1.8p23f);
    const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(v), _mm256_castps_si256(magic));
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* Where no lane of a or b is below FA_EXP2_NORMAL_MIN (nor NaN), every
 * result is a normal float and fa_exp2_normal_avx2 gives fa_exp2_avx2's
 * bits with 2 integer operations in place of 7 and a product: it scales
 * by adding n to p's exponent field, exact when p * 2^n is normal (p >=
 * 0.70 and n >= -125). The softmax rows nearly always qualify; a vector
 * that does not (a masked -inf, a probability below 2^-125) takes
 * fa_exp2_avx2. */
#define FA_EXP2_NORMAL_MIN (-125.0f)

static inline __attribute__((always_inline)) int fa_exp2_all_normal_avx2(__m256 a, __m256 b) {
    const __m256 lo = _mm256_set1_ps(FA_EXP2_NORMAL_MIN);
    /* not-greater-or-equal, unordered: a NaN lane fails the test too */
    return !_mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(a, lo, _CMP_NGE_UQ), _mm256_cmp_ps(b, lo, _CMP_NGE_UQ)));
}

static inline __attribute__((always_inline)) __m256 fa_exp2_normal_avx2(__m256 t) {
    __m256 v;
    const __m256 p = fa_exp2_reduce_avx2(t, &v);
    /* bits(v) << 23 is n << 23: the magic constant's bits shift out */
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(v), 23)));
}

#endif
