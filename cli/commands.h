/* commands.h: the subcommands of the wsync binary, one file each in cli/.
 * Each takes argc/argv starting at the subcommand name and returns the exit
 * status: 0 success, 1 failure of the job, 2 bad usage or bad input. */
#ifndef WSYNC_CLI_COMMANDS_H
#define WSYNC_CLI_COMMANDS_H

#include <getopt.h>

int cmd_inspect(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_target(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_trainer(int argc, char **argv);
int cmd_engine(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_delta(int argc, char **argv);

/* The options of the commands a config file can configure (its "serve",
 * "trainer", "engine" and "demo" objects are checked against them). */
extern const struct option cli_serve_options[];
extern const struct option cli_trainer_options[];
extern const struct option cli_engine_options[];
extern const struct option cli_demo_options[];

/* Takes "--config FILE" and "--set SETTING=VALUE" out of the command line,
 * loads the file's settings and the --set values, checks every setting, and
 * puts the file's `cmd` options before the remaining arguments (so flags
 * win). 0, or 2 with the reason printed. */
int cli_config_apply(const char *cmd, int *argc, char ***argv);

/* Print "wsync <cmd>: <what failed>: <last error>" to stderr. */
void cli_report(const char *cmd, const char *what, int status);

#endif
