/* serve.c: `wsync serve` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync serve: not built yet\n");
    return 1;
}
