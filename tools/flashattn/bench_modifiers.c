/*
 * `flashattn bench --modifiers`: what the score modifiers cost, each
 * against the call it should be measured by, timed together in one
 * process (bench_time_spread: one of each per round, alternating; a ratio
 * is the median of the rounds' ratios):
 *   causal given as a boolean mask     / built-in causal     (target 1.15x)
 *   a document mask of --docs blocks   / one call per document (1.2x)
 *   softcap 30, ALiBi, an f32 bias [1, 1, S, S] / plain attention (1.15x,
 *   1.15x, 1.3x)
 * as the issue that added them sets the targets. A benchmark reports
 * them; it never fails on a missed one (exit 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "flashattn.h"

enum { V_PLAIN, V_CAUSAL, V_CAUSAL_MASK, V_SOFTCAP, V_ALIBI, V_BIAS, V_DOCS, V_DOC_CALLS, V_COUNT };
static const char *const v_name[V_COUNT] = {"plain", "causal", "causal as mask", "softcap 30",
                                            "alibi", "bias f32", "document mask", "per-document calls"};

typedef struct {
    int64_t seq, heads, d, docs;
    int threads;
    flashattn_tensor q, k, v, o;
    flashattn_params p;
    void *ws;
    size_t ws_bytes;
    int variant;
} mod_call;

static int run_call(void *ctx) {
    mod_call *c = ctx;
    if (c->variant != V_DOC_CALLS)
        return flashattn_fwd(&c->q, &c->k, &c->v, &c->o, NULL, &c->p, c->ws, c->ws_bytes) != FLASHATTN_OK;
    const int64_t len = c->seq / c->docs;
    for (int64_t x = 0; x < c->docs; x++) {
        flashattn_tensor t[4] = {c->q, c->k, c->v, c->o};
        for (int i = 0; i < 4; i++) {
            t[i].data = (char *)t[i].data + (size_t)(x * len * t[i].stride_seq) * sizeof(float);
            t[i].seqlen = len;
        }
        if (flashattn_fwd(&t[0], &t[1], &t[2], &t[3], NULL, &c->p, c->ws, c->ws_bytes)) return 1;
    }
    return 0;
}

static int parse(int argc, char **argv, int64_t *seq, int64_t *heads, int64_t *d, int64_t *docs,
                 int *reps, int *threads, int *nthreads) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        if (!strcmp(a, "--modifiers")) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!val || sscanf(val, "%lld", &x) != 1 || x < 1) {
            fprintf(stderr, "flashattn bench --modifiers: bad or missing value for %s\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--seq")) *seq = x;
        else if (!strcmp(a, "--heads")) *heads = x;
        else if (!strcmp(a, "--head-dim") && x <= FLASHATTN_MAX_HEAD_DIM) *d = x;
        else if (!strcmp(a, "--docs")) *docs = x;
        else if (!strcmp(a, "--reps") && x <= 1000) *reps = (int)x;
        else if (!strcmp(a, "--threads")) { /* a list: 1,2 */
            *nthreads = 0;
            for (const char *s = val; *s && *nthreads < 8;) {
                threads[(*nthreads)++] = atoi(s);
                s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s);
            }
        } else {
            fprintf(stderr, "flashattn bench --modifiers: unknown option or bad value '%s %s'\n", a, val);
            return 2;
        }
    }
    if (*seq % *docs) {
        fprintf(stderr, "flashattn bench --modifiers: --seq must be a multiple of --docs\n");
        return 2;
    }
    return 0;
}

int bench_modifiers_cmd(int argc, char **argv) {
    int64_t seq = 4096, heads = 8, d = 128, docs = 8;
    int reps = 3, threads[8] = {1, 2}, nthreads = 2;
    const int rc = parse(argc, argv, &seq, &heads, &d, &docs, &reps, threads, &nthreads);
    if (rc == 1) {
        printf("usage: flashattn bench --modifiers [--seq N] [--heads H] [--head-dim D] [--docs N]\n"
               "                                [--threads 1,2] [--reps R]\n");
        return 0;
    }
    if (rc) return 2;
    const size_t n = (size_t)(seq * heads * d), ss = (size_t)(seq * seq);
    float *qkvo = malloc(4 * n * sizeof(float)), *bias = malloc(ss * sizeof(float));
    float *slopes = malloc((size_t)heads * sizeof(float));
    unsigned char *causal = malloc(ss), *doc = malloc(ss);
    if (!qkvo || !bias || !slopes || !causal || !doc) {
        fprintf(stderr, "flashattn bench --modifiers: out of memory\n");
        free(qkvo), free(bias), free(slopes), free(causal), free(doc);
        return 1;
    }
    uint64_t s = 12345;
    for (size_t x = 0; x < 4 * n; x++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        qkvo[x] = (float)((double)(s >> 40) / (double)(1ull << 24)) - 0.5f;
    }
    for (int64_t i = 0; i < seq; i++)
        for (int64_t j = 0; j < seq; j++) {
            causal[i * seq + j] = j <= i;
            doc[i * seq + j] = i * docs / seq == j * docs / seq;
            bias[i * seq + j] = (float)((i * 7 + j * 13) % 101) / 101.0f;
        }
    for (int64_t h = 0; h < heads; h++) slopes[h] = 1.0f / (float)(2 << h % 8);
    const flashattn_scores cmask = {causal, FLASHATTN_F32, 1, 1, seq, seq, 0, 0, seq, 1};
    const flashattn_scores dmask = {doc, FLASHATTN_F32, 1, 1, seq, seq, 0, 0, seq, 1};
    const flashattn_scores fbias = {bias, FLASHATTN_F32, 1, 1, seq, seq, 0, 0, seq, 1};

    printf("flashattn bench --modifiers: seq %lld, heads %lld, head_dim %lld, f32, %d reps (median), "
           "kernels %s\n", (long long)seq, (long long)heads, (long long)d, reps, flashattn_isa());
    printf("%-8s | %-20s | %10s | %8s | %-22s\n", "threads", "variant", "ms", "spread", "ratio (target)");
    int status = 0;
    for (int t = 0; t < nthreads && !status; t++) {
        mod_call calls[V_COUNT];
        bench_call bc[V_COUNT];
        for (int x = 0; x < V_COUNT; x++) {
            mod_call *c = &calls[x];
            c->seq = seq, c->heads = heads, c->d = d, c->docs = docs, c->threads = threads[t];
            c->variant = x;
            c->q = flashattn_tensor_bshd(qkvo, FLASHATTN_F32, 1, seq, heads, d);
            c->k = flashattn_tensor_bshd(qkvo + n, FLASHATTN_F32, 1, seq, heads, d);
            c->v = flashattn_tensor_bshd(qkvo + 2 * n, FLASHATTN_F32, 1, seq, heads, d);
            c->o = flashattn_tensor_bshd(qkvo + 3 * n, FLASHATTN_F32, 1, seq, heads, d);
            flashattn_params_init(&c->p);
            c->p.num_threads = threads[t];
            if (x == V_CAUSAL) c->p.causal = 1;
            if (x == V_CAUSAL_MASK) c->p.mask = &cmask;
            if (x == V_SOFTCAP) c->p.softcap = 30.0f;
            if (x == V_ALIBI) c->p.alibi_slopes = slopes;
            if (x == V_BIAS) c->p.bias = &fbias;
            if (x == V_DOCS) c->p.mask = &dmask;
            flashattn_tensor one = c->q;
            one.seqlen = x == V_DOC_CALLS ? seq / docs : seq;
            c->ws_bytes = 0;
            if (flashattn_fwd_workspace_size(&one, &one, &one, &one, NULL, &c->p, &c->ws_bytes)) {
                fprintf(stderr, "flashattn bench --modifiers: %s: %s\n", v_name[x], flashattn_last_error());
                status = 1;
            }
            c->ws = malloc(c->ws_bytes ? c->ws_bytes : 1);
            bc[x].fn = run_call, bc[x].ctx = c, bc[x].ms = 0.0;
        }
        double lo[V_COUNT], hi[V_COUNT];
        if (!status) bench_time_spread(bc, V_COUNT, reps, lo, hi);
        static const int base[V_COUNT] = {-1, -1, V_CAUSAL, V_PLAIN, V_PLAIN, V_PLAIN, V_DOC_CALLS, -1};
        static const double target[V_COUNT] = {0, 0, 1.15, 1.15, 1.15, 1.3, 1.2, 0};
        for (int x = 0; !status && x < V_COUNT; x++) {
            char ratio[48] = "";
            if (bc[x].ms < 0) status = 1;
            if (base[x] >= 0 && bc[x].ms > 0 && bc[base[x]].ms > 0) {
                const double r = bench_round_ratio(x, base[x]);
                snprintf(ratio, sizeof ratio, "%.2fx of %s (<= %.2fx %s)", r,
                         base[x] == V_PLAIN ? "plain" : base[x] == V_CAUSAL ? "causal" : "calls",
                         target[x], r <= target[x] ? "PASS" : "MISS");
            }
            printf("%-8d | %-20s | %10.2f | %7.0f%% | %s\n", threads[t], v_name[x], bc[x].ms,
                   bc[x].ms > 0 ? 100.0 * (hi[x] - lo[x]) / bc[x].ms : 0.0, ratio);
        }
        for (int x = 0; x < V_COUNT; x++) free(calls[x].ws);
    }
    free(qkvo), free(bias), free(slopes), free(causal), free(doc);
    if (status) fprintf(stderr, "flashattn bench --modifiers: a call failed\n");
    return status;
}
