#include "placement.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set in the re-executed process so it knows the placement is ours. */
#define PLACED_VAR "FLASHATTN_PLACED"

static char placement[256] = "unpinned";

void fa_cli_place_threads(int argc, char **argv) {
    const char *bind = getenv("OMP_PROC_BIND"), *places = getenv("OMP_PLACES");
    if (getenv(PLACED_VAR) && bind && places) {
        snprintf(placement, sizeof placement, "OMP_PROC_BIND=%s OMP_PLACES=%s (set by flashattn)",
                 bind, places);
        return;
    }
    if (bind || places) {
        snprintf(placement, sizeof placement, "OMP_PROC_BIND=%s OMP_PLACES=%s (yours)",
                 bind ? bind : "(unset)", places ? places : "(unset)");
        return;
    }
    char **args = malloc(((size_t)argc + 2) * sizeof *args);
    if (args) {
        args[0] = (char *)"flashattn";
        for (int i = 0; i < argc; i++) args[i + 1] = argv[i];
        args[argc + 1] = NULL;
        setenv("OMP_PROC_BIND", "spread", 1);
        setenv("OMP_PLACES", "cores", 1);
        setenv(PLACED_VAR, "1", 1);
        execv("/proc/self/exe", args);
        /* Still here: the exec failed. Run unpinned and say so. */
        snprintf(placement, sizeof placement, "unpinned (re-exec failed: %s)", strerror(errno));
        unsetenv("OMP_PROC_BIND");
        unsetenv("OMP_PLACES");
        unsetenv(PLACED_VAR);
        free(args);
    }
}

const char *fa_cli_placement(void) { return placement; }
