/* dests_test.c (GPU): whole-image receivers on cuda:0 with the caller's
 * tensors in device memory: a node of 2 engine processes sharing GPU 0
 * (CUDA IPC windows; in place, each chunk's copies into the caller's
 * tensors and their digests run as GPU jobs), staged and in place, over a
 * corrupted version (tests/unit/engine_side/dests_procs.h: the same checks
 * as the host test). Skips without a CUDA device. */
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"
#include "tests/unit/engine_side/dests_procs.h"

static int ngpu;

static void staged_dests_on_one_gpu(void)
{
    if (ngpu == 0)
        SKIP("needs a CUDA device");
    CHECK_EQ(dests_procs_run("cuda:0", WSYNC_MODE_STAGED, 2, 0, "dests-gpu-staged"), 0);
}

static void in_place_dests_on_one_gpu(void)
{
    if (ngpu == 0)
        SKIP("needs a CUDA device");
    CHECK_EQ(dests_procs_run("cuda:0", WSYNC_MODE_IN_PLACE, 2, 0, "dests-gpu-inplace"), 0);
}

static void staged_every_tensor_given_on_one_gpu(void)
{
    if (ngpu == 0)
        SKIP("needs a CUDA device");
    CHECK_EQ(dests_procs_run("cuda:0", WSYNC_MODE_STAGED, 2, 3, "dests-gpu-staged-all"), 0);
}

int main(void)
{
    ngpu = gpu_count_forked(); /* no CUDA in this process: it forks the engines */
    RUN(staged_dests_on_one_gpu);
    RUN(staged_every_tensor_given_on_one_gpu);
    RUN(in_place_dests_on_one_gpu);
    TEST_EXIT();
}
