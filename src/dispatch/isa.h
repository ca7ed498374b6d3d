/* Run-time choice of the kernel table (CPUID, FLASHATTN_ISA). */
#ifndef FA_ISA_H
#define FA_ISA_H

#include "kernels/kernels.h"

/* The table in use: chosen once, from CPUID and FLASHATTN_ISA. */
const fa_kernels *fa_active_kernels(void);

/* Table for a named path ("scalar", "avx2", "avx512"), or NULL when this
 * build or this CPU cannot run it. Lets tests and tools run every path. */
const fa_kernels *fa_kernels_by_name(const char *isa);

/* The names of the paths this CPU can run, best last; returns the count. */
int fa_available_isas(const char *names[], int max);

#endif
