/* demo.c: `wsync demo` (being built; see the open issues). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_demo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsync demo: not built yet\n");
    return 1;
}
