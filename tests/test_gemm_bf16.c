/*
 * gemm_bf16 (kernels.h): the portable definition, then every kernel that
 * has one against it.
 *
 * The definition itself: sums of pairs against double within the bound of
 * a float sum in any order, (2 kp + 2) * 2^-24 * sum |a b|; a probe whose
 * result depends on the order within a pair (the odd product first, as
 * Intel's SDM states VDPBF16PS); bf16 subnormal inputs read as zero.
 *
 * Kernels: m 1..12, n 16 and 32, kp from 0 to 70, accumulating (alpha 1)
 * or not (a softmax scale), a sum split over two calls against one call,
 * padded strides, odd pointers, special
 * values (zeros of both signs, bf16 subnormals, large values). The AVX512
 * tile on the emulated instruction must give the definition's bits; so
 * must the real instruction where the CPU has it, except that it is held
 * to the any-order bound (and the probe only reported) in case silicon
 * adds a pair's products in the other order. C outside the tile is never
 * written; without accumulation it is never read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

static uint16_t random_bf16(uint64_t *rng, int special) {
    if (special) {
        switch (tt_rand_u64(rng) % 8) {
        case 0: return 0x0000;                                     /* +0 */
        case 1: return 0x8000;                                     /* -0 */
        case 2: return (uint16_t)(1 + tt_rand_u64(rng) % 0x7f);    /* subnormal */
        case 3: return (uint16_t)(0x8001 + tt_rand_u64(rng) % 0x7f);
        case 4: return fa_f32_to_bf16((float)(tt_rand_normal(rng) * 1e18));
        default: break;
        }
    }
    return fa_f32_to_bf16((float)tt_rand_normal(rng));
}

/* |alpha| * sum |a b| + |c|, in double, for the any-order bound */
static double magnitude(int i, int j, int64_t kp, const uint16_t *a, int64_t lda,
                        const uint32_t *b, int64_t ldb, float alpha, double c0) {
    double mag = 0.0;
    for (int64_t p = 0; p < 2 * kp; p++) {
        const uint16_t bw = (uint16_t)(b[p / 2 * ldb + j] >> (p % 2 * 16));
        mag += fabs((double)fa_bf16_to_f32(a[i * lda + p]) * fa_bf16_to_f32(bw));
    }
    return fabs((double)alpha) * mag + fabs(c0);
}

typedef void (*gemm_bf16_fn)(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                             const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                             float alpha);

/* Order probe: 1, then the pair (odd 2^-24, even 1.5 * 2^-24). Odd first,
 * 1 + 2^-24 ties to 1 and 1 + 0.75 ulp gives 1 + 2^-23; even first would
 * give 1 + 2^-22. Returns column 0 of the result. */
static float order_probe(gemm_bf16_fn fn) {
    const uint16_t pa[4] = {0, fa_f32_to_bf16(1.0f), fa_f32_to_bf16(0x1.8p-24f), fa_f32_to_bf16(0x1p-24f)};
    uint32_t pb[2 * 16];
    float pc[16];
    for (int j = 0; j < 16; j++) {
        pb[j] = (uint32_t)fa_f32_to_bf16(1.0f) << 16;
        pb[16 + j] = (uint32_t)fa_f32_to_bf16(1.0f) | (uint32_t)fa_f32_to_bf16(1.0f) << 16;
    }
    fn(1, 16, 2, pa, 4, pb, 16, pc, 16, 0, 1.0f);
    return pc[0];
}

static void check_definition(uint64_t *rng) {
    /* against double on ordinary values */
    enum { KP = 70, N = 16 };
    static uint16_t a[2 * KP];
    static uint32_t b[KP * N];
    for (int p = 0; p < 2 * KP; p++) a[p] = random_bf16(rng, 0);
    for (int p = 0; p < KP * N; p++)
        b[p] = (uint32_t)random_bf16(rng, 0) | (uint32_t)random_bf16(rng, 0) << 16;
    for (int64_t kp = 0; kp <= KP; kp += 7) {
        float c[N];
        fa_gemm_bf16_ref(1, N, kp, a, 2 * KP, b, N, c, N, 0, 0.75f);
        double worst = 0.0;
        for (int j = 0; j < N; j++) {
            double exact = 0.0;
            for (int64_t p = 0; p < 2 * kp; p++)
                exact += (double)fa_bf16_to_f32(a[p]) *
                         fa_bf16_to_f32((uint16_t)(b[p / 2 * N + j] >> (p % 2 * 16)));
            const double bound = (double)(2 * kp + 2) * 0x1p-24 * magnitude(0, j, kp, a, 2 * KP, b, N, 0.75f, 0.0);
            worst = fmax(worst, fabs(c[j] - 0.75 * exact) - bound);
        }
        TT_CHECK(worst <= 0.0, "definition: kp=%lld off by %.3g past the bound", (long long)kp, worst);
    }
    const float probe = order_probe(fa_gemm_bf16_ref);
    TT_CHECK(probe == 0x1.000002p0f, "definition: order probe gave %a, want 0x1.000002p+0", probe);
    float pc[16];
    /* DAZ: a bf16 subnormal times 2^100 reads as zero, not as 2^-33 */
    const uint16_t da[2] = {0x0001, 0};
    uint32_t db[16];
    for (int j = 0; j < 16; j++) db[j] = fa_f32_to_bf16(0x1p100f);
    fa_gemm_bf16_ref(1, 16, 1, da, 2, db, 16, pc, 16, 0, 1.0f);
    TT_CHECK(pc[0] == 0.0f, "definition: a subnormal input gave %a", pc[0]);
}

/* One call of kern against the definition; exact: bit for bit, else the
 * any-order bound. */
static void check_shape(const fa_kernels *kern, int exact, int m, int n, int64_t kp,
                        int accumulate, float alpha, int special, uint64_t *rng) {
    const int64_t lda = 2 * kp + 6, ldb = n + 16, ldc = n + 3;
    /* +1 element: a start that is not 4-byte aligned for a's pairs' */
    uint16_t *abuf = malloc((size_t)(m * lda + 2) * sizeof(uint16_t));
    uint32_t *bbuf = malloc((size_t)(kp * ldb + 1) * sizeof(uint32_t));
    float *c0 = malloc((size_t)(m * ldc) * sizeof(float)), *c = malloc((size_t)(m * ldc) * sizeof(float));
    float *want = malloc((size_t)(m * ldc) * sizeof(float));
    uint16_t *a = abuf + 1;
    uint32_t *b = bbuf + 1;
    for (int64_t i = 0; i < m * lda + 2; i++) abuf[i] = random_bf16(rng, special);
    for (int64_t i = 0; i < kp * ldb + 1; i++)
        bbuf[i] = (uint32_t)random_bf16(rng, special) | (uint32_t)random_bf16(rng, special) << 16;
    for (int64_t i = 0; i < m * ldc; i++) c0[i] = (float)tt_rand_normal(rng);
    /* without accumulation C holds NaN where the tile goes: never read */
    memcpy(c, c0, (size_t)(m * ldc) * sizeof(float));
    if (!accumulate)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[i * ldc + j] = NAN;
    memcpy(want, c0, (size_t)(m * ldc) * sizeof(float));
    fa_gemm_bf16_ref(m, n, kp, a, lda, b, ldb, want, ldc, accumulate, alpha);
    kern->gemm_bf16(m, n, kp, a, lda, b, ldb, c, ldc, accumulate, alpha);
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            const float got = c[i * ldc + j], w = want[i * ldc + j];
            if (j >= n) {
                bad |= memcmp(&got, &c0[i * ldc + j], sizeof got) != 0; /* outside: untouched */
            } else if (exact) {
                bad |= memcmp(&got, &w, sizeof got) != 0;
            } else {
                const double mag = magnitude(i, j, kp, a, lda, b, ldb, accumulate ? 1.0f : alpha,
                                             accumulate ? c0[i * ldc + j] : 0.0);
                bad |= !(fabs((double)got - w) <= (double)(4 * kp + 4) * 0x1p-24 * mag);
            }
        }
    TT_CHECK(!bad, "[%s] m=%d n=%d kp=%lld accumulate=%d alpha=%g special=%d: differs from the definition",
             kern->isa, m, n, (long long)kp, accumulate, alpha, special);
    free(abuf), free(bbuf), free(c0), free(c), free(want);
}

/* A sum split at a pair boundary over two calls (the second accumulating)
 * is the one-call sum bit for bit: the backward's dK and dV chains run on
 * over q-blocks this way. */
static void check_split(const fa_kernels *kern, uint64_t *rng) {
    enum { M = 5, N = 32, KP = 40 };
    static uint16_t a[M * 2 * KP];
    static uint32_t b[KP * N];
    for (int i = 0; i < M * 2 * KP; i++) a[i] = random_bf16(rng, i % 7 == 0);
    for (int i = 0; i < KP * N; i++)
        b[i] = (uint32_t)random_bf16(rng, 0) | (uint32_t)random_bf16(rng, i % 5 == 0) << 16;
    for (int cut = 0; cut <= KP; cut += 13) {
        float one[M * N], two[M * N];
        kern->gemm_bf16(M, N, KP, a, 2 * KP, b, N, one, N, 0, 1.0f);
        kern->gemm_bf16(M, N, cut, a, 2 * KP, b, N, two, N, 0, 1.0f);
        kern->gemm_bf16(M, N, KP - cut, a + 2 * cut, 2 * KP, b + cut * N, N, two, N, 1, 1.0f);
        TT_CHECK(memcmp(one, two, sizeof one) == 0, "[%s] a sum split at pair %d differs from one call",
                 kern->gemm_bf16 == fa_gemm_bf16_ref ? "definition" : kern->isa, cut);
    }
}

/* Runs of calls as the drivers make them: a kernel that keeps state from
 * one call to the next (the AMX tile configuration, kernels.h) must give
 * each call the definition's result whether the shape before it was the
 * same or not, and after gemm_bf16_done() as before it. */
static void check_runs(const fa_kernels *kern, int exact, uint64_t *rng) {
    static const int shapes[][2] = {{12, 64}, {12, 64}, {12, 128}, {5, 64}, {12, 7},
                                    {12, 7},  {12, 64}, {1, 33},   {1, 33}, {12, 0}};
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < count; i++) {
            check_shape(kern, exact, shapes[i][0], i % 3 ? 32 : 16, shapes[i][1], i & 1,
                        i & 1 ? 1.0f : 0.0883883f, 0, rng);
            /* round 0: one run; 1: done after every call; 2: after some */
            if (round == 1 || (round == 2 && i % 3 == 1))
                kern->gemm_bf16_done();
        }
}

int main(void) {
    uint64_t rng = 2026;
    check_definition(&rng);
    fa_kernels def = fa_kernels_scalar;
    def.gemm_bf16 = fa_gemm_bf16_ref;
    check_split(&def, &rng);
    const fa_kernels *isas[8];
    int n = tt_isas_dot(isas, 8), tested = 0;
    static const int64_t kps[] = {0, 1, 2, 3, 7, 16, 33, 64, 70};
    for (int t = 0; t < n; t++) {
        const fa_kernels *kern = isas[t];
        if (!kern->bf16_dot || kern->gemm_bf16 == fa_gemm_bf16_ref) continue;
        /* the real instructions are the tables named exactly avx512bf16 and amx */
        const int exact = strcmp(kern->isa, "avx512bf16") != 0 && strcmp(kern->isa, "amx") != 0;
        tested++;
        if (exact) check_split(kern, &rng);
        check_runs(kern, exact, &rng);
        for (int m = 1; m <= kern->mr; m++)
            for (int nn = 16; nn <= kern->nr; nn += 16)
                for (size_t k = 0; k < sizeof kps / sizeof kps[0]; k++)
                    for (int acc = 0; acc < 2; acc++)
                        for (int sp = 0; sp < 2; sp++)
                            check_shape(kern, exact, m, nn, kps[k], acc, acc ? 1.0f : 0.0883883f, sp, &rng);
        if (!exact) {
            /* the real instruction's probe, reported: see the top of this file */
            const float probe = order_probe(kern->gemm_bf16);
            printf("[%s] order probe: %a (%s)\n", kern->isa, probe,
                   probe == 0x1.000002p0f ? "odd product first, as the SDM states" : "not the SDM's order");
        }
        kern->gemm_bf16_done();
    }
    printf("gemm_bf16 kernels tested: %d%s\n", tested,
           tested ? "" : " (no AVX-512 here: the portable definition alone)");
    return tt_finish("test_gemm_bf16");
}
