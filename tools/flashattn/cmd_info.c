/* flashattn info: what this build and this machine offer (flashattn_info). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "flashattn.h"

int cmd_info(int argc, char **argv) {
    if (argc > 1) {
        int help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
        fprintf(help ? stdout : stderr, "usage: flashattn info\n\n"
                "Version, the kernel path in use and those this CPU can run, the CPU,\n"
                "its caches (as the tile planner sees them) and the thread count.\n");
        return help ? 0 : 2;
    }
    fputs(flashattn_info(), stdout);
    return 0;
}
