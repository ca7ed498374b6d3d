/*
 * The planner's model (tools/flashattn/plan_model.c) and its profile file
 * (hw_profiles.c, data/hw_profiles.tsv): counts checked by hand on a tiny
 * case, flash moving fewer bytes than standard attention on long
 * sequences, causal counting half, huge tiles overflowing every on-chip
 * buffer, the CPU footprint agreeing with the tile rule's, the shipped
 * profiles (with sources), and parse errors named by line and field.
 */
#include <math.h>
#include <string.h>

#include "hw_profiles.h"
#include "plan/tile_rule.h"
#include "plan_model.h"
#include "testutil.h"

static plan_input base(int64_t seq, int64_t d, int causal, int bm, int bn) {
    plan_input in = {.batch = 1, .heads = 8, .heads_kv = 8, .seq_q = seq, .seq_k = seq, .head_dim = d,
                     .head_dim_pad = d, .causal = causal, .in_bytes = 2, .tile_bytes = 2,
                     .kv_stream_bytes = 2, .pack_kv = 0, .kv_buffers = 2, .block_m = bm, .block_n = bn};
    return in;
}

static void test_by_hand(void) {
    /* seq 4, d 2, causal, 2 x 2 tiles, one head, 2-byte elements:
     * visible pairs 1 + 2 + 3 + 4 = 10; q-block 0 reads keys [0, 2), q-block
     * 1 keys [0, 4): 6 K and V rows. Flash: Q and O 2 x 4 x 2 x 2 B = 32, K
     * and V 6 x (2 + 2) x 2 B = 48. Standard: 2 x (4 + 4) x 2 x 2 B = 64
     * plus S write, S read, P write, P read: 4 x 16 x 2 B = 128. */
    plan_input in = base(4, 2, 1, 2, 2);
    plan_counts c;
    in.heads = in.heads_kv = 1;
    plan_count(&in, &c);
    TT_CHECK(c.visible_pairs == 10 && c.flops == 80, "pairs %g flops %g", c.visible_pairs, c.flops);
    TT_CHECK(c.bytes_flash == 80 && c.bytes_standard == 192, "flash %g standard %g", c.bytes_flash,
             c.bytes_standard);
    TT_CHECK(c.q_tile == 8 && c.kv_tiles == 32 && c.s_tile == 16 && c.o_acc == 16 && c.stats == 16,
             "footprint %lld %lld %lld %lld %lld", (long long)c.q_tile, (long long)c.kv_tiles,
             (long long)c.s_tile, (long long)c.o_acc, (long long)c.stats);
    /* packing adds one read in the input dtype and one packed write */
    in.pack_kv = 1, in.kv_stream_bytes = 4;
    plan_count(&in, &c);
    TT_CHECK(c.bytes_flash == 32 + 6 * 4 * 4 + 4 * (2 * 2 * 2 + 4 * 4), "packed flash %g", c.bytes_flash);
    /* seq_q < seq_k, bottom-right: query i sees keys up to i + 2 */
    in = base(2, 2, 1, 2, 2);
    in.heads = in.heads_kv = 1, in.seq_k = 4;
    plan_count(&in, &c);
    TT_CHECK(c.visible_pairs == 3 + 4, "bottom-right pairs %g", c.visible_pairs);
}

static void test_long_sequences(void) {
    static const int64_t seqs[] = {1024, 4096, 16384};
    static const int64_t dims[] = {64, 128};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++) {
            plan_counts full, causal;
            plan_input in = base(seqs[i], dims[j], 0, 128, 128);
            plan_count(&in, &full);
            /* closed forms: flash streams K and V once per q-block, so
             * flash / standard tends to head_dim / (2 block_m) (the
             * FlashAttention paper's N^2 d^2 / M): below 1 for long rows */
            const double nn = (double)seqs[i], dd = (double)dims[j];
            const double want_f = 8.0 * (2.0 * nn * dd * 2 + nn * ceil(nn / 128) * 2.0 * dd * 2);
            const double want_s = 8.0 * (4.0 * nn * dd * 2 + 4.0 * nn * nn * 2);
            TT_CHECK(full.bytes_flash == want_f && full.bytes_standard == want_s,
                     "seq %lld d %lld: flash %g (want %g) standard %g (want %g)", (long long)seqs[i],
                     (long long)dims[j], full.bytes_flash, want_f, full.bytes_standard, want_s);
            const double ratio = full.bytes_flash / full.bytes_standard;
            TT_CHECK(full.bytes_flash < full.bytes_standard && ratio >= dd / 256.0 &&
                         ratio < dd / 256.0 + dd / nn,
                     "seq %lld d %lld: flash / standard %g", (long long)seqs[i], (long long)dims[j], ratio);
            in.causal = 1;
            plan_count(&in, &causal);
            const double r = causal.flops / full.flops;
            TT_CHECK(fabs(r - 0.5) < 0.5 / (double)seqs[i] + 1e-12, "causal flops ratio %g", r);
            const double rb = (causal.bytes_flash - 2.0 * 8 * seqs[i] * dims[j] * 2) /
                              (full.bytes_flash - 2.0 * 8 * seqs[i] * dims[j] * 2);
            TT_CHECK(rb > 0.5 && rb < 0.5 + 128.0 / (double)seqs[i] + 1e-9, "causal K/V stream ratio %g", rb);
            /* standard attention materialises the whole S whatever the mask */
            TT_CHECK(causal.bytes_standard == full.bytes_standard, "standard causal bytes");
            /* more rows per q-block: fewer K/V passes */
            plan_counts big;
            in.causal = 0, in.block_m = 256;
            plan_count(&in, &big);
            TT_CHECK(big.bytes_flash < full.bytes_flash, "block_m 256 moves more than 128");
        }
    TT_CHECK(plan_roofline(2e12, 1e9, 1e12, 1e9) == 2.0 && plan_roofline(1e12, 4e9, 1e12, 1e9) == 4.0,
             "roofline max(compute, memory)");
}

/* The CPU parameters give plan/tile_rule.c's footprint, byte for byte. */
static void test_cpu_footprint(void) {
    static const int64_t dims[] = {40, 64, 128, 200};
    for (size_t i = 0; i < 4; i++) {
        fa_tile_query q = {.batch = 1, .heads_q = 8, .seq_q = 4096, .seq_k = 4096, .head_dim = dims[i],
                           .elem_bytes = 4, .mr = 12, .nr = 32, .l1d_bytes = 48 << 10,
                           .l2_bytes = 1280 << 10, .threads = 2};
        fa_tile_footprint f;
        fa_tile_footprint_of(&q, 96, 256, &f);
        plan_input in = base(4096, dims[i], 0, 96, 256);
        in.head_dim_pad = (dims[i] + 15) / 16 * 16, in.tile_bytes = 4, in.kv_buffers = 1;
        plan_counts c;
        plan_count(&in, &c);
        TT_CHECK(c.q_tile + c.kv_tiles + c.s_tile + c.o_acc + c.stats == f.tiles,
                 "d %lld: plan %lld, rule %lld", (long long)dims[i],
                 (long long)(c.q_tile + c.kv_tiles + c.s_tile + c.o_acc + c.stats), (long long)f.tiles);
    }
}

static void test_shipped_profiles(void) {
    static hw_profile hw[HW_MAX_PROFILES];
    char why[512];
    int n = hw_profiles_load(FA_SOURCE_DATA_DIR "/hw_profiles.tsv", hw, HW_MAX_PROFILES, why, sizeof why);
    TT_CHECK(n >= 5, "data/hw_profiles.tsv: %d profiles (%s)", n, n < 0 ? why : "");
    static const char *const need[] = {"ascend910", "ascend910b", "ascend310p", "a100", "h100"};
    for (size_t i = 0; i < 5 && n > 0; i++) {
        const hw_profile *p = hw_profiles_get(hw, n, need[i]);
        TT_CHECK(p != NULL, "profile %s missing", need[i]);
        if (!p) continue;
        TT_CHECK(strlen(p->source) > 40 && p->cores > 0 && p->mem_gbs > 0, "profile %s: thin entry", need[i]);
        /* the planner's point: a huge tile overflows every on-chip buffer */
        plan_input in = base(4096, 128, 0, 1024, 1024);
        plan_counts c;
        plan_count(&in, &c);
        TT_CHECK((double)(c.q_tile + c.kv_tiles) > p->tile_kib * 1024 &&
                     (double)(c.s_tile + c.o_acc + c.stats) > p->acc_kib * 1024,
                 "%s: a 1024 x 1024 tile fits", need[i]);
    }
    const hw_profile *a = n > 0 ? hw_profiles_get(hw, n, "ASCEND910") : NULL;
    /* an Ascend 910 AI Core has about 1 MiB of L1 buffer, not 64 MB */
    TT_CHECK(a && a->tile_kib == 1024 && a->tflops[FLASHATTN_F16] == 256, "ascend910 figures");
}

static void test_parse_errors(void) {
    static hw_profile hw[4];
    char why[512];
    const char *good = "# c\nname\tkind\tx\nx1\tgpu\t2\t64\tsmem\t0\tnone\t10\t0\t1\t100\tsrc\n";
    int n = hw_profiles_parse(good, strlen(good), hw, 4, why, sizeof why);
    TT_CHECK(n == 1 && hw[0].acc_kib == 0 && hw[0].tflops[FLASHATTN_F32] == 1, "good: %d %s", n, why);
    static const struct { const char *text, *needle; } bad[] = {
        {"", "no profiles"},
        {"# only a comment\n", "no profiles"},
        {"x\tgpu\t2\n", "line 1: 3 tab-separated fields, expected 12"},
        {"#\nx\tcpu\t2\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\n", "line 2: bad kind"},
        {"x\tgpu\t0\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\n", "bad cores"},
        {"x\tgpu\t2.5\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\n", "bad cores"},
        {"x\tgpu\t2\t64k\ts\t0\tn\t10\t0\t1\t100\tsrc\n", "bad tile_kib"},
        {"x\tgpu\t2\t64\ts\t0\tn\t0\t0\t0\t100\tsrc\n", "all 0"},
        {"x\tgpu\t2\t64\ts\t0\tn\t10\t0\t1\t-3\tsrc\n", "bad mem_gbs"},
        {"x\tgpu\t2\t64\ts\t0\tn\t10\t0\t1\t100\t\n", "bad source"},
        {"cpu\tgpu\t2\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\n", "reserved"},
        {"x\tgpu\t2\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\nX\tnpu\t2\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\n",
         "line 2: profile 'X' is reserved or defined twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        n = hw_profiles_parse(bad[i].text, strlen(bad[i].text), hw, 4, why, sizeof why);
        TT_CHECK(n < 0 && strstr(why, bad[i].needle), "bad %zu: n %d, why '%s', expected '%s'", i, n, why,
                 bad[i].needle);
    }
    TT_CHECK(hw_profiles_load("/nonexistent/hw.tsv", hw, 4, why, sizeof why) < 0 && strstr(why, "/nonexistent"),
             "missing file: %s", why);
}

int main(void) {
    test_by_hand();
    test_long_sequences();
    test_cpu_footprint();
    test_shipped_profiles();
    test_parse_errors();
    return tt_finish("test_plan");
}
