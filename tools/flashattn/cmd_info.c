/* flashattn info: placeholder until its implementation lands. */
#include <stdio.h>

#include "cli.h"

int cmd_info(int argc, char **argv) {
    fprintf(stderr, "flashattn info: not built yet\n");
    return 2;
}
