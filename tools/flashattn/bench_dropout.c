/*
 * `flashattn bench --dropout P`: what attention dropout costs, forward and
 * backward, each against the same call without it, timed together in one
 * process (bench_time_spread: one of each per round, alternating; the
 * ratio is the median of the rounds' ratios, bench_round_ratio), with
 * the targets of the issue that added it: 1.15x the forward, 1.1x the
 * backward (seq 4096, head_dim 128 by default). A benchmark reports them;
 * it never fails on a missed one (exit 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "flashattn.h"

enum { D_FWD, D_FWD_DROP, D_BWD, D_BWD_DROP, D_COUNT };
static const char *const d_name[D_COUNT] = {"forward", "forward + dropout", "backward", "backward + dropout"};

typedef struct {
    flashattn_tensor q, k, v, o, dout, dq, dk, dv;
    float *lse;
    flashattn_params p;
    void *ws;
    size_t ws_bytes;
    int bwd;
} drop_call;

static int run_call(void *ctx) {
    drop_call *c = ctx;
    if (!c->bwd) return flashattn_fwd(&c->q, &c->k, &c->v, &c->o, c->lse, &c->p, c->ws, c->ws_bytes) != 0;
    return flashattn_bwd(&c->q, &c->k, &c->v, &c->o, &c->dout, c->lse, &c->dq, &c->dk, &c->dv, &c->p, c->ws,
                         c->ws_bytes) != 0;
}

int bench_dropout_cmd(int argc, char **argv) {
    long long seq = 4096, heads = 8, d = 128;
    int reps = 3, threads[8] = {1, 2}, nthreads = 2;
    double rate = 0.1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: flashattn bench --dropout P [--seq N] [--heads H] [--head-dim D] [--threads 1,2] "
                   "[--reps R]\n");
            return 0;
        }
        if (!strcmp(a, "--dropout") && val && sscanf(val, "%lf", &rate) == 1 && rate >= 0.0 && rate < 1.0) {
            i++;
            continue;
        }
        if (!val || (strcmp(a, "--threads") && (sscanf(val, "%lld", &x) != 1 || x < 1))) {
            fprintf(stderr, "flashattn bench --dropout: bad or missing value for %s\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--seq")) seq = x;
        else if (!strcmp(a, "--heads")) heads = x;
        else if (!strcmp(a, "--head-dim") && x <= FLASHATTN_MAX_HEAD_DIM) d = x;
        else if (!strcmp(a, "--reps") && x <= 1000) reps = (int)x;
        else if (!strcmp(a, "--threads")) {
            nthreads = 0;
            for (const char *s = val; *s && nthreads < 8;) {
                threads[nthreads++] = atoi(s);
                s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s);
            }
        } else {
            fprintf(stderr, "flashattn bench --dropout: unknown option or bad value '%s %s'\n", a, val);
            return 2;
        }
    }
    const size_t n = (size_t)(seq * heads * d);
    float *mem = malloc(8 * n * sizeof(float)), *lse = malloc((size_t)(heads * seq) * sizeof(float));
    if (!mem || !lse) {
        fprintf(stderr, "flashattn bench --dropout: out of memory\n");
        free(mem), free(lse);
        return 1;
    }
    uint64_t s = 777;
    for (size_t x = 0; x < 8 * n; x++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        mem[x] = (float)((double)(s >> 40) / (double)(1ull << 24)) - 0.5f;
    }
    printf("flashattn bench --dropout %.2f: seq %lld, heads %lld, head_dim %lld, f32, %d reps (median), kernels %s\n",
           rate, seq, heads, d, reps, flashattn_isa());
    printf("%-8s | %-20s | %10s | %8s | %-22s\n", "threads", "variant", "ms", "spread", "ratio (target)");
    int status = 0;
    for (int t = 0; t < nthreads && !status; t++) {
        drop_call calls[D_COUNT];
        bench_call bc[D_COUNT];
        for (int x = 0; x < D_COUNT; x++) {
            drop_call *c = &calls[x];
            flashattn_tensor *ts[8] = {&c->q, &c->k, &c->v, &c->o, &c->dout, &c->dq, &c->dk, &c->dv};
            for (int y = 0; y < 8; y++) *ts[y] = flashattn_tensor_bshd(mem + y * n, FLASHATTN_F32, 1, seq, heads, d);
            c->lse = lse, c->bwd = x >= D_BWD;
            flashattn_params_init(&c->p);
            c->p.num_threads = threads[t];
            if (x == D_FWD_DROP || x == D_BWD_DROP) c->p.dropout_p = (float)rate, c->p.dropout_seed = 42;
            c->ws_bytes = 0;
            const flashattn_status st =
                c->bwd ? flashattn_bwd_workspace_size(&c->q, &c->k, &c->v, &c->o, &c->dout, lse, &c->dq, &c->dk,
                                                      &c->dv, &c->p, &c->ws_bytes)
                       : flashattn_fwd_workspace_size(&c->q, &c->k, &c->v, &c->o, lse, &c->p, &c->ws_bytes);
            if (st) {
                fprintf(stderr, "flashattn bench --dropout: %s: %s\n", d_name[x], flashattn_last_error());
                status = 1;
            }
            c->ws = malloc(c->ws_bytes ? c->ws_bytes : 1);
            bc[x].fn = run_call, bc[x].ctx = c, bc[x].ms = 0.0;
        }
        /* the backward reads the forward's O and LSE: one forward first */
        if (!status && run_call(&calls[D_FWD])) status = 1;
        double lo[D_COUNT], hi[D_COUNT];
        if (!status) bench_time_spread(bc, D_COUNT, reps, lo, hi);
        static const double target[D_COUNT] = {0, 1.15, 0, 1.1};
        for (int x = 0; !status && x < D_COUNT; x++) {
            char ratio[48] = "";
            if (bc[x].ms < 0) status = 1;
            if (target[x] > 0 && bc[x].ms > 0 && bc[x - 1].ms > 0) {
                const double r = bench_round_ratio(x, x - 1);
                snprintf(ratio, sizeof ratio, "%.2fx of %s (<= %.2fx %s)", r, d_name[x - 1], target[x],
                         r <= target[x] ? "PASS" : "MISS");
            }
            printf("%-8d | %-20s | %10.2f | %7.0f%% | %s\n", threads[t], d_name[x], bc[x].ms,
                   bc[x].ms > 0 ? 100.0 * (hi[x] - lo[x]) / bc[x].ms : 0.0, ratio);
        }
        for (int x = 0; x < D_COUNT; x++) free(calls[x].ws);
    }
    free(mem), free(lse);
    if (status) fprintf(stderr, "flashattn bench --dropout: a call failed\n");
    return status;
}
