/* flashattn peak: placeholder until its implementation lands. */
#include <stdio.h>

#include "cli.h"

int cmd_peak(int argc, char **argv) {
    fprintf(stderr, "flashattn peak: not built yet\n");
    return 2;
}
