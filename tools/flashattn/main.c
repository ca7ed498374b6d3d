/* flashattn: subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "flashattn.h"

static const fa_cli_command commands[] = {
    {"info", "version, kernel path, caches, threads", cmd_info},
    {"check", "randomised correctness sweep against the FP64 reference, every ISA path", cmd_check},
    {"run", "attention on your own .npy tensors", cmd_run},
    {"bench", "flash vs standard attention: time, speed-up, memory", cmd_bench},
    {"peak", "this machine's measured FP32 peak and memory bandwidth", cmd_peak},
    {"tune", "sweep block_m x block_n for one shape; --save keeps the best", cmd_tune},
    {"plan", "analytic model of a forward pass: footprint, traffic, roofline", cmd_plan},
};

static void usage(FILE *f) {
    fprintf(f, "flashattn %s: exact FlashAttention for CPUs\n\nusage: flashattn <command> [options]\n\n",
            flashattn_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`flashattn <command> --help` for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("flashattn %s\n", flashattn_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "flashattn: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
