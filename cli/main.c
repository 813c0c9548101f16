/* main.c: the wsync binary: dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/base/settings.h"
#include "common/wsync.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    {"demo", cmd_demo, "run control endpoint, trainers and engines on this machine"},
    {"serve", cmd_serve, "run the control endpoint"},
    {"trainer", cmd_trainer, "trainer stand-in: publish versions of a model"},
    {"engine", cmd_engine, "engine stand-in: pull, verify and hold versions"},
    {"status", cmd_status, "show where every engine stands"},
    {"inspect", cmd_inspect, "print the tensors of a safetensors file"},
    {"plan", cmd_plan, "print who sends what to whom for a model and topology"},
    {"target", cmd_target, "print what one tensor-parallel engine rank holds"},
    {"config", cmd_config, "print every setting, its value and where it came from"},
    {"calibrate", cmd_calibrate, "measure this machine's links and write a links file"},
    {"delta", cmd_delta, "what sending a version as a delta from another would cost"},
};

void cli_report(const char *cmd, const char *what, int status)
{
    const char *detail = wsync_last_error();
    fprintf(stderr, "wsync %s: %s: %s%s%s\n", cmd, what, wsync_status_str(status), detail[0] ? ": " : "", detail);
}

static void usage(FILE *f)
{
    size_t i;
    fprintf(f, "usage: wsync <command> [options]   (wsync <command> --help for its options)\n\n");
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n  --version  print the version and the backends built in\n");
}

int main(int argc, char **argv)
{
    size_t i;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("wsync %s\nbackends: %s\n", wsync_version(), wsync_backends());
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* A bad WSYNC_* value stops every command before it starts. */
            if (wsync_settings_init() != WSYNC_OK) {
                fprintf(stderr, "wsync %s: %s\n", argv[1], wsync_last_error());
                return 2;
            }
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "wsync: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
