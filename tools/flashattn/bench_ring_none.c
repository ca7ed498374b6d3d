/* `bench --ring` in a build without MPI (see bench_ring.c). */
#include <stdio.h>

#include "bench.h"

int bench_ring_cmd(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "flashattn bench --ring: this flashattn was built without MPI (install an MPI, e.g. "
                    "Open MPI's development package, and rebuild)\n");
    return 2;
}
