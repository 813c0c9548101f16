/* inspect.c: `wsync inspect` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_inspect(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync inspect: not built yet\n");
    return 1;
}
