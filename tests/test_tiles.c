/*
 * Forward tile choice (src/plan): the automatic rule's outputs for
 * representative shapes and synthetic caches, its invariants (block_n a
 * multiple of NR and independent of the thread count, block_m shrinking
 * for short sequences), the validation of user tiles from params and from
 * FLASHATTN_BLOCK_M/N, and the tuning file: parsing, saving, and the
 * library's use of it, including missing, foreign and corrupt files.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/forward.h"
#include "api/validate.h"
#include "dispatch/isa.h"
#include "plan/tile_rule.h"
#include "plan/tiles.h"
#include "plan/tune_file.h"
#include "testutil.h"
#include "tool/tool.h"

static fa_tile_query query(int64_t seq, int64_t d, int mr, int nr, int64_t l1, int64_t l2, int threads) {
    fa_tile_query q = {.batch = 1, .heads_q = 8, .seq_q = seq, .seq_k = seq, .head_dim = d,
                       .elem_bytes = 4, .mr = mr, .nr = nr, .l1d_bytes = l1, .l2_bytes = l2,
                       .threads = threads};
    return q;
}

/* Invariants over a sweep of shapes, kernels and caches. */
static void test_rule_invariants(void) {
    static const int64_t seqs[] = {1, 7, 100, 512, 4096, 100000};
    static const int64_t dims[] = {1, 32, 64, 80, 128, 256};
    static const int kern[][2] = {{4, 16}, {6, 16}, {12, 32}, {8, 64}};
    static const int64_t l1s[] = {0, 16 << 10, 32 << 10, 48 << 10, 64 << 10};
    static const int64_t l2s[] = {0, 256 << 10, 1280 << 10, 2 << 20, 32 << 20};
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 6; b++)
            for (size_t c = 0; c < 4; c++)
                for (size_t e = 0; e < 5; e++)
                    for (size_t g = 0; g < 5; g++) {
                        const int mr = kern[c][0], nr = kern[c][1];
                        int bm1, bn1, bm, bn;
                        fa_tile_query q = query(seqs[a], dims[b], mr, nr, l1s[e], l2s[g], 1);
                        q.pv8 = (int)((a + c + e) % 2);
                        fa_tile_rule(&q, &bm1, &bn1);
                        TT_CHECK(bn1 >= nr && bn1 % nr == 0 && bn1 <= FA_MAX_BLOCK &&
                                     bn1 <= (seqs[a] + nr - 1) / nr * nr,
                                 "seq %lld d %lld nr %d: block_n %d", (long long)seqs[a],
                                 (long long)dims[b], nr, bn1);
                        TT_CHECK(bm1 >= mr && bm1 % mr == 0 && bm1 <= FA_MAX_BLOCK,
                                 "seq %lld d %lld mr %d: block_m %d", (long long)seqs[a],
                                 (long long)dims[b], mr, bm1);
                        for (int t = 2; t <= 64; t *= 2) {
                            q.threads = t;
                            fa_tile_rule(&q, &bm, &bn);
                            TT_CHECK(bn == bn1, "block_n %d with %d threads, %d with 1", bn, t, bn1);
                            TT_CHECK(bm <= bm1 && bm >= mr, "block_m %d with %d threads, %d with 1",
                                     bm, t, bm1);
                        }
                    }
}

/* The rule's outputs for representative cases, worked out by hand from the
 * footprint model: this machine's caches (Ice Lake server: 48 KiB L1d,
 * 1.25 MiB L2) with the AVX-512 (12 x 32) and portable (4 x 16) kernels,
 * a Zen 2 core (32 KiB, 512 KiB) with the AVX2 kernel (6 x 16), a client
 * core (32 KiB, 256 KiB, which unknown caches also assume), and the 8-bit
 * P V route. Masks take the same tiles (tile_rule.c). */
static void test_rule_values(void) {
    static const struct {
        int64_t seq, d, l1, l2;
        int mr, nr, bm, bn;
        const char *why;
    } cases[] = {
        {2048, 128, 48 << 10, 1280 << 10, 12, 32, 96, 256,
         "P.V 32+12 KiB <= L1d, K/V 256 KiB <= L2/4; Q + K panel in L1d: 60 rows, raised to 96"},
        {4096, 128, 48 << 10, 1280 << 10, 12, 32, 180, 256,
         "K and V 4 MiB > 2 L2: at least 192 rows, but 192 takes 641.5 KiB > L2/2: 180"},
        {4096, 64, 48 << 10, 1280 << 10, 12, 32, 156, 256, "(48 KiB - 8 KiB panel) / 256 B: 160 rows"},
        {8192, 64, 48 << 10, 1280 << 10, 12, 32, 192, 256, "K and V 4 MiB > 2 L2: 192 rows, within L2/2"},
        {4096, 32, 48 << 10, 1280 << 10, 12, 32, 252, 256, "L1d allows 352 rows: capped at 256"},
        {4096, 256, 48 << 10, 1280 << 10, 12, 32, 144, 256,
         "K/V at 256 keys is 512 KiB > L2/4: 128 keys, raised to the 256-key floor (P.V 32 + 12 KiB <= L1d); "
         "K and V 8 MiB > 2 L2, and 144 rows fit L2/2 beside the 128-key block"},
        {1024, 256, 48 << 10, 1280 << 10, 12, 32, 96, 256, "K and V 2 MiB <= 2 L2: 96 rows; the 256-key floor"},
        {1024, 128, 32 << 10, 512 << 10, 6, 16, 84, 256,
         "AVX2 on a 512 KiB L2: K/V at 256 keys 256 KiB > L2/4: 128 keys, floor 256 (P.V 16 + 6 KiB <= L1d); "
         "84 rows fit L2/2 beside the 128-key block"},
        {1024, 256, 32 << 10, 512 << 10, 6, 16, 54, 256, "the same at d 256: 64 keys by L2/4, floor 256; 54 rows"},
        {4096, 128, 48 << 10, 1280 << 10, 4, 16, 188, 256,
         "512 keys: K/V 512 KiB > L2/4; K and V > 2 L2: 192 rows, 188 within L2/2"},
        {4096, 128, 48 << 10, 1280 << 10, 6, 16, 186, 256, "AVX2 6 x 16: 2056 B a row + 256 KiB within L2/2: 186"},
        {4096, 128, 32 << 10, 256 << 10, 12, 32, 48, 64,
         "client core: 1288 bm + 64 KiB <= L2/2; no floor: P.V at 256 keys (32 + 12 KiB) > L1d"},
        {4096, 128, 0, 0, 12, 32, 48, 64, "unknown caches: the client core's"},
        /* the last four: the 8-bit P V route (q.pv8 below) */
        {4096, 128, 48 << 10, 1280 << 10, 12, 32, 132, 512,
         "pv8: P.V at 512 keys 16 + 6 KiB, K/V 128 KiB; 3720 B a row + 128 KiB within L2/2: 132"},
        {1024, 128, 48 << 10, 1280 << 10, 12, 32, 132, 512, "pv8: K and V 256 KiB, the same rows"},
        {4096, 64, 48 << 10, 1280 << 10, 12, 32, 180, 512, "pv8, d 64: 3144 B a row + 64 KiB: 180"},
        {4096, 256, 48 << 10, 1280 << 10, 12, 32, 72, 512,
         "pv8, d 256: K/V 256 KiB <= L2/4; 4872 B a row + 256 KiB within L2/2: 72"},
    };
    const size_t first_pv8 = sizeof cases / sizeof cases[0] - 4;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int bm, bn;
        fa_tile_query q = query(cases[i].seq, cases[i].d, cases[i].mr, cases[i].nr, cases[i].l1, cases[i].l2, 2);
        q.pv8 = i >= first_pv8;
        fa_tile_rule(&q, &bm, &bn);
        TT_CHECK(bm == cases[i].bm && bn == cases[i].bn, "case %zu (%s): %d x %d, expected %d x %d", i,
                 cases[i].why, bm, bn, cases[i].bm, cases[i].bn);
    }
}

/* The library's view of a problem: its lengths, and each varlen sequence
 * alone with its own. */
static void test_query_of(void) {
    static char dummy[16];
    const fa_kernels *kern = fa_kernels_by_name("scalar");
    flashattn_tensor t = flashattn_tensor_bshd(dummy, FLASHATTN_F32, 1, 1000, 2, 64);
    flashattn_params p = flashattn_params_default();
    fa_problem pb;
    fa_tile_query q;
    p.causal = 1;
    fa_validate_fwd(&t, &t, &t, &t, NULL, &p, &pb);
    fa_tile_query_of(&pb, kern, 3, &q);
    TT_CHECK(q.seq_q == 1000 && q.seq_k == 1000 && q.threads == 3 && q.mr == kern->mr && q.head_dim == 64 &&
                 !q.pv8,
             "dense: seq %lld/%lld threads %d", (long long)q.seq_q, (long long)q.seq_k, q.threads);
    int32_t cu[3] = {0, 100, 1000};
    flashattn_varlen vl;
    flashattn_varlen_init(&vl);
    vl.batch = 2, vl.cu_seqlens_q = cu, vl.cu_seqlens_k = cu;
    p.varlen = &vl;
    TT_CHECK(fa_validate_fwd(&t, &t, &t, &t, NULL, &p, &pb) == FLASHATTN_OK, "varlen validates");
    int bm, bn, bm_long, bn_long;
    fa_seq_tiles(&pb, kern, 0, &bm, &bn);
    fa_seq_tiles(&pb, kern, 1, &bm_long, &bn_long);
    TT_CHECK(bn == 112 && bn_long > bn,
             "varlen: a 100-key sequence alone gets block_n %d (its keys rounded to NR: 112), a 900-key one %d",
             bn, bn_long);
}

/* Fewer rows than threads x 4 work items: block_m shrinks, not below MR. */
static void test_short_sequences(void) {
    int bm, bn, bm_long, bn_long;
    fa_tile_query q = query(4096, 64, 12, 32, 48 << 10, 1280 << 10, 2);
    fa_tile_rule(&q, &bm_long, &bn_long);
    q.heads_q = 1, q.seq_q = 256, q.threads = 16;
    fa_tile_rule(&q, &bm, &bn);
    TT_CHECK(bm == 12, "1 head, 256 rows, 16 threads: block_m %d, expected MR 12", bm);
    q.heads_q = 4, q.seq_q = 2 * bm_long, q.threads = 4;
    fa_tile_rule(&q, &bm, &bn);
    TT_CHECK(4 * ((q.seq_q + bm - 1) / bm) >= 16 && bm < bm_long,
             "4 heads x %lld rows on 4 threads: block_m %d leaves fewer than 16 items",
             (long long)q.seq_q, bm);
    q.seq_q = 5, q.threads = 1;
    fa_tile_rule(&q, &bm, &bn);
    TT_CHECK(bm == 12, "5 rows: block_m %d, expected one register tile (12)", bm);
    q = query(4096, 64, 12, 32, 48 << 10, 1280 << 10, 2);
    q.seq_k = 40;
    fa_tile_rule(&q, &bm, &bn);
    TT_CHECK(bn == 64, "40 keys: block_n %d, expected 64 (40 rounded up to NR 32)", bn);
}

/* ---- user tiles ------------------------------------------------------------ */

typedef struct {
    tt_tensor q, k, v, o;
    fa_problem pb;
} shape;

/* In place: s->pb points at s's own tensors. */
static void make_shape(shape *s, int64_t seq, int64_t d, flashattn_dtype dt) {
    uint64_t rng = 5;
    s->q = tt_alloc(dt, 1, seq, 2, d, 1, 0);
    s->k = tt_alloc(dt, 1, seq, 2, d, 1, 0);
    s->v = tt_alloc(dt, 1, seq, 2, d, 1, 0);
    s->o = tt_alloc(dt, 1, seq, 2, d, 1, 0);
    tt_fill_normal(&s->q, &rng, 1.0), tt_fill_normal(&s->k, &rng, 1.0), tt_fill_normal(&s->v, &rng, 1.0);
    flashattn_params p = flashattn_params_default();
    flashattn_status st = fa_validate_fwd(&s->q.t, &s->k.t, &s->v.t, &s->o.t, NULL, &p, &s->pb);
    TT_CHECK(st == FLASHATTN_OK, "shape: %s", flashattn_last_error());
}

static void free_shape(shape *s) { tt_free(&s->q), tt_free(&s->k), tt_free(&s->v), tt_free(&s->o); }

/* Run the forward on kern; on an expected error, O must be untouched and
 * the message must contain `needle`. */
static void expect(const shape *s, const fa_kernels *kern, flashattn_params *p, flashattn_status want,
                   const char *needle, const char *label) {
    tt_fill_sentinel(s->o.mem, s->o.bytes);
    flashattn_status got = fa_fwd_ex(&s->q.t, &s->k.t, &s->v.t, &s->o.t, NULL, p, NULL, 0, kern);
    TT_CHECK(got == want, "[%s] %s: status %d, expected %d (%s)", kern->isa, label, got, want,
             flashattn_last_error());
    if (want != FLASHATTN_OK) {
        TT_CHECK(tt_untouched(s->o.mem, s->o.bytes), "[%s] %s: O written on error", kern->isa, label);
        TT_CHECK(strstr(flashattn_last_error(), needle) != NULL, "[%s] %s: message '%s' lacks '%s'",
                 kern->isa, label, flashattn_last_error(), needle);
    }
}

static void plan_of(const shape *s, const fa_kernels *kern, const flashattn_params *p, fa_fwd_plan *plan,
                    flashattn_status want) {
    flashattn_status got = fa_plan_fwd(&s->pb, p, kern, plan);
    TT_CHECK(got == want, "[%s] plan status %d, expected %d (%s)", kern->isa, got, want,
             flashattn_last_error());
}

static void test_user_tiles(const fa_kernels *kern) {
    shape s;
    make_shape(&s, 70, 40, FLASHATTN_F32);
    flashattn_params p = flashattn_params_default();
    char num[32], msg[64];
    fa_fwd_plan plan;

    p.block_n = kern->nr + kern->nr / 2;
    snprintf(msg, sizeof msg, "multiple of %d", kern->nr);
    expect(&s, kern, &p, FLASHATTN_ERR_BAD_TILE, msg, "params.block_n not a multiple of NR");
    p.block_n = 2 * FA_MAX_BLOCK;
    expect(&s, kern, &p, FLASHATTN_ERR_BAD_TILE, "<= 4096", "params.block_n too large");
    p.block_n = 0, p.block_m = FA_MAX_BLOCK + 1;
    expect(&s, kern, &p, FLASHATTN_ERR_BAD_TILE, "<= 4096", "params.block_m too large");
    p.block_m = -3;
    expect(&s, kern, &p, FLASHATTN_ERR_BAD_TILE, ">= 0", "params.block_m negative");
    p.block_m = 7, p.block_n = 3 * kern->nr; /* any block_m runs; block_n in whole panels */
    expect(&s, kern, &p, FLASHATTN_OK, "", "params 7 x 3 NR");
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(plan.block_m == 7 && plan.block_n == 3 * kern->nr && strcmp(plan.source_m, "params") == 0,
             "[%s] params tiles: %d x %d from %s", kern->isa, plan.block_m, plan.block_n, plan.source_m);

    /* The environment, validated the same way. */
    p = flashattn_params_default();
    static const struct { const char *m, *n, *needle; } bad[] = {
        {"0", NULL, "FLASHATTN_BLOCK_M=0: must be >= 1"},
        {NULL, "0", "FLASHATTN_BLOCK_N=0: must be >= 1"},
        {"abc", NULL, "not an integer"},
        {"12x", NULL, "not an integer"},
        {NULL, "-32", "must be >= 1"},
        {"5000", NULL, "<= 4096"},
        {NULL, "99999999999999999999", "not an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsetenv("FLASHATTN_BLOCK_M"), unsetenv("FLASHATTN_BLOCK_N");
        if (bad[i].m) setenv("FLASHATTN_BLOCK_M", bad[i].m, 1);
        if (bad[i].n) setenv("FLASHATTN_BLOCK_N", bad[i].n, 1);
        expect(&s, kern, &p, FLASHATTN_ERR_BAD_TILE, bad[i].needle, bad[i].needle);
    }
    unsetenv("FLASHATTN_BLOCK_M");
    snprintf(num, sizeof num, "%d", kern->nr + 1);
    setenv("FLASHATTN_BLOCK_N", num, 1);
    snprintf(msg, sizeof msg, "FLASHATTN_BLOCK_N=%d: must be a multiple of %d", kern->nr + 1, kern->nr);
    expect(&s, kern, &p, FLASHATTN_ERR_BAD_TILE, msg, "env block_n not a multiple of NR");
    /* params win, and a bad variable is then never read */
    p.block_n = kern->nr;
    expect(&s, kern, &p, FLASHATTN_OK, "", "params over a bad FLASHATTN_BLOCK_N");
    p.block_n = 0;
    snprintf(num, sizeof num, "%d", 2 * kern->nr);
    setenv("FLASHATTN_BLOCK_N", num, 1);
    setenv("FLASHATTN_BLOCK_M", "37", 1);
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(plan.block_m == 37 && plan.block_n == 2 * kern->nr &&
                 strcmp(plan.source_m, "environment") == 0 && strcmp(plan.source_n, "environment") == 0,
             "[%s] env tiles: %d x %d from %s/%s", kern->isa, plan.block_m, plan.block_n, plan.source_m,
             plan.source_n);
    expect(&s, kern, &p, FLASHATTN_OK, "", "env 37 x 2 NR");
    unsetenv("FLASHATTN_BLOCK_M"), unsetenv("FLASHATTN_BLOCK_N");
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(strcmp(plan.source_m, "rule") == 0 && strcmp(plan.source_n, "rule") == 0,
             "[%s] no user tiles: sources %s/%s", kern->isa, plan.source_m, plan.source_n);
    free_shape(&s);
}

/* ---- the tuning file ------------------------------------------------------- */

static void test_parse(void) {
    fa_tune_entry e[4];
    int n;
    char why[256];
    const char good[] = FA_TUNE_HEADER "\n# comment\n\n"
                        "CPU X\tavx512\t128\tbf16\t1\t96\t256\tseq 4096\n"
                        "CPU X\tscalar\t64\tf32\t0\t4\t16\t\n";
    TT_CHECK(fa_tune_parse(good, strlen(good), e, 4, &n, why, sizeof why) && n == 2,
             "good file: n %d (%s)", n, why);
    TT_CHECK(n == 2 && strcmp(e[0].key.cpu, "CPU X") == 0 && strcmp(e[0].key.isa, "avx512") == 0 &&
                 e[0].key.head_dim == 128 && e[0].key.dtype == FLASHATTN_BF16 && e[0].key.causal == 1 &&
                 e[0].block_m == 96 && e[0].block_n == 256 && strcmp(e[0].note, "seq 4096") == 0 &&
                 e[1].key.dtype == FLASHATTN_F32 && e[1].note[0] == '\0',
             "good file: fields misread");
    TT_CHECK(fa_tune_parse(FA_TUNE_HEADER, strlen(FA_TUNE_HEADER), e, 4, &n, why, sizeof why) && n == 0,
             "header only: %s", why);
    static const struct { const char *text, *needle; } bad[] = {
        {"", "not a flashattn tuning file"},
        {"cpu\tavx512\t128\tf32\t0\t96\t256\tx\n", "not a flashattn tuning file"},
        {FA_TUNE_HEADER "x\n", "not a flashattn tuning file"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t128\tf32\t0\t96\t256\n", "line 2: 7 tab-separated fields"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t128\tf32\t0\t96\t256\tx\ty\n", "9 tab-separated"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t128\tf64\t0\t96\t256\tx\n", "bad dtype"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t0\tf32\t0\t96\t256\tx\n", "bad head_dim"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t128\tf32\t2\t96\t256\tx\n", "bad causal"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t128\tf32\t0\t0\t256\tx\n", "bad block_m"},
        {FA_TUNE_HEADER "\n#\nCPU\tavx512\t128\tf32\t0\t96\t9999\tx\n", "line 3: bad block_n"},
        {FA_TUNE_HEADER "\nCPU\tavx512\t128\tf32\t0\t96\t-5\tx\n", "bad block_n"},
        {FA_TUNE_HEADER "\n\tavx512\t128\tf32\t0\t96\t256\tx\n", "bad cpu model"},
        {FA_TUNE_HEADER "\nCPU\t\t128\tf32\t0\t96\t256\tx\n", "bad isa"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        int ok = fa_tune_parse(bad[i].text, strlen(bad[i].text), e, 4, &n, why, sizeof why);
        TT_CHECK(!ok && strstr(why, bad[i].needle), "bad file %zu: ok %d, why '%s', expected '%s'", i, ok,
                 why, bad[i].needle);
    }
    const char nul[] = FA_TUNE_HEADER "\nCPU\tavx512\t128\tf32\t0\t96\t256\tx\0y\n";
    TT_CHECK(!fa_tune_parse(nul, sizeof nul - 1, e, 4, &n, why, sizeof why) && strstr(why, "NUL"),
             "NUL byte: %s", why);
    char many[1024];
    snprintf(many, sizeof many, "%s", FA_TUNE_HEADER "\n");
    for (int i = 0; i < 5; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "C\ti\t%d\tf32\t0\t8\t16\t\n", i + 1);
    TT_CHECK(!fa_tune_parse(many, strlen(many), e, 4, &n, why, sizeof why) && strstr(why, "more than 4"),
             "5 entries into 4: %s", why);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    TT_CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_save(const char *dir) {
    char path[512], why[512];
    fa_tune_entry a, b, e[8];
    int n;
    snprintf(path, sizeof path, "%s/saved.tsv", dir);
    memset(&a, 0, sizeof a);
    fa_tune_key_make(&a.key, "avx512", 128, FLASHATTN_F32, 0);
    a.block_m = 96, a.block_n = 256;
    snprintf(a.note, sizeof a.note, "first");
    b = a;
    b.key.causal = 1, b.block_m = 48;
    TT_CHECK(fa_tune_save(path, &a, why, sizeof why) == 0, "save a: %s", why);
    TT_CHECK(fa_tune_save(path, &b, why, sizeof why) == 0, "save b: %s", why);
    a.block_n = 128;
    snprintf(a.note, sizeof a.note, "second");
    TT_CHECK(fa_tune_save(path, &a, why, sizeof why) == 0, "save a again: %s", why);
    FILE *f = fopen(path, "r");
    char text[4096];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[len] = '\0';
    TT_CHECK(fa_tune_parse(text, len, e, 8, &n, why, sizeof why) && n == 2, "saved file: n %d (%s)", n, why);
    TT_CHECK(n == 2 && e[0].block_n == 128 && strcmp(e[0].note, "second") == 0 && e[1].block_m == 48 &&
                 e[1].key.causal == 1 && strcmp(e[1].note, "first") == 0,
             "saved file: entries not replaced in place");
    snprintf(path, sizeof path, "%s/foreign.txt", dir);
    write_text(path, "my notes\n");
    TT_CHECK(fa_tune_save(path, &a, why, sizeof why) != 0 && strstr(why, "not overwriting"),
             "foreign file overwritten: %s", why);
    f = fopen(path, "r");
    TT_CHECK(f && fgets(text, sizeof text, f) && strcmp(text, "my notes\n") == 0, "foreign file changed");
    if (f) fclose(f);
}

/* The library's use of the file: found entries, and every unusable file
 * ignored with exactly one warning. */
static void test_library_reads(const char *dir, const fa_kernels *kern) {
    shape s;
    make_shape(&s, 300, 64, FLASHATTN_F32);
    flashattn_params p = flashattn_params_default();
    /* One thread: the tuned block_m must not depend on the host's thread
     * count (at 16 threads 300 rows x 2 heads shrink it; the last check
     * below covers that). */
    p.num_threads = 1;
    fa_fwd_plan plan, rule;
    fa_tune_entry e;
    char path[512], why[512], warning[512];
    fa_tune_take_warning(warning, sizeof warning);
    unsetenv("FLASHATTN_TUNE_FILE");
    plan_of(&s, kern, &p, &rule, FLASHATTN_OK);

    memset(&e, 0, sizeof e);
    fa_tune_key_make(&e.key, kern->isa, 64, FLASHATTN_F32, 0);
    e.block_m = 2 * kern->mr, e.block_n = 3 * kern->nr;
    snprintf(path, sizeof path, "%s/good_%s.tsv", dir, kern->isa);
    TT_CHECK(fa_tune_save(path, &e, why, sizeof why) == 0, "save: %s", why);
    setenv("FLASHATTN_TUNE_FILE", path, 1);
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(plan.block_m == 2 * kern->mr && plan.block_n == 3 * kern->nr &&
                 strcmp(plan.source_m, "tuning file") == 0 && strcmp(plan.source_n, "tuning file") == 0,
             "[%s] tuned tiles: %d x %d from %s", kern->isa, plan.block_m, plan.block_n, plan.source_m);
    TT_CHECK(!fa_tune_take_warning(warning, sizeof warning), "good file warned: %s", warning);
    p.block_n = kern->nr; /* params still win, per tile */
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(plan.block_n == kern->nr && plan.block_m == 2 * kern->mr && strcmp(plan.source_n, "params") == 0,
             "[%s] params over the file: %d x %d", kern->isa, plan.block_m, plan.block_n);
    p.block_n = 0;
    /* other shapes in a good file: no entry, the rule, no warning */
    p.causal = 1;
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(strcmp(plan.source_m, "rule") == 0 && !fa_tune_take_warning(warning, sizeof warning),
             "[%s] causal has no entry: source %s", kern->isa, plan.source_m);
    p.causal = 0;

    static const struct { const char *name, *text, *needle; } unusable[] = {
        {"missing.tsv", NULL, "cannot open"},
        {"foreign.tsv", "block_m=96\n", "not a flashattn tuning file"},
        {"corrupt.tsv", FA_TUNE_HEADER "\nCPU\tavx512\t64\n", "tab-separated fields"},
        {"other_cpu.tsv", FA_TUNE_HEADER "\nSome Other CPU\tavx512\t64\tf32\t0\t96\t256\t\n",
         "no entry for this CPU"},
    };
    for (size_t i = 0; i < sizeof unusable / sizeof unusable[0]; i++) {
        snprintf(path, sizeof path, "%s/%s_%s", dir, kern->isa, unusable[i].name);
        if (unusable[i].text) write_text(path, unusable[i].text);
        setenv("FLASHATTN_TUNE_FILE", path, 1);
        expect(&s, kern, &p, FLASHATTN_OK, "", unusable[i].name);
        plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
        TT_CHECK(plan.block_m == rule.block_m && plan.block_n == rule.block_n &&
                     strcmp(plan.source_m, "rule") == 0,
                 "[%s] %s: tiles %d x %d, rule %d x %d", kern->isa, unusable[i].name, plan.block_m,
                 plan.block_n, rule.block_m, rule.block_n);
        warning[0] = '\0';
        TT_CHECK(fa_tune_take_warning(warning, sizeof warning) && strstr(warning, unusable[i].needle) &&
                     strstr(warning, path),
                 "[%s] %s: warning '%s'", kern->isa, unusable[i].name, warning);
        TT_CHECK(!fa_tune_take_warning(warning, sizeof warning), "[%s] %s: warned twice: %s", kern->isa,
                 unusable[i].name, warning);
    }

    /* An entry the kernel cannot run (a file older than the kernels). */
    snprintf(path, sizeof path, "%s/stale_%s.tsv", dir, kern->isa);
    e.block_n = kern->nr + 1;
    TT_CHECK(fa_tune_save(path, &e, why, sizeof why) == 0, "save stale: %s", why);
    setenv("FLASHATTN_TUNE_FILE", path, 1);
    expect(&s, kern, &p, FLASHATTN_OK, "", "stale entry");
    plan_of(&s, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(strcmp(plan.source_n, "rule") == 0 && strcmp(plan.source_m, "rule") == 0,
             "[%s] stale entry used", kern->isa);
    TT_CHECK(fa_tune_take_warning(warning, sizeof warning) && strstr(warning, "multiple of"),
             "[%s] stale entry: warning '%s'", kern->isa, warning);
    unsetenv("FLASHATTN_TUNE_FILE");
    free_shape(&s);

    /* A tuned block_m still shrinks when the sequence is short. */
    shape tiny;
    make_shape(&tiny, 2 * kern->mr, 64, FLASHATTN_F32);
    snprintf(path, sizeof path, "%s/good_%s.tsv", dir, kern->isa);
    setenv("FLASHATTN_TUNE_FILE", path, 1);
    p.num_threads = 4;
    plan_of(&tiny, kern, &p, &plan, FLASHATTN_OK);
    TT_CHECK(plan.block_m == kern->mr && plan.block_n == kern->nr,
             "[%s] tuned tiles on %d rows, 4 threads: %d x %d", kern->isa, 2 * kern->mr, plan.block_m,
             plan.block_n);
    unsetenv("FLASHATTN_TUNE_FILE");
    free_shape(&tiny);
}

int main(void) {
    const fa_kernels *isas[4];
    int n = tt_isas(isas, 4);
    char dir[] = "/tmp/fa_test_tiles_XXXXXX";
    unsetenv("FLASHATTN_BLOCK_M"), unsetenv("FLASHATTN_BLOCK_N"), unsetenv("FLASHATTN_TUNE_FILE");
    test_rule_invariants();
    test_rule_values();
    test_query_of();
    test_short_sequences();
    test_parse();
    TT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_save(dir);
    for (int i = 0; i < n; i++) {
        test_user_tiles(isas[i]);
        test_library_reads(dir, isas[i]);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    TT_CHECK(system(cmd) == 0, "cleanup of %s", dir);
    return tt_finish("test_tiles");
}
