/* OpenMP when the build has it; one thread otherwise. */
#ifndef FA_THREADS_H
#define FA_THREADS_H

#ifdef _OPENMP
#include <omp.h>
static inline int fa_thread_id(void) { return omp_get_thread_num(); }
#else
static inline int fa_thread_id(void) { return 0; }
#endif

#endif
