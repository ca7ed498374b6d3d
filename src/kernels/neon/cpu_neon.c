/* Whether the CPU runs the NEON table: Advanced SIMD and scalar FP, as
 * Linux reports them in AT_HWCAP, or macOS in hw.optional.AdvSIMD. Both
 * are in every AArch64 application processor, and the compiler's
 * baseline already assumes them, so elsewhere the answer is yes.
 * Compiled without the path's flags (the build leaves cpu_*.c at the
 * baseline target); on another architecture it is never called (the
 * table is not built there) but still compiles. */
#include "kernels/neon/neon.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_FP
#define HWCAP_FP (1ul << 0)
#endif
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1ul << 1)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1ul << 14)
#endif
#elif defined(__APPLE__)
#include <sys/sysctl.h>
static int sysctl_flag(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v != 0;
}
#endif

int fa_cpu_neon(void) {
#if defined(__aarch64__) && defined(__linux__)
    const unsigned long need = HWCAP_FP | HWCAP_ASIMD;
    return (getauxval(AT_HWCAP) & need) == need;
#elif defined(__APPLE__)
    return sysctl_flag("hw.optional.AdvSIMD");
#else
    return 1;
#endif
}

int fa_cpu_arm_bf16(void) {
#if defined(__aarch64__) && defined(__linux__)
    return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#elif defined(__APPLE__)
    return sysctl_flag("hw.optional.arm.FEAT_BF16");
#else
    return 0;
#endif
}
