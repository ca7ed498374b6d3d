/*
 * ggml_compare.c: ggml_flash_attn_ext (ggml CPU backend) vs flashattn on identical inputs.
 *
 *   ggml_compare prefill|decode [--seq N] [--kv N] [--heads N] [--hq N] [--hkv N]
 *           [--d N] [--causal 0|1] [--kvtype f16|f32|q8_0] [--threads N] [--reps N]
 *           [--layout bshd|bhsd] [--mask 0|1] [--seed N] [--tol X] [--check-only]
 *
 * prefill: seq_q = seq_k = --seq, batch 1, heads_q = heads_kv = --heads (unless
 *          --hq/--hkv given), causal by --causal (diagonal alignment).
 * decode : batch 1, seq_q 1, kv_len = --kv, heads --hq/--hkv; flashattn_decode
 *          over a contiguous cache holding kv_len rows (no append).
 * Q is f32 for ggml; K/V are f16 or f32 (the same bits go to both libraries). With
 * f16 K/V, Q's values are rounded to f16 first: ggml gets them as f32, flashattn_fwd
 * (which needs q, k, v in one dtype) as f16, flashattn_decode as the same f32. Output f32.
 * layout bshd (default): Q, K, V stored [seq][head][dim] (llama.cpp's KV cache and
 *          flashattn's native layout; ggml gets a permuted view, as llama.cpp does);
 *          bhsd: [head][seq][dim] (contiguous per head for both).
 * --tol: allowed max|ggml - flashattn| / max|O| (default 1e-2 with f16 K/V, whose ggml
 *          vec paths accumulate V in f16; 1e-3 with f32 K/V). Fails (exit 3) before timing.
 * --kvtype q8_0 (decode): ggml's 8-bit cache (blocks of 32 with an f16 scale, K dot
 *          products on integers after rounding Q to q8_0) against flashattn's int8 cache
 *          with a scale per (token, kv-head) (flashattn_quantize), both made from the
 *          same f32 K/V; each library is checked against the f64 reference on the f32
 *          values (default --tol 5e-2: both quantise, differently).
 * --mask 1 passes an all-zero f16 mask to ggml when not causal (llama.cpp always
 *          passes a mask); the default passes NULL. Causal always uses a 0/-inf mask.
 *
 * The calls are timed in turn, one of each per round, odd rounds in reverse order,
 * medians compared (as flashattn bench does). Build: bench/ggml/build.sh.
 * What ggml computes (ggml-cpu/ops.cpp, ggml_compute_forward_flash_attn_ext_f16):
 * with 64 or more query rows a tiled path in f32 (K, V tiles widened, f32 GEMMs);
 * below that, and for decode, a per-row path that with f16 K/V rounds Q to f16
 * and accumulates O in f16, hence the looser default --tol there.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashattn.h"
#include "ggml.h"
#include "ggml-cpu.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what, flashattn_status s) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, flashattn_strerror(s), flashattn_last_error());
    exit(1);
}

static void usage(void) {
    fprintf(stderr,
            "usage: ggml_compare prefill|decode [--seq N] [--kv N] [--heads N] [--hq N] [--hkv N]\n"
            "       [--d N] [--causal 0|1] [--kvtype f16|f32|q8_0] [--threads N] [--reps N]\n"
            "       [--layout bshd|bhsd] [--mask 0|1] [--seed N] [--tol X] [--check-only]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    int decode;
    if (!strcmp(argv[1], "prefill")) decode = 0;
    else if (!strcmp(argv[1], "decode")) decode = 1;
    else usage();

    int64_t seq = 512, kv = 1000, d = 128, heads = 8, hq = -1, hkv = -1;
    double tol = -1;
    int causal = 0, threads = 1, reps = 5, kv_f16 = 1, kv_q8 = 0, bshd = 1, force_mask = 0, check_only = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check-only")) { check_only = 1; continue; }
        if (!v) usage();
        if (!strcmp(a, "--seq")) seq = atoll(v);
        else if (!strcmp(a, "--kv")) kv = atoll(v);
        else if (!strcmp(a, "--d")) d = atoll(v);
        else if (!strcmp(a, "--heads")) heads = atoll(v);
        else if (!strcmp(a, "--hq")) hq = atoll(v);
        else if (!strcmp(a, "--hkv")) hkv = atoll(v);
        else if (!strcmp(a, "--causal")) causal = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--seed")) rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)atoll(v) * 0x2545F4914F6CDD1Dull;
        else if (!strcmp(a, "--mask")) force_mask = atoi(v);
        else if (!strcmp(a, "--tol")) tol = atof(v);
        else if (!strcmp(a, "--kvtype")) {
            if (!strcmp(v, "f16")) kv_f16 = 1;
            else if (!strcmp(v, "f32")) kv_f16 = 0;
            else if (!strcmp(v, "q8_0")) kv_f16 = 0, kv_q8 = 1;
            else usage();
        } else if (!strcmp(a, "--layout")) {
            if (!strcmp(v, "bshd")) bshd = 1;
            else if (!strcmp(v, "bhsd")) bshd = 0;
            else usage();
        } else usage();
        i++;
    }
    if (hq < 0) hq = heads;
    if (hkv < 0) hkv = (hq == heads) ? heads : hq;
    if (hq <= 0 || hkv <= 0 || hq % hkv || d <= 0 || threads <= 0 || reps < 0) usage();
    const int64_t sq = decode ? 1 : seq;
    const int64_t sk = decode ? kv : seq;
    if (decode) causal = 0;
    if (kv_q8 && (!decode || d % 32)) {
        fprintf(stderr, "--kvtype q8_0: decode only, with d a multiple of 32\n");
        return 2;
    }
    const float scale = 1.0f / sqrtf((float)d);
    const int use_mask = causal || force_mask;
    if (tol < 0) tol = kv_q8 ? 5e-2 : kv_f16 ? 1e-2 : 1e-3;
    /* which ggml CPU kernel runs (ops.cpp, ggml_compute_forward_flash_attn_ext_f16) */
    const char *gpath = (sq == 1 && sk >= 512) ? "split-kv: one_chunk per thread + reduce_partials"
                      : (sq >= 64) ? "tiled: f32 simd_gemm"
                      : "one_chunk: per-row vec_dot";

    printf("mode=%s seq_q=%lld seq_k=%lld heads_q=%lld heads_kv=%lld d=%lld causal=%d kv=%s "
           "layout=%s ggml_mask=%s threads=%d reps=%d\n",
           decode ? "decode" : "prefill", (long long)sq, (long long)sk, (long long)hq, (long long)hkv,
           (long long)d, causal, kv_q8 ? "q8_0 (flashattn: int8, per-token scales)" : kv_f16 ? "f16" : "f32",
           bshd ? "bshd" : "bhsd",
           use_mask ? (causal ? "causal-f16" : "zeros-f16") : "NULL", threads, reps);
    printf("ggml %s (commit %s), flashattn %s isa=%s\n", ggml_version(), ggml_commit(),
           flashattn_version(), flashattn_isa());
    printf("ggml kernel: %s%s\n", gpath,
           (kv_f16 && (sq == 1 ? 1 : sq < 64)) ? " (Q->f16, f16 dot, f16 V accumulator)" : "");
    fflush(stdout);

    ggml_cpu_init();

    /* ---- ggml context, tensors ---- */
    const enum ggml_type kvt = kv_q8 ? GGML_TYPE_Q8_0 : kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    const size_t kv_bytes = ggml_row_size(kvt, d) * (size_t)(sk * hkv);
    size_t mem = (size_t)(sq * hq * d) * 4 + 2 * kv_bytes +
                 (use_mask ? (size_t)(sk * sq) * 2 : 0) + (size_t)(sq * hq * d) * 4 +
                 32 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20);
    struct ggml_init_params ip = {mem, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) { fprintf(stderr, "ggml_init failed\n"); return 1; }

    struct ggml_tensor *q, *k, *v, *q_raw, *k_raw, *v_raw, *mask = NULL;
    if (bshd) {
        /* memory [seq][head][dim]; ggml wants ne = [d, seq, head, 1]: permute a [d, head, seq, 1] */
        q_raw = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, d, hq, sq, 1);
        k_raw = ggml_new_tensor_4d(ctx, kvt, d, hkv, sk, 1);
        v_raw = ggml_new_tensor_4d(ctx, kvt, d, hkv, sk, 1);
        q = ggml_permute(ctx, q_raw, 0, 2, 1, 3);
        k = ggml_permute(ctx, k_raw, 0, 2, 1, 3);
        v = ggml_permute(ctx, v_raw, 0, 2, 1, 3);
    } else {
        q = q_raw = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, d, sq, hq, 1);
        k = k_raw = ggml_new_tensor_4d(ctx, kvt, d, sk, hkv, 1);
        v = v_raw = ggml_new_tensor_4d(ctx, kvt, d, sk, hkv, 1);
    }
    if (use_mask) mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, sk, sq, 1, 1);

    /* logical copies (what both libraries see, after rounding), for the reference */
    float *Qf = malloc(sizeof(float) * sq * hq * d);  /* [h][s][d] */
    float *Kf = malloc(sizeof(float) * sk * hkv * d);
    float *Vf = malloc(sizeof(float) * sk * hkv * d);
    if (!Qf || !Kf || !Vf) { fprintf(stderr, "oom\n"); return 1; }
    for (int64_t i = 0; i < sq * hq * d; i++) Qf[i] = frand();
    for (int64_t i = 0; i < sk * hkv * d; i++) Kf[i] = frand();
    for (int64_t i = 0; i < sk * hkv * d; i++) Vf[i] = frand();
    ggml_fp16_t *q16 = NULL; /* flashattn_fwd wants q, k, v in one dtype: an f16 copy of Q */
    if (kv_f16) { /* round Q, K, V to f16 once; ggml gets Q as f32 holding the same values */
        ggml_fp16_t *tmp = malloc(sizeof(ggml_fp16_t) * sk * hkv * d);
        ggml_fp16_t *tq16 = malloc(sizeof(ggml_fp16_t) * sq * hq * d);
        ggml_fp32_to_fp16_row(Qf, tq16, sq * hq * d);
        ggml_fp16_to_fp32_row(tq16, Qf, sq * hq * d);
        free(tq16);
        ggml_fp32_to_fp16_row(Kf, tmp, sk * hkv * d);
        ggml_fp16_to_fp32_row(tmp, Kf, sk * hkv * d);
        ggml_fp32_to_fp16_row(Vf, tmp, sk * hkv * d);
        ggml_fp16_to_fp32_row(tmp, Vf, sk * hkv * d);
        free(tmp);
    }
    /* physical element offset of row (s, h) */
#define OFF(s, h, S, H) (bshd ? ((int64_t)(s) * (H) + (h)) * d : ((int64_t)(h) * (S) + (s)) * d)
    for (int64_t h = 0; h < hq; h++)
        for (int64_t s = 0; s < sq; s++)
            memcpy((float *)q_raw->data + OFF(s, h, sq, hq), Qf + (h * sq + s) * d, sizeof(float) * d);
    if (kv_f16 && !decode) { /* same physical layout as q_raw */
        q16 = malloc(sizeof(ggml_fp16_t) * sq * hq * d);
        ggml_fp32_to_fp16_row((const float *)q_raw->data, q16, sq * hq * d);
    }
    float *kq_f = NULL, *vq_f = NULL; /* q8_0: the f32 rows in ggml's physical order, quantised below */
    if (kv_q8) {
        kq_f = malloc(sizeof(float) * sk * hkv * d);
        vq_f = malloc(sizeof(float) * sk * hkv * d);
        if (!kq_f || !vq_f) { fprintf(stderr, "oom\n"); return 1; }
    }
    for (int64_t h = 0; h < hkv; h++)
        for (int64_t s = 0; s < sk; s++) {
            const float *ks = Kf + (h * sk + s) * d, *vs = Vf + (h * sk + s) * d;
            if (kv_q8) {
                memcpy(kq_f + OFF(s, h, sk, hkv), ks, sizeof(float) * d);
                memcpy(vq_f + OFF(s, h, sk, hkv), vs, sizeof(float) * d);
            } else if (kv_f16) {
                ggml_fp32_to_fp16_row(ks, (ggml_fp16_t *)k_raw->data + OFF(s, h, sk, hkv), d);
                ggml_fp32_to_fp16_row(vs, (ggml_fp16_t *)v_raw->data + OFF(s, h, sk, hkv), d);
            } else {
                memcpy((float *)k_raw->data + OFF(s, h, sk, hkv), ks, sizeof(float) * d);
                memcpy((float *)v_raw->data + OFF(s, h, sk, hkv), vs, sizeof(float) * d);
            }
        }
    if (kv_q8) {
        ggml_quantize_chunk(GGML_TYPE_Q8_0, kq_f, k_raw->data, 0, sk * hkv, d, NULL);
        ggml_quantize_chunk(GGML_TYPE_Q8_0, vq_f, v_raw->data, 0, sk * hkv, d, NULL);
        free(kq_f), free(vq_f);
    }
    if (mask) {
        ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), ninf = ggml_fp32_to_fp16(-INFINITY);
        ggml_fp16_t *m = mask->data;
        const int64_t off = sk - sq; /* bottom-right; 0 for prefill (seq_q == seq_k) */
        for (int64_t i = 0; i < sq; i++)
            for (int64_t j = 0; j < sk; j++) m[i * sk + j] = (!causal || j <= i + off) ? zero : ninf;
    }

    struct ggml_tensor *out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
    if (!ggml_prec_set_acc(out, GGML_PREC_F32)) fprintf(stderr, "warning: ggml_prec_set_acc failed\n");
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    struct ggml_cplan plan = ggml_graph_plan(gf, threads, NULL);
    uint8_t *work = NULL;
    if (plan.work_size) {
        work = malloc(plan.work_size);
        if (!work) { fprintf(stderr, "oom\n"); return 1; }
        plan.work_data = work;
    }
    /* out: ne [d, hq, sq, 1] -> memory [s][h][d] */

    /* ---- flashattn, sharing the same buffers ---- */
    const flashattn_dtype fkv = kv_f16 ? FLASHATTN_F16 : FLASHATTN_F32;
    flashattn_tensor tq, tk, tv, to;
    float *Ofa = malloc(sizeof(float) * sq * hq * d);
    if (bshd) {
        tq = q16 ? flashattn_tensor_bshd(q16, FLASHATTN_F16, 1, sq, hq, d)
                 : flashattn_tensor_bshd(q_raw->data, FLASHATTN_F32, 1, sq, hq, d);
        tk = flashattn_tensor_bshd(k_raw->data, fkv, 1, sk, hkv, d);
        tv = flashattn_tensor_bshd(v_raw->data, fkv, 1, sk, hkv, d);
    } else {
        tq = q16 ? flashattn_tensor_bhsd(q16, FLASHATTN_F16, 1, sq, hq, d)
                 : flashattn_tensor_bhsd(q_raw->data, FLASHATTN_F32, 1, sq, hq, d);
        tk = flashattn_tensor_bhsd(k_raw->data, fkv, 1, sk, hkv, d);
        tv = flashattn_tensor_bhsd(v_raw->data, fkv, 1, sk, hkv, d);
    }
    to = flashattn_tensor_bshd(Ofa, FLASHATTN_F32, 1, sq, hq, d);
    flashattn_params fp = flashattn_params_default();
    fp.scale = scale;
    fp.causal = causal;
    fp.align = FLASHATTN_ALIGN_BOTTOM_RIGHT; /* seq_q == seq_k in prefill: the diagonal */
    fp.num_threads = threads;
    flashattn_kv_cache cache;
    int32_t seqlen32 = (int32_t)sk;
    void *k8 = NULL, *v8 = NULL;
    float *k8s = NULL, *v8s = NULL;
    size_t ws = 0;
    flashattn_status st;
    if (decode) {
        flashattn_kv_cache_init(&cache);
        cache.k = tk;
        cache.v = tv;
        if (kv_q8) { /* int8 with a scale per (token, kv-head), from the same f32 values */
            k8 = malloc((size_t)(sk * hkv * d)), v8 = malloc((size_t)(sk * hkv * d));
            k8s = malloc(sizeof(float) * sk * hkv), v8s = malloc(sizeof(float) * sk * hkv);
            if (!k8 || !v8 || !k8s || !v8s) { fprintf(stderr, "oom\n"); return 1; }
            flashattn_tensor kf = flashattn_tensor_bhsd(Kf, FLASHATTN_F32, 1, sk, hkv, d);
            flashattn_tensor vf = flashattn_tensor_bhsd(Vf, FLASHATTN_F32, 1, sk, hkv, d);
            cache.k = flashattn_tensor_bshd(k8, FLASHATTN_INT8, 1, sk, hkv, d);
            cache.v = flashattn_tensor_bshd(v8, FLASHATTN_INT8, 1, sk, hkv, d);
            cache.k_scale = flashattn_tensor_bshd(k8s, FLASHATTN_F32, 1, sk, hkv, 1);
            cache.v_scale = flashattn_tensor_bshd(v8s, FLASHATTN_F32, 1, sk, hkv, 1);
            if ((st = flashattn_quantize(&kf, &cache.k, &cache.k_scale, FLASHATTN_SCALE_PER_TOKEN, 0, threads)) ||
                (st = flashattn_quantize(&vf, &cache.v, &cache.v_scale, FLASHATTN_SCALE_PER_TOKEN, 0, threads)))
                die("flashattn_quantize", st);
        }
        cache.seqlens_i32 = &seqlen32;
        st = flashattn_decode_workspace_size(&tq, &cache, NULL, NULL, &to, NULL, &fp, &ws);
        if (st) die("flashattn_decode_workspace_size", st);
    } else {
        st = flashattn_fwd_workspace_size(&tq, &tk, &tv, &to, NULL, &fp, &ws);
        if (st) die("flashattn_fwd_workspace_size", st);
    }
    void *fws = NULL;
    if (ws) {
        fws = aligned_alloc(64, (ws + 63) / 64 * 64);
        if (!fws) { fprintf(stderr, "oom\n"); return 1; }
    }

#define RUN_GGML() do { if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) { \
        fprintf(stderr, "ggml_graph_compute failed\n"); exit(1); } } while (0)
#define RUN_FA() do { st = decode ? flashattn_decode(&tq, &cache, NULL, NULL, &to, NULL, &fp, fws, ws) \
                                  : flashattn_fwd(&tq, &tk, &tv, &to, NULL, &fp, fws, ws); \
        if (st) die(decode ? "flashattn_decode" : "flashattn_fwd", st); } while (0)

    /* ---- correctness: both runs, then compare with each other and a double reference ---- */
    RUN_GGML();
    RUN_FA();
    const float *Og = out->data;
    double maxo = 0, dmax = 0;
    for (int64_t i = 0; i < sq * hq * d; i++) {
        double a = fabs(Og[i]);
        if (a > maxo) maxo = a;
        double e = fabs((double)Og[i] - Ofa[i]);
        if (!(e <= dmax)) dmax = e; /* NaN propagates */
    }
    /* reference: all rows if small, else ~256 sampled query rows per head */
    int64_t rstep = sq <= 256 ? 1 : (sq + 255) / 256;
    double eg = 0, ef = 0, refmax = 0;
    double *sc = malloc(sizeof(double) * sk), *acc = malloc(sizeof(double) * d);
    for (int64_t h = 0; h < hq; h++) {
        const int64_t hk = h / (hq / hkv);
        for (int64_t i = 0; i < sq; i = (i == sq - 1) ? sq : (i + rstep < sq ? i + rstep : sq - 1)) {
            const float *qr = Qf + (h * sq + i) * d;
            const int64_t jmax = causal ? i + (sk - sq) : sk - 1;
            double m = -INFINITY, l = 0;
            for (int64_t j = 0; j <= jmax; j++) {
                const float *kr = Kf + (hk * sk + j) * d;
                double s = 0;
                for (int64_t c = 0; c < d; c++) s += (double)qr[c] * kr[c];
                sc[j] = s * scale;
                if (sc[j] > m) m = sc[j];
            }
            for (int64_t c = 0; c < d; c++) acc[c] = 0;
            for (int64_t j = 0; j <= jmax; j++) {
                double p = exp(sc[j] - m);
                l += p;
                const float *vr = Vf + (hk * sk + j) * d;
                for (int64_t c = 0; c < d; c++) acc[c] += p * vr[c];
            }
            for (int64_t c = 0; c < d; c++) {
                double r = acc[c] / l;
                const int64_t o = (i * hq + h) * d + c;
                if (fabs(r) > refmax) refmax = fabs(r);
                double a = fabs(Og[o] - r), b = fabs(Ofa[o] - r);
                if (!(a <= eg)) eg = a;
                if (!(b <= ef)) ef = b;
            }
        }
    }
    free(sc);
    free(acc);
    const int ok = dmax <= tol * (maxo > 0 ? maxo : 1);
    printf("check: max|O|=%.4g  max|ggml-flashattn|=%.3g (rel %.3g, tol %.0e)  max err vs f64 "
           "reference: ggml %.3g (rel %.3g), flashattn %.3g (rel %.3g)  %s\n",
           maxo, dmax, dmax / (maxo > 0 ? maxo : 1), tol, eg, eg / (refmax > 0 ? refmax : 1), ef,
           ef / (refmax > 0 ? refmax : 1), ok ? "OK" : "MISMATCH");
    if (!ok) return 3;
    if (check_only || reps == 0) return 0;

    /* ---- timing: alternate, odd rounds reversed ---- */
    double *tg = malloc(sizeof(double) * reps), *tf = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        double t0, t1;
        if (r % 2 == 0) {
            t0 = now_s(); RUN_GGML(); t1 = now_s(); tg[r] = t1 - t0;
            t0 = now_s(); RUN_FA(); t1 = now_s(); tf[r] = t1 - t0;
        } else {
            t0 = now_s(); RUN_FA(); t1 = now_s(); tf[r] = t1 - t0;
            t0 = now_s(); RUN_GGML(); t1 = now_s(); tg[r] = t1 - t0;
        }
    }
    const double mg = median(tg, reps), mf = median(tf, reps);
    double flops = 4.0 * 1 * hq * (double)sq * sk * d;
    if (causal) flops *= 0.5;
    printf("ggml      median %10.3f ms  %8.2f GFLOP/s  (min %.3f max %.3f)\n", mg * 1e3,
           flops / mg * 1e-9, tg[0] * 1e3, tg[reps - 1] * 1e3);
    printf("flashattn median %10.3f ms  %8.2f GFLOP/s  (min %.3f max %.3f)\n", mf * 1e3,
           flops / mf * 1e-9, tf[0] * 1e3, tf[reps - 1] * 1e3);
    printf("ratio ggml/flashattn = %.3f  (>1: flashattn faster)\n", mg / mf);

    free(k8); free(v8); free(k8s); free(v8s);
    free(tg); free(tf); free(fws); free(work); free(Ofa); free(q16); free(Qf); free(Kf); free(Vf);
    ggml_free(ctx);
    return 0;
}
