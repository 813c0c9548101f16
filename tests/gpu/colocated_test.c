/* colocated_test.c: trainer and engine ranks on one GPU, each its own
 * process (bench/colocated.h): every route delivers the trainer's bytes.
 * wsync for 1 and 2 engine ranks, staged and in place, single-copy
 * (zero_copy) and slot routes, and the packed-IPC path the benchmark
 * compares with; after every step each engine rank copies every tensor
 * back and compares it with the pattern the trainer wrote, computed again
 * on the CPU; with 2 ranks both when each lands every chunk itself and when
 * one lands it and the other copies it out of its window. And a byte flipped in the trainer's publish slot after it
 * digested the version is caught on one GPU too, where the landing's
 * digest comes out of the fused copy. Single-copy versions are announced
 * before the trainer's digests (late_digests=auto on a GPU): the routes
 * above run that way, and here also with the digests posted only after
 * every chunk landed, with late digests off, with a wrong late digest
 * (caught, naming the piece) and with digests that never come (the pull
 * fails naming the trainer rank). Correctness only: nothing here is
 * timed. */
#include "bench/colocated.h"
#include "bench/qwen7b.h"
#include "tests/test.h"

#define STEPS 3

static int ngpu;
static wsync_manifest_t *model;
static char *model_json;

static void route(int packed, int ranks, int in_place, int zero_copy)
{
    colo_cfg_t c = {.m = model,
                    .manifest_json = model_json,
                    .ranks = ranks,
                    .packed = packed,
                    .in_place = in_place,
                    .zero_copy = zero_copy,
                    .versions = STEPS,
                    .check = 1};
    double times[STEPS];
    char why[1024];
    if (colo_run(&c, times, why, sizeof(why)) != 0) {
        fprintf(stderr, "  %s, %d engine rank(s)%s%s: %s\n", packed ? "packed IPC" : "wsync", ranks,
                packed     ? ""
                : in_place ? ", in place"
                           : ", staged",
                packed      ? ""
                : zero_copy ? ", single-copy"
                            : ", slot",
                why);
        CHECK(0);
    }
}

#define ROUTE_TEST(name, packed, ranks, in_place, zero_copy) \
    static void name(void)                                   \
    {                                                        \
        if (ngpu == 0)                                       \
            SKIP("no CUDA device");                          \
        route(packed, ranks, in_place, zero_copy);           \
    }

ROUTE_TEST(test_single_copy_staged_1_rank, 0, 1, 0, 1)
ROUTE_TEST(test_single_copy_in_place_1_rank, 0, 1, 1, 1)
ROUTE_TEST(test_slot_staged_1_rank, 0, 1, 0, 0)
ROUTE_TEST(test_slot_in_place_1_rank, 0, 1, 1, 0)
ROUTE_TEST(test_single_copy_staged_2_ranks, 0, 2, 0, 1)
ROUTE_TEST(test_single_copy_in_place_2_ranks, 0, 2, 1, 1)
ROUTE_TEST(test_slot_staged_2_ranks, 0, 2, 0, 0)
ROUTE_TEST(test_slot_in_place_2_ranks, 0, 2, 1, 0)
ROUTE_TEST(test_packed_ipc_1_rank, 1, 1, 0, 0)
ROUTE_TEST(test_packed_ipc_2_ranks, 1, 2, 0, 0)

/* One rank lands each chunk and the other copies it out of its window (the
 * fan-out job with the fused digest, both ranks on one GPU). */
static void test_land_and_fan_out_2_ranks(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    setenv("WSYNC_GPU_SHARED_LANDING", "0", 1);
    route(0, 2, 0, 1);
    route(0, 2, 1, 0);
    unsetenv("WSYNC_GPU_SHARED_LANDING");
}

static void test_corrupt_byte_caught_by_fused_landing(void)
{
    colo_cfg_t c = {.m = model, .manifest_json = model_json, .ranks = 1, .versions = 1};
    double times[1];
    char why[1024] = "";
    int rc;
    if (ngpu == 0)
        SKIP("no CUDA device");
    setenv("WSYNC_TEST_CORRUPT_PIECE", "0", 1); /* read by the trainer process forked below */
    rc = colo_run(&c, times, why, sizeof(why));
    unsetenv("WSYNC_TEST_CORRUPT_PIECE");
    CHECK(rc != 0);
    if (strstr(why, "piece 0") == NULL || strstr(why, "failed verification") == NULL) {
        fprintf(stderr, "  expected piece 0 to fail verification, got: %s\n", why);
        CHECK(0);
    }
}

/* The digests 200 ms after the announce: every chunk lands (and, with
 * land + fan-out, is copied to the other rank) and waits for them. */
static void test_single_copy_digests_after_landing(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    setenv("WSYNC_TEST_DIGEST_DELAY_MS", "200", 1);
    route(0, 1, 0, 1);
    route(0, 2, 1, 1);
    setenv("WSYNC_GPU_SHARED_LANDING", "0", 1);
    route(0, 2, 0, 1);
    unsetenv("WSYNC_GPU_SHARED_LANDING");
    unsetenv("WSYNC_TEST_DIGEST_DELAY_MS");
}

static void test_single_copy_late_digests_off(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    setenv("WSYNC_LATE_DIGESTS", "off", 1);
    route(0, 1, 0, 1);
    route(0, 1, 1, 1);
    setenv("WSYNC_LATE_DIGESTS", "on", 1);
}

/* One single-copy step with test hook `hook`=`value` and a 3 s pull
 * timeout: it must fail with a message holding `a` and `b`. */
static void late_fault(const char *hook, const char *value, const char *a, const char *b)
{
    colo_cfg_t c =
        {.m = model, .manifest_json = model_json, .ranks = 1, .zero_copy = 1, .versions = 1, .timeout_ms = 3000};
    double times[1];
    char why[1024] = "";
    int rc;
    setenv(hook, value, 1); /* read by the trainer process forked below */
    rc = colo_run(&c, times, why, sizeof(why));
    unsetenv(hook);
    CHECK(rc != 0);
    if (strstr(why, a) == NULL || strstr(why, b) == NULL) {
        fprintf(stderr, "  expected '%s' and '%s', got: %s\n", a, b, why);
        CHECK(0);
    }
}

static void test_wrong_late_digest_caught(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    late_fault("WSYNC_TEST_BAD_DIGEST", "0", "piece 0 (bytes", "failed verification"); /* one chunk: one piece */
}

static void test_late_digests_never_sent(void)
{
    if (ngpu == 0)
        SKIP("no CUDA device");
    late_fault("WSYNC_TEST_NO_DIGESTS", "1", "late digests of trainer rank 0", "never came");
}

int main(void)
{
    json_t *mj = NULL;
    alarm(600);
    ngpu = colo_gpu_count();
    /* the Qwen2.5-7B tensor list at 1/16 of every size: 339 tensors, ~60 MB */
    if (qwen7b_manifest_scaled(16, &model) != WSYNC_OK || wsync_manifest_to_json(model, &mj) != WSYNC_OK ||
        (model_json = json_dumps(mj, JSON_COMPACT)) == NULL) {
        fprintf(stderr, "colocated_test: manifest: %s\n", wsync_last_error());
        return 1;
    }
    /* this ~60 MB model is below late_digests=auto's share: on, so the
     * single-copy routes below run with late digests */
    setenv("WSYNC_LATE_DIGESTS", "on", 1);
    RUN(test_single_copy_staged_1_rank);
    RUN(test_single_copy_in_place_1_rank);
    RUN(test_slot_staged_1_rank);
    RUN(test_slot_in_place_1_rank);
    RUN(test_single_copy_staged_2_ranks);
    RUN(test_single_copy_in_place_2_ranks);
    RUN(test_slot_staged_2_ranks);
    RUN(test_slot_in_place_2_ranks);
    RUN(test_packed_ipc_1_rank);
    RUN(test_packed_ipc_2_ranks);
    RUN(test_land_and_fan_out_2_ranks);
    RUN(test_corrupt_byte_caught_by_fused_landing);
    RUN(test_single_copy_digests_after_landing);
    RUN(test_single_copy_late_digests_off);
    RUN(test_wrong_late_digest_caught);
    RUN(test_late_digests_never_sent);
    free(model_json);
    json_decref(mj);
    wsync_manifest_free(model);
    TEST_EXIT();
}
