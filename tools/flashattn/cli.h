/* The `flashattn` command-line tool: one file per subcommand. */
#ifndef FA_CLI_H
#define FA_CLI_H

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} fa_cli_command;

int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_peak(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_plan(int argc, char **argv);

#endif
