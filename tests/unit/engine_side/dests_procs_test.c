/* dests_procs_test.c: whole-image receivers with the caller's tensors as a
 * node of 2 engine processes on the host (shm windows), staged and in place,
 * over a corrupted version (tests/unit/engine_side/dests_procs.h); staged
 * with every tensor given by both ranks (one image each: the failed pull
 * overwrites it, the caller's tensors keep the version) and by one rank
 * only (the node keeps two); in place with every tensor given by both ranks
 * (a sparse image each, freed chunk by chunk) and by a lone rank (its bytes
 * land straight in its tensors, but each tensor's ends). */
#include "tests/test.h"
#include "tests/unit/engine_side/dests_procs.h"

static void staged_node_of_two_processes(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_STAGED, 2, 0, "dests-procs-staged"), 0);
}

static void in_place_node_of_two_processes(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_IN_PLACE, 2, 0, "dests-procs-inplace"), 0);
}

static void staged_every_tensor_given_one_image(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_STAGED, 2, 3, "dests-procs-staged-all"), 0);
}

static void staged_one_rank_gives_all_node_keeps_two(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_STAGED, 2, 1, "dests-procs-staged-mixed"), 0);
}

static void in_place_every_tensor_given_sparse_images(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_IN_PLACE, 2, 3, "dests-procs-inplace-all"), 0);
}

/* The same node with the whole image given as every rank's target: a node of
 * identity targets, in place; its chunks written through and verified as
 * groups of jobs (engine_side/chunk_groups.c), copied in from the peer too. */
static void in_place_identity_targets_node_of_two_processes(void)
{
    dests_procs_target = "{\"version\": 1, \"whole_image\": true}";
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_IN_PLACE, 2, 0, "dests-procs-id-inplace"), 0);
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_IN_PLACE, 2, 3, "dests-procs-id-inplace-all"), 0);
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_STAGED, 2, 0, "dests-procs-id-staged"), 0);
    dests_procs_target = NULL;
}

static void in_place_lone_rank_every_tensor_lands_direct(void)
{
    CHECK_EQ(dests_procs_run("host", WSYNC_MODE_IN_PLACE, 1, 1, "dests-procs-inplace-lone"), 0);
}

int main(void)
{
    RUN(staged_node_of_two_processes);
    RUN(staged_every_tensor_given_one_image);
    RUN(staged_one_rank_gives_all_node_keeps_two);
    RUN(in_place_node_of_two_processes);
    RUN(in_place_every_tensor_given_sparse_images);
    RUN(in_place_lone_rank_every_tensor_lands_direct);
    RUN(in_place_identity_targets_node_of_two_processes);
    TEST_EXIT();
}
