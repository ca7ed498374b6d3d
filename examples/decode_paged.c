/*
 * A generation loop on a paged KV cache: one prefill of a prompt per
 * sequence, then decode steps of one token each, with flashattn_decode
 * appending the new keys and values into the pages as it attends. Two
 * sequences of different prompt lengths share one page pool through their
 * block tables (as vLLM and FlashAttention-2's paged KV do); GQA with 8
 * query heads on 2 kv-heads.
 *
 * The model is left out: queries, keys and values are random. At the end
 * the last step is checked against flashattn_fwd over each whole sequence
 * (a causal dense call), which must agree to float rounding.
 *
 *   cc -O2 examples/decode_paged.c $(pkg-config --cflags --libs flashattn) -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

enum { BATCH = 2, HQ = 8, HKV = 2, D = 64, PAGE = 16, PAGES = 16, MAX_PAGES = 8, STEPS = 20 };

static float rnd(uint64_t *s) { /* uniform in [-1, 1) */
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return (float)((*s >> 40) * (2.0 / 16777216.0) - 1.0);
}

static void fill(float *x, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) x[i] = rnd(s);
}

/* Fail loudly: print the library's message and stop. */
static void check(flashattn_status st, const char *what) {
    if (st == FLASHATTN_OK) return;
    fprintf(stderr, "%s: %s (%s)\n", what, flashattn_strerror(st), flashattn_last_error());
    exit(1);
}

/* One flashattn_decode call: q [BATCH, rows, HQ, D] against the cache after
 * appending k_new, v_new [BATCH, rows, HKV, D] at row lens[b]. */
static void step(flashattn_kv_cache *cache, float *q, float *kn, float *vn, float *o, int64_t rows) {
    const flashattn_tensor tq = flashattn_tensor_bshd(q, FLASHATTN_F32, BATCH, rows, HQ, D);
    const flashattn_tensor tk = flashattn_tensor_bshd(kn, FLASHATTN_F32, BATCH, rows, HKV, D);
    const flashattn_tensor tv = flashattn_tensor_bshd(vn, FLASHATTN_F32, BATCH, rows, HKV, D);
    const flashattn_tensor to = flashattn_tensor_bshd(o, FLASHATTN_F32, BATCH, rows, HQ, D);
    flashattn_params p;
    flashattn_params_init(&p);
    p.causal = 1; /* bottom-right: the prompt's rows see their own past only */
    size_t ws = 0;
    check(flashattn_decode_workspace_size(&tq, cache, &tk, &tv, &to, NULL, &p, &ws), "workspace size");
    void *w = ws ? malloc(ws) : NULL;
    check(flashattn_decode(&tq, cache, &tk, &tv, &to, NULL, &p, w, ws), "decode");
    free(w);
}

int main(void) {
    uint64_t seed = 1;
    const int64_t prompt[BATCH] = {23, 9};
    /* The page pool [PAGES, PAGE, HKV, D] and each sequence's pages, in no
     * particular order (any free page will do). */
    float *kpool = calloc((size_t)PAGES * PAGE * HKV * D, sizeof(float));
    float *vpool = calloc((size_t)PAGES * PAGE * HKV * D, sizeof(float));
    const int32_t table[BATCH][MAX_PAGES] = {{5, 0, 9, 2, 12, 14, 1, 3}, {7, 11, 4, 6, 8, 10, 13, 15}};
    int32_t lens[BATCH] = {0, 0};
    flashattn_kv_cache cache;
    flashattn_kv_cache_init(&cache);
    cache.k = flashattn_tensor_bshd(kpool, FLASHATTN_F32, PAGES, PAGE, HKV, D);
    cache.v = flashattn_tensor_bshd(vpool, FLASHATTN_F32, PAGES, PAGE, HKV, D);
    cache.block_table = &table[0][0];
    cache.max_pages_per_seq = MAX_PAGES;
    cache.seqlens_i32 = lens;

    /* Every query, key and value of each sequence, kept to check against. */
    const int64_t total = prompt[0] + STEPS;
    float *qs = malloc(sizeof(float) * BATCH * total * HQ * D), *ks = malloc(sizeof(float) * BATCH * total * HKV * D);
    float *vs = malloc(sizeof(float) * BATCH * total * HKV * D), *o = malloc(sizeof(float) * BATCH * total * HQ * D);
    fill(qs, (size_t)BATCH * total * HQ * D, &seed);
    fill(ks, (size_t)BATCH * total * HKV * D, &seed);
    fill(vs, (size_t)BATCH * total * HKV * D, &seed);

    /* Prefill: the sequences' prompts differ in length, but one call takes a
     * [BATCH, rows] block, so each prompt is fed up to the shorter length
     * together, and the longer one's rest alone, one row a call (a real
     * server packs prompts with params.varlen instead). */
    const int64_t common = prompt[1];
    float *q = malloc(sizeof(float) * BATCH * total * HQ * D), *kn = malloc(sizeof(float) * BATCH * total * HKV * D);
    float *vn = malloc(sizeof(float) * BATCH * total * HKV * D);
    for (int b = 0; b < BATCH; b++) {
        memcpy(q + (size_t)b * common * HQ * D, qs + (size_t)b * total * HQ * D, sizeof(float) * common * HQ * D);
        memcpy(kn + (size_t)b * common * HKV * D, ks + (size_t)b * total * HKV * D, sizeof(float) * common * HKV * D);
        memcpy(vn + (size_t)b * common * HKV * D, vs + (size_t)b * total * HKV * D, sizeof(float) * common * HKV * D);
    }
    step(&cache, q, kn, vn, o, common);
    for (int b = 0; b < BATCH; b++) lens[b] += (int32_t)common;

    /* Decode: one row a step for each sequence; sequence 0 first finishes its
     * prompt, then both generate. Row t of sequence b is its token lens[b]. */
    int64_t done[BATCH] = {common, common};
    const int64_t end[BATCH] = {prompt[0] + STEPS, prompt[1] + STEPS};
    while (done[0] < end[0] || done[1] < end[1]) {
        for (int b = 0; b < BATCH; b++) {
            const int64_t t = done[b] < end[b] ? done[b] : end[b] - 1; /* a finished one repeats its last row */
            memcpy(q + (size_t)b * HQ * D, qs + ((size_t)b * total + t) * HQ * D, sizeof(float) * HQ * D);
            memcpy(kn + (size_t)b * HKV * D, ks + ((size_t)b * total + t) * HKV * D, sizeof(float) * HKV * D);
            memcpy(vn + (size_t)b * HKV * D, vs + ((size_t)b * total + t) * HKV * D, sizeof(float) * HKV * D);
            lens[b] = (int32_t)t; /* the append goes to row t */
        }
        step(&cache, q, kn, vn, o, 1);
        for (int b = 0; b < BATCH; b++)
            if (done[b] < end[b]) done[b]++;
    }
    printf("cache rows: %d and %d, in %d-row pages of a pool of %d\n", lens[0] + 1, lens[1] + 1, PAGE, PAGES);

    /* The check: each sequence's last query against all its keys, dense. */
    double worst = 0.0;
    for (int b = 0; b < BATCH; b++) {
        const int64_t n = end[b];
        const flashattn_tensor tq = flashattn_tensor_bshd(qs + (size_t)b * total * HQ * D, FLASHATTN_F32, 1, n, HQ, D);
        const flashattn_tensor tk = flashattn_tensor_bshd(ks + (size_t)b * total * HKV * D, FLASHATTN_F32, 1, n, HKV, D);
        const flashattn_tensor tv = flashattn_tensor_bshd(vs + (size_t)b * total * HKV * D, FLASHATTN_F32, 1, n, HKV, D);
        float *od = malloc(sizeof(float) * n * HQ * D);
        const flashattn_tensor to = flashattn_tensor_bshd(od, FLASHATTN_F32, 1, n, HQ, D);
        flashattn_params p;
        flashattn_params_init(&p);
        p.causal = 1;
        size_t ws = 0;
        check(flashattn_fwd_workspace_size(&tq, &tk, &tv, &to, NULL, &p, &ws), "fwd workspace size");
        void *w = ws ? malloc(ws) : NULL;
        check(flashattn_fwd(&tq, &tk, &tv, &to, NULL, &p, w, ws), "fwd");
        free(w);
        for (int64_t x = 0; x < HQ * D; x++)
            worst = fmax(worst, fabs((double)o[(size_t)b * HQ * D + x] - od[(size_t)(n - 1) * HQ * D + x]));
        free(od);
    }
    printf("last step against a dense causal call: max |difference| %.2e\n", worst);
    free(kpool), free(vpool), free(qs), free(ks), free(vs), free(o), free(q), free(kn), free(vn);
    if (worst > 1e-5) {
        fprintf(stderr, "the paged decode disagrees with the dense call\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
