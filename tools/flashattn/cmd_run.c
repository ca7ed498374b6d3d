/* flashattn run: placeholder until its implementation lands. */
#include <stdio.h>

#include "cli.h"

int cmd_run(int argc, char **argv) {
    fprintf(stderr, "flashattn run: not built yet\n");
    return 2;
}
