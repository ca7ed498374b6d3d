/*
 * The CPU's model name, the part of the tuning-file key that says which
 * machine a measurement came from. The tuner and the library read it the
 * same way, so an entry the tuner wrote is found again by the library.
 */
#ifndef FA_CPU_MODEL_H
#define FA_CPU_MODEL_H

#include <stddef.h>

/* Writes the model ("Intel(R) Xeon(R) Processor @ 2.80GHz", "unknown" when
 * nothing says) with runs of white space folded to one space, no tabs, no
 * leading or trailing space. Neither prints nor allocates. */
void fa_cpu_model(char *out, size_t n);

#endif
