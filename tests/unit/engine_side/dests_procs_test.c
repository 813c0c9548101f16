/* dests_procs_test.c: whole-image receivers with the caller's tensors as a
 * node of 2 engine processes on the host (shm windows), staged and in place,
 * over a corrupted version (tests/unit/engine_side/dests_procs.h). */
#include "tests/test.h"
#include "tests/unit/engine_side/dests_procs.h"

static void staged_node_of_two_processes(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_STAGED, 2, "dests-procs-staged"), 0);
}

static void in_place_node_of_two_processes(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_IN_PLACE, 2, "dests-procs-inplace"), 0);
}

int main(void)
{
    RUN(staged_node_of_two_processes);
    RUN(in_place_node_of_two_processes);
    TEST_EXIT();
}
