/* Wall-clock timing for the measuring commands. */
#ifndef FA_CLI_TIMING_H
#define FA_CLI_TIMING_H

#include <time.h>

static inline double fa_cli_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median of x[0..n) (sorts x); 0 for n == 0. */
double fa_cli_median(double *x, int n);

#endif
