/* OpenMP when the build has it; one thread otherwise. */
#ifndef FA_CORE_THREADS_H
#define FA_CORE_THREADS_H

#ifdef _OPENMP
#include <omp.h>
static inline int fa_thread_id(void) { return omp_get_thread_num(); }
static inline int fa_team_size(void) { return omp_get_num_threads(); }
static inline int fa_default_threads(void) { return omp_get_max_threads(); }
#else
static inline int fa_thread_id(void) { return 0; }
static inline int fa_team_size(void) { return 1; }
static inline int fa_default_threads(void) { return 1; }
#endif

/* Whether a driver asked for `threads` runs its work-sharing body without
 * a parallel region of its own: one thread, and no active region around
 * the call (there its `omp for` would bind to the caller's team). A
 * region of one thread still pays its barriers: libgomp wakes a futex at
 * each, four system calls in a 1 x 1 call. */
#ifdef _OPENMP
static inline int fa_run_alone(int threads) { return threads <= 1 && !omp_in_parallel(); }
#else
static inline int fa_run_alone(int threads) { (void)threads; return 1; }
#endif

/* params.num_threads, 0 meaning the OpenMP default. */
static inline int fa_threads_or_default(int asked) { return asked > 0 ? asked : fa_default_threads(); }

#endif
