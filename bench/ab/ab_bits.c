/*
 * One line per case, a hash of every output byte (forward O and LSE,
 * backward dQ, dK, dV deterministic and on one thread, decode O, LSE and
 * the cache after the append) over forward, backward and decode cases on
 * 1 and 2 threads in f32, f16 and bf16. Built against two builds, the two
 * listings must be equal for a change that keeps results bit-identical
 * (bench/ab/run.sh diffs them, per kernel path).
 */
/* 0.2's entry points: both builds compared have them */
#define FLASHATTN_ABI_0_2 1
#include <flashattn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t xr(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static float frand(void) { return (float)((double)(xr() >> 11) / 9007199254740992.0 * 4.0 - 2.0); }
static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) { h ^= c[i]; h *= 1099511628211ull; }
    return h;
}
static size_t esz(flashattn_dtype dt) { return dt == FLASHATTN_F32 ? 4 : 2; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static uint16_t tohalf(float f) { /* crude: via _Float16 */ _Float16 h = (_Float16)f; uint16_t u; memcpy(&u, &h, 2); return u; }
static void *mk(flashattn_dtype dt, size_t n) {
    void *p = malloc(n * esz(dt) + 64);
    for (size_t i = 0; i < n; i++) {
        float f = frand();
        if (dt == FLASHATTN_F32) ((float *)p)[i] = f;
        else if (dt == FLASHATTN_BF16) ((uint16_t *)p)[i] = tobf(f);
        else ((uint16_t *)p)[i] = tohalf(f);
    }
    return p;
}

static void fwd_case(int b, int sq, int sk, int h, int hk, int d, flashattn_dtype dt, int causal, int wl, int wr,
                     int align, int want_lse, int bm, int bn, int threads, int bhsd) {
    void *q = mk(dt, (size_t)b * sq * h * d), *k = mk(dt, (size_t)b * sk * hk * d), *v = mk(dt, (size_t)b * sk * hk * d);
    void *o = calloc((size_t)b * sq * h * d + 16, esz(dt));
    float *lse = calloc((size_t)b * h * sq + 1, 4);
    flashattn_tensor (*mkt)(void *, flashattn_dtype, int64_t, int64_t, int64_t, int64_t) = bhsd ? flashattn_tensor_bhsd : flashattn_tensor_bshd;
    flashattn_tensor Q = mkt(q, dt, b, sq, h, d), K = mkt(k, dt, b, sk, hk, d), V = mkt(v, dt, b, sk, hk, d), O = mkt(o, dt, b, sq, h, d);
    flashattn_params p;
    flashattn_params_init(&p);
    p.causal = causal; p.window_left = wl; p.window_right = wr; p.align = align; p.block_m = bm; p.block_n = bn; p.num_threads = threads;
    flashattn_status s = flashattn_fwd(&Q, &K, &V, &O, want_lse ? lse : NULL, &p, NULL, 0);
    uint64_t hsh = fnv(o, (size_t)b * sq * h * d * esz(dt), 1469598103934665603ull);
    if (want_lse) hsh = fnv(lse, (size_t)b * h * sq * 4, hsh);
    printf("fwd b%d sq%d sk%d h%d/%d d%d dt%d c%d w%d,%d a%d lse%d bm%d bn%d t%d L%d: s%d %016llx\n", b, sq, sk, h, hk, d, dt, causal, wl, wr, align, want_lse, bm, bn, threads, bhsd, s, (unsigned long long)hsh);
    /* backward on f32 outputs */
    if (want_lse && s == 0) {
        void *dout = mk(dt, (size_t)b * sq * h * d);
        void *dq = calloc((size_t)b * sq * h * d + 16, esz(dt)), *dk = calloc((size_t)b * sk * hk * d + 16, esz(dt)), *dv = calloc((size_t)b * sk * hk * d + 16, esz(dt));
        flashattn_tensor dO = mkt(dout, dt, b, sq, h, d), dQ = mkt(dq, dt, b, sq, h, d), dK = mkt(dk, dt, b, sk, hk, d), dV = mkt(dv, dt, b, sk, hk, d);
        for (int det = 0; det < 2; det++) {
            flashattn_params pb = p; pb.block_m = 0; pb.block_n = 0; pb.deterministic = det;
            if (!det) pb.num_threads = 1;
            s = flashattn_bwd(&Q, &K, &V, &O, &dO, lse, &dQ, &dK, &dV, &pb, NULL, 0);
            uint64_t g = fnv(dq, (size_t)b * sq * h * d * esz(dt), 1469598103934665603ull);
            g = fnv(dk, (size_t)b * sk * hk * d * esz(dt), g);
            g = fnv(dv, (size_t)b * sk * hk * d * esz(dt), g);
            printf("  bwd det%d: s%d %016llx\n", det, s, (unsigned long long)g);
        }
        free(dout); free(dq); free(dk); free(dv);
    }
    free(q); free(k); free(v); free(o); free(lse);
}

static void dec_case(int b, int sq, int cap, int h, int hk, int d, flashattn_dtype qdt, flashattn_dtype cdt, int seq_new,
                     int paged, int page, int causal, int wl, int align, int splits, int threads) {
    int64_t pages_per = (cap + page - 1) / page;
    int64_t npages = paged ? b * pages_per + 3 : 0;
    size_t rows = paged ? (size_t)npages * page : (size_t)b * cap;
    void *q = mk(qdt, (size_t)b * sq * h * d);
    void *kc = mk(cdt, rows * hk * d), *vc = mk(cdt, rows * hk * d);
    void *kn = seq_new ? mk(qdt, (size_t)b * seq_new * hk * d) : NULL, *vn = seq_new ? mk(qdt, (size_t)b * seq_new * hk * d) : NULL;
    void *o = calloc((size_t)b * sq * h * d + 16, esz(qdt));
    float *lse = calloc((size_t)b * h * sq + 1, 4);
    int32_t *bt = calloc((size_t)b * pages_per + 1, 4);
    int32_t *lens = calloc(b + 1, 4);
    for (int i = 0; i < b; i++) lens[i] = (int32_t)(xr() % (uint64_t)(cap - seq_new + 1));
    for (int64_t i = 0; i < b * pages_per; i++) bt[i] = npages ? (int32_t)((i * 7 + 3) % npages) : 0;
    flashattn_kv_cache c; flashattn_kv_cache_init(&c);
    if (paged) {
        c.k = flashattn_tensor_bshd(kc, cdt, npages, page, hk, d); c.v = flashattn_tensor_bshd(vc, cdt, npages, page, hk, d);
        c.block_table = bt; c.max_pages_per_seq = pages_per;
    } else {
        c.k = flashattn_tensor_bshd(kc, cdt, b, cap, hk, d); c.v = flashattn_tensor_bshd(vc, cdt, b, cap, hk, d);
    }
    c.seqlens_i32 = lens;
    flashattn_tensor Q = flashattn_tensor_bshd(q, qdt, b, sq, h, d), O = flashattn_tensor_bshd(o, qdt, b, sq, h, d);
    flashattn_tensor KN = flashattn_tensor_bshd(kn, qdt, b, seq_new, hk, d), VN = flashattn_tensor_bshd(vn, qdt, b, seq_new, hk, d);
    flashattn_params p;
    flashattn_params_init(&p);
    p.causal = causal; p.window_left = wl; p.align = align; p.num_splits = splits; p.num_threads = threads;
    flashattn_status s = flashattn_decode(&Q, &c, seq_new ? &KN : NULL, seq_new ? &VN : NULL, &O, lse, &p, NULL, 0);
    uint64_t hsh = fnv(o, (size_t)b * sq * h * d * esz(qdt), 1469598103934665603ull);
    hsh = fnv(lse, (size_t)b * h * sq * 4, hsh);
    hsh = fnv(kc, rows * hk * d * esz(cdt), hsh);
    printf("dec b%d sq%d cap%d h%d/%d d%d q%d c%d new%d paged%d/%d c%d w%d a%d sp%d t%d: s%d %016llx\n", b, sq, cap, h, hk, d, qdt, cdt, seq_new, paged, page, causal, wl, align, splits, threads, s, (unsigned long long)hsh);
    free(q); free(kc); free(vc); free(kn); free(vn); free(o); free(lse); free(bt); free(lens);
}

int main(void) {
    const flashattn_dtype dts[3] = {FLASHATTN_F32, FLASHATTN_F16, FLASHATTN_BF16};
    for (int t = 1; t <= 2; t++)
    for (int di = 0; di < 3; di++) {
        flashattn_dtype dt = dts[di];
        fwd_case(1, 1, 1, 1, 1, 1, dt, 0, -1, -1, 0, 1, 0, 0, t, 0);
        fwd_case(2, 37, 53, 4, 2, 24, dt, 1, -1, -1, 0, 1, 0, 0, t, 0);
        fwd_case(2, 53, 37, 4, 2, 24, dt, 1, -1, -1, 1, 1, 0, 0, t, 1);
        fwd_case(1, 200, 300, 2, 1, 64, dt, 0, 17, 5, 0, 1, 0, 0, t, 0);
        fwd_case(1, 300, 200, 2, 1, 64, dt, 1, 40, -1, 1, 1, 48, 32, t, 0);
        fwd_case(2, 130, 130, 3, 3, 128, dt, 1, -1, -1, 0, 0, 0, 0, t, 0);
        fwd_case(1, 257, 513, 2, 2, 80, dt, 0, -1, -1, 0, 1, 0, 0, t, 1);
        fwd_case(1, 16, 1000, 8, 2, 128, dt, 0, -1, -1, 0, 0, 0, 0, t, 0);
        fwd_case(1, 16, 1000, 8, 2, 128, dt, 0, -1, -1, 0, 1, 0, 0, t, 0);
        fwd_case(1, 3, 700, 8, 8, 64, dt, 1, -1, -1, 0, 0, 0, 0, t, 0);
        fwd_case(1, 24, 24, 8, 8, 256, dt, 0, -1, -1, 0, 0, 0, 0, t, 0);
        fwd_case(1, 100, 90, 4, 1, 33, dt, 0, 10, 10, 0, 1, 0, 0, t, 0);
        fwd_case(1, 512, 512, 2, 2, 128, dt, 1, -1, -1, 0, 1, 0, 0, t, 0);
        fwd_case(1, 70, 0, 2, 2, 16, dt, 0, -1, -1, 0, 1, 0, 0, t, 0);
        fwd_case(1, 70, 90, 2, 2, 16, dt, 0, 0, 0, 1, 1, 0, 0, t, 0);
        fwd_case(1, 90, 70, 2, 2, 16, dt, 1, -1, -1, 0, 1, 0, 0, t, 0);
        dec_case(3, 1, 700, 8, 2, 64, dt, dt, 0, 0, 16, 0, -1, 0, 0, t);
        dec_case(3, 1, 700, 8, 2, 64, FLASHATTN_F32, dt, 1, 1, 16, 0, -1, 0, 0, t);
        dec_case(2, 4, 2000, 8, 2, 128, dt, dt, 4, 1, 64, 1, -1, 0, 5, t);
        dec_case(2, 7, 900, 32, 4, 128, dt, FLASHATTN_F16, 7, 0, 1, 1, 100, 1, 0, t);
        dec_case(1, 1, 5000, 4, 4, 96, dt, dt, 1, 0, 1, 0, -1, 0, 0, t);
        dec_case(4, 2, 300, 4, 1, 40, dt, dt, 2, 1, 7, 1, 20, 0, 3, t);
    }
    return 0;
}
