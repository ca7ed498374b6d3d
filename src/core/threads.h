/* OpenMP when the build has it; one thread otherwise. */
#ifndef FA_CORE_THREADS_H
#define FA_CORE_THREADS_H

#ifdef _OPENMP
#include <omp.h>
static inline int fa_thread_id(void) { return omp_get_thread_num(); }
static inline int fa_default_threads(void) { return omp_get_max_threads(); }
#else
static inline int fa_thread_id(void) { return 0; }
static inline int fa_default_threads(void) { return 1; }
#endif

/* params.num_threads, 0 meaning the OpenMP default. */
static inline int fa_threads_or_default(int asked) { return asked > 0 ? asked : fa_default_threads(); }

#endif
