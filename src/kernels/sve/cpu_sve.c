/* Whether the CPU runs the SVE table: Linux sets HWCAP_SVE only when the
 * CPU has SVE and the kernel saves its state; Advanced SIMD (the rest of
 * the table) comes with it. Other systems (macOS has no SVE to offer) get
 * no. Compiled without the path's flags. */
#include "kernels/neon/neon.h"
#include "kernels/sve/sve.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_SVE
#define HWCAP_SVE (1ul << 22)
#endif
#endif

int fa_cpu_sve(void) {
#if defined(__aarch64__) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_SVE) != 0 && fa_cpu_neon();
#else
    return 0;
#endif
}
