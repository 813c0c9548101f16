/* status.c: `wsync status` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_status(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync status: not built yet\n");
    return 1;
}
