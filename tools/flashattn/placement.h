/*
 * Thread placement for the measuring commands (bench, peak). On small VMs
 * an unpinned 2-thread OpenMP team sometimes lands on one core and runs at
 * half speed; the measuring commands pin the team unless the user chose a
 * placement. libgomp reads OMP_PROC_BIND / OMP_PLACES once, when it is
 * loaded, before main(): setting them in-process has no effect, so the
 * command re-runs itself with them set.
 */
#ifndef FA_CLI_PLACEMENT_H
#define FA_CLI_PLACEMENT_H

/* Unless OMP_PROC_BIND or OMP_PLACES is set, re-exec this command with
 * OMP_PROC_BIND=spread OMP_PLACES=cores. Call first thing, before any
 * output or OpenMP call; argv is the subcommand's (argv[0] = "bench").
 * Returns only when no re-exec happened. */
void fa_cli_place_threads(int argc, char **argv);

/* How the threads are placed, for the output ("OMP_PROC_BIND=spread
 * OMP_PLACES=cores (set by flashattn)", "... (yours)", "unpinned: ..."). */
const char *fa_cli_placement(void);

#endif
