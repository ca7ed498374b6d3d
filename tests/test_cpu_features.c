/*
 * The kernel paths' CPU checks (src/kernels/<path>/cpu_<path>.c read CPUID
 * and XCR0 themselves) against the Linux kernel's view of the same CPU, the
 * flags of /proc/cpuinfo, which the kernel clears for features whose state
 * the OS does not save. A wrong bit or a missing OS check shows as a
 * disagreement on any machine that has (or lacks) the feature.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#ifdef FA_HAVE_AVX2
#include "kernels/avx2/avx2.h"
#endif
#ifdef FA_HAVE_AVX512
#include "kernels/avx512/avx512.h"
#endif
#ifdef FA_HAVE_AVX512BF16
#include "kernels/avx512bf16/avx512bf16.h"
#endif

/* What the AVX-512 table is compiled for (src/kernels/isa_list.h). */
#define AVX512 "avx512f avx512dq avx512bw avx512vl fma f16c"

static char flags[1 << 14];

/* Whether every space-separated name in `names` is a flag of the CPU. */
static int has_all(const char *names) {
    char want[256];
    snprintf(want, sizeof want, "%s", names);
    for (char *w = strtok(want, " "); w; w = strtok(NULL, " ")) {
        const size_t n = strlen(w);
        const char *p = flags;
        while ((p = strstr(p, w)) && !((p == flags || p[-1] == ' ') && strchr(" \n", p[n])))
            p += n;
        if (!p) return 0;
    }
    return 1;
}

int main(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[sizeof flags];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            snprintf(flags, sizeof flags, "%s", strchr(line, ':') ? strchr(line, ':') + 1 : "");
            break;
        }
    if (f) fclose(f);
    if (!flags[0]) {
        printf("test_cpu_features: no /proc/cpuinfo flags to compare with: skipped\n");
        return 77;
    }
#ifdef FA_HAVE_AVX2
    TT_CHECK(fa_cpu_avx2() == has_all("avx2 fma f16c"), "avx2: %d, /proc/cpuinfo says %d",
             fa_cpu_avx2(), has_all("avx2 fma f16c"));
#endif
#ifdef FA_HAVE_AVX512
    TT_CHECK(fa_cpu_avx512() == has_all(AVX512), "avx512: %d, /proc/cpuinfo says %d",
             fa_cpu_avx512(), has_all(AVX512));
#endif
#ifdef FA_HAVE_AVX512BF16
    TT_CHECK(fa_cpu_avx512bf16() == (has_all(AVX512) && has_all("avx512_bf16")),
             "avx512bf16: %d, /proc/cpuinfo says %d", fa_cpu_avx512bf16(),
             has_all(AVX512) && has_all("avx512_bf16"));
#endif
    return tt_finish("test_cpu_features");
}
