/*
 * The run-time cache detector (src/plan/cpu_caches.c): the sysfs size
 * parser, and on machines that offer both sources, sysfs and CPUID must
 * agree on L1d, L2 and L3 (they describe the same hardware).
 */
#include <string.h>

#include "plan/cpu_caches.h"
#include "testutil.h"

static void test_parse(void) {
    static const struct {
        const char *text;
        int ok;
        int64_t bytes;
    } cases[] = {
        {"48K\n", 1, 48 << 10},   {"1280K", 1, 1280 << 10}, {"32M\n", 1, 32 << 20},
        {"64\n", 1, 64},          {"1G", 1, 1 << 30},       {"", 0, 0},
        {"K", 0, 0},              {"12Q", 0, 0},            {"-4K", 0, 0},
        {"4K extra", 0, 0},       {"99999999999999999999K", 0, 0},
        {"9007199254740992G", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t b = -1;
        int ok = fa_parse_cache_size(cases[i].text, &b);
        TT_CHECK(ok == cases[i].ok && (!ok || b == cases[i].bytes), "'%s': ok %d bytes %lld",
                 cases[i].text, ok, (long long)b);
    }
}

static void test_sources_agree(void) {
    fa_cpu_caches s, c;
    int have_s = fa_cpu_caches_from_sysfs(&s), have_c = fa_cpu_caches_from_cpuid(&c);
    printf("sysfs: %s L1d %lld L2 %lld L3 %lld line %lld\n", have_s ? "yes" : "no",
           (long long)s.l1d_bytes, (long long)s.l2_bytes, (long long)s.l3_bytes, (long long)s.line_bytes);
    printf("cpuid: %s L1d %lld L2 %lld L3 %lld line %lld\n", have_c ? "yes" : "no",
           (long long)c.l1d_bytes, (long long)c.l2_bytes, (long long)c.l3_bytes, (long long)c.line_bytes);
    TT_CHECK(have_s == (strcmp(s.source, "sysfs") == 0) && have_c == (strcmp(c.source, "cpuid") == 0),
             "source names");
    if (have_s && have_c)
        TT_CHECK(s.l1d_bytes == c.l1d_bytes && s.l2_bytes == c.l2_bytes && s.l3_bytes == c.l3_bytes &&
                     s.line_bytes == c.line_bytes,
                 "sysfs and CPUID disagree");
    const fa_cpu_caches *g = fa_cpu_caches_get();
    TT_CHECK(g == fa_cpu_caches_get(), "detected once");
    if (have_s || have_c) {
        TT_CHECK(strcmp(g->source, "none") != 0, "a source worked but the result says none");
        /* every cache anyone has built is within these bounds */
        TT_CHECK(g->l1d_bytes >= (4 << 10) && g->l1d_bytes <= (4 << 20), "L1d %lld", (long long)g->l1d_bytes);
        TT_CHECK(g->l2_bytes == 0 || g->l2_bytes >= g->l1d_bytes, "L2 %lld below L1d", (long long)g->l2_bytes);
        TT_CHECK(g->line_bytes >= 16 && g->line_bytes <= 512 && (g->line_bytes & (g->line_bytes - 1)) == 0,
                 "line %lld", (long long)g->line_bytes);
    } else {
        TT_CHECK(g->l1d_bytes == 0 && strcmp(g->source, "none") == 0, "nothing found, nothing reported");
    }
}

int main(void) {
    test_parse();
    test_sources_agree();
    return tt_finish("test_cpu_caches");
}
