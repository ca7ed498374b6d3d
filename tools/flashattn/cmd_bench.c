/* flashattn bench: placeholder until its implementation lands. */
#include <stdio.h>

#include "cli.h"

int cmd_bench(int argc, char **argv) {
    fprintf(stderr, "flashattn bench: not built yet\n");
    return 2;
}
