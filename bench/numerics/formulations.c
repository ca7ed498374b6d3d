/*
 * Two f32 formulations of plain attention against the same f64 reference,
 * over random problems: the max |O error| of each, and their ratio.
 *   after:      S = q.k (FMA chain), s = S * scale, exp(s - max)
 *   pre-scaled: q * (scale * log2 e) first, then the FMA chain, exp2(s - max)
 *               (the kernels' arithmetic, docs/numerics.md)
 * Both sum P V as an FMA chain and divide by the row sum at the end.
 * Usage: formulations HEAD_DIM SCALE_MULTIPLE TRIALS
 * (a multiple of the default scale 1/sqrt(HEAD_DIM); 48 queries, 64 keys,
 * N(0, 1) inputs, a fixed seed). Build: cc -O2 -std=c11 formulations.c -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { SQ = 48, SK = 64, MAX_TRIALS = 1000, MAX_D = 1024 };

static uint64_t state = 88172645463325252ull;

static double uniform(void) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return ((state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double normal(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: formulations HEAD_DIM SCALE_MULTIPLE TRIALS\n");
        return 2;
    }
    const int d = atoi(argv[1]), trials = atoi(argv[3]);
    const double mult = atof(argv[2]);
    if (d < 1 || d > MAX_D || trials < 1 || trials > MAX_TRIALS) return 2;
    float *q = malloc(sizeof(float) * SQ * d), *k = malloc(sizeof(float) * SK * d), *v = malloc(sizeof(float) * SK * d);
    static double err_after[MAX_TRIALS], err_pre[MAX_TRIALS], ratio[MAX_TRIALS];
    const float scale = (float)(mult / sqrt((double)d)), c2 = scale * 1.44269504088896341f;
    for (int t = 0; t < trials; t++) {
        for (int i = 0; i < SQ * d; i++) q[i] = (float)normal();
        for (int i = 0; i < SK * d; i++) k[i] = (float)normal(), v[i] = (float)normal();
        double worst_after = 0, worst_pre = 0;
        for (int i = 0; i < SQ; i++) {
            double p[SK], mx = -INFINITY, sum = 0;
            float s1[SK], s2[SK], qs[MAX_D], m1 = -INFINITY, m2 = -INFINITY, l1 = 0, l2 = 0;
            for (int j = 0; j < SK; j++) {
                double a = 0;
                for (int c = 0; c < d; c++) a += (double)q[i * d + c] * k[j * d + c];
                p[j] = a * (double)scale;
                mx = fmax(mx, p[j]);
            }
            for (int j = 0; j < SK; j++) sum += p[j] = exp(p[j] - mx);
            for (int c = 0; c < d; c++) qs[c] = q[i * d + c] * c2;
            for (int j = 0; j < SK; j++) {
                float a = 0, b = 0;
                for (int c = 0; c < d; c++) a = fmaf(q[i * d + c], k[j * d + c], a), b = fmaf(qs[c], k[j * d + c], b);
                s1[j] = a * scale, s2[j] = b;
                m1 = fmaxf(m1, s1[j]), m2 = fmaxf(m2, s2[j]);
            }
            for (int j = 0; j < SK; j++) l1 += s1[j] = expf(s1[j] - m1), l2 += s2[j] = exp2f(s2[j] - m2);
            for (int c = 0; c < d; c++) {
                double ref = 0;
                float o1 = 0, o2 = 0;
                for (int j = 0; j < SK; j++) {
                    ref += p[j] / sum * v[j * d + c];
                    o1 = fmaf(s1[j], v[j * d + c], o1), o2 = fmaf(s2[j], v[j * d + c], o2);
                }
                worst_after = fmax(worst_after, fabs(o1 / l1 - ref));
                worst_pre = fmax(worst_pre, fabs(o2 / l2 - ref));
            }
        }
        err_after[t] = worst_after, err_pre[t] = worst_pre, ratio[t] = worst_pre / worst_after;
    }
    qsort(err_after, (size_t)trials, sizeof(double), by_value);
    qsort(err_pre, (size_t)trials, sizeof(double), by_value);
    qsort(ratio, (size_t)trials, sizeof(double), by_value);
    printf("d %d, scale %gx the default, %d problems: median max error after %.3g, pre-scaled %.3g; "
           "pre-scaled / after: median %.2f, 90th percentile %.2f, max %.2f\n",
           d, mult, trials, err_after[trials / 2], err_pre[trials / 2], ratio[trials / 2],
           ratio[trials * 9 / 10], ratio[trials - 1]);
    free(q), free(k), free(v);
    return 0;
}
