/* engine.c: `wsync engine` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_engine(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync engine: not built yet\n");
    return 1;
}
