/* trainer.c: `wsync trainer` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_trainer(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync trainer: not built yet\n");
    return 1;
}
