/*
 * Kernel dispatch. The library is built for the baseline target; each
 * path's tables are compiled per file with that path's flags, and handed
 * out only when the table's own cpu_supported() (compiled without them)
 * says this CPU and OS run it. No SIGILL probing, no process-wide side
 * effects beyond a once-initialised pointer and, on Linux CPUs with AMX,
 * the one request that lets the process use tile data (kernels/amx/).
 */
#include "dispatch/isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

static const struct {
    const char *name;
    int automatic;
} paths[] = {
#define FA_ISA(name, automatic, flags) {#name, automatic},
#include "kernels/isa_list.h"
};
enum { FA_PATHS = (int)(sizeof paths / sizeof paths[0]) };

const fa_kernels *fa_kernels_by_name(const char *isa) {
    if (!isa) return NULL;
    for (const fa_kernels *const *t = fa_isa_built; *t; t++)
        if (strcmp((*t)->isa, isa) == 0) return (*t)->cpu_supported() ? *t : NULL;
    return NULL;
}

int fa_listed_isas(const char *names[], int max) {
    int n = 0;
    for (int i = 0; i < FA_PATHS && n < max; i++) names[n++] = paths[i].name;
    return n;
}

int fa_isa_automatic(const char *isa) {
    for (int i = 0; isa && i < FA_PATHS; i++)
        if (strcmp(paths[i].name, isa) == 0) return paths[i].automatic;
    return 0;
}

int fa_available_isas(const char *names[], int max) {
    int n = 0;
    for (int i = 0; i < FA_PATHS; i++)
        if (n < max && fa_kernels_by_name(paths[i].name)) names[n++] = paths[i].name;
    return n;
}

static const fa_kernels *active;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

/* The path FLASHATTN_ISA names when this CPU runs it, else the best
 * automatic one (the list is worst first). A forced path is the only one
 * whose CPU check runs, so FLASHATTN_ISA=avx512 keeps the AMX probe (and
 * its request to the OS) from happening. */
static void choose_active(void) {
    const char *forced = getenv("FLASHATTN_ISA");
    const fa_kernels *k = forced ? fa_kernels_by_name(forced) : NULL;
    for (int i = FA_PATHS - 1; !k && i >= 0; i--)
        if (paths[i].automatic) k = fa_kernels_by_name(paths[i].name);
    active = k;
}

const fa_kernels *fa_active_kernels(void) {
    pthread_once(&active_once, choose_active);
    return active;
}

const char *flashattn_isa(void) { return fa_active_kernels()->isa; }
