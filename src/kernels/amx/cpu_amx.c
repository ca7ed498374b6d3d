/* Whether the CPU runs the AMX table. Compiled without the path's flags
 * (the build leaves cpu_*.c at the baseline target).
 * AMX needs the CPU (CPUID.7.0:EDX AMX-BF16 bit 22, AMX-TILE bit 24), the
 * OS saving tile state (XCR0 bits 17 and 18) and, on Linux, the process's
 * permission to use tile data, asked once (arch_prctl ARCH_REQ_XCOMP_PERM
 * for XFEATURE_XTILEDATA; without it the first tile load faults). Other
 * systems are not offered AMX. The permission enlarges the process's
 * signal frames (Linux then refuses alternate signal stacks smaller than
 * AT_MINSIGSTKSZ); FLASHATTN_ISA=avx512 keeps the library from asking. */
#include <cpuid.h>
#include <pthread.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/amx/amx.h"
#include "kernels/avx512/avx512.h"

static int amx_ready;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void probe_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return;
#ifdef __linux__
    amx_ready = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#endif
}

int fa_cpu_amx(void) {
    if (!fa_cpu_avx512()) return 0;
    pthread_once(&amx_once, probe_amx);
    return amx_ready;
}

int fa_cpu_amx_int8(void) {
    unsigned a, b, c, d;
    return fa_cpu_amx() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 25));
}
