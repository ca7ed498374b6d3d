/* flashattn check: placeholder until its implementation lands. */
#include <stdio.h>

#include "cli.h"

int cmd_check(int argc, char **argv) {
    fprintf(stderr, "flashattn check: not built yet\n");
    return 2;
}
