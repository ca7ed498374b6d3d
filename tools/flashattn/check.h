/*
 * `flashattn check`: sections (forward today; backward and decode later)
 * share the options, the per-run report line and the tally. Adding a
 * section is one file defining a check_section and one line in the table
 * in cmd_check.c.
 */
#ifndef FA_CHECK_H
#define FA_CHECK_H

#include <stdint.h>

#include "tool/tool.h"

#define CHECK_MAX_ISAS 8

typedef struct check_opts {
    int quick;    /* a short sweep that still touches every feature */
    uint64_t seed;
    const fa_kernels *isas[CHECK_MAX_ISAS];
    int n_isas;
} check_opts;

typedef struct check_tally {
    int cases, runs, failed;
    double worst_ratio;  /* max over runs of err / bound (0 / 0 counts as 0) */
    char worst[320];     /* the line of that run */
} check_tally;

/* One result of one case on one ISA path. */
typedef struct check_result {
    const char *isa;
    const char *desc;     /* the case, in a form one can rerun by hand */
    const char *failure;  /* NULL, or why the run failed beyond the error bound */
    double err, rel, bound;
    double lse_err, lse_bound;
    int lse_inf_ok;
} check_result;

/* Print the run's line and count it; returns 1 if it passed. */
int check_report(check_tally *t, const check_result *r);

typedef struct check_section {
    const char *name;
    const char *summary;
    /* Run every case on every ISA in o, reporting each through check_report.
     * Returns 0, or -1 when the sweep itself could not run (out of memory). */
    int (*run)(const check_opts *o, check_tally *t);
} check_section;

extern const check_section check_section_fwd;
extern const check_section check_section_bwd;

#endif
