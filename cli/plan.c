/* plan.c: `wsync plan` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync plan: not built yet\n");
    return 1;
}
