/* fault.c: the table of test-only fault hooks (see fault.h). */
#include "common/base/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/checks.h"

static const wsync_fault_def_t table[WSYNC_FAULT_COUNT] = {
    [WSYNC_FAULT_CORRUPT_PIECE] = {"WSYNC_TEST_CORRUPT_PIECE", -1, -1, 0x7fffffff,
                                   "trainer flips one byte of piece N after digesting it (engines must refuse "
                                   "it)"},
    [WSYNC_FAULT_COPY_FAIL_PIECE] = {"WSYNC_TEST_COPY_FAIL_PIECE", -1, -1, 0x7fffffff,
                                     "trainer's snapshot copy of piece N fails"},
    [WSYNC_FAULT_COPY_DELAY_MS] = {"WSYNC_TEST_COPY_DELAY_MS", 0, 0, 600000,
                                   "trainer sleeps N ms before each snapshot copy"},
    [WSYNC_FAULT_SERVE_DELAY_MS] = {"WSYNC_TEST_SERVE_DELAY_MS", 0, 0, 600000,
                                    "trainer holds each pull request N ms"},
    [WSYNC_FAULT_LAND_DELAY_MS] = {"WSYNC_TEST_LAND_DELAY_MS", 0, 0, 600000,
                                   "engine waits N ms before landing each chunk"},
    [WSYNC_FAULT_CORRUPT_PACKED] = {"WSYNC_TEST_CORRUPT_PACKED", 0, 0, 1,
                                    "with 1, trainer flips one byte of the first packed column slice of each "
                                    "target request, after its digests were taken (engines must refuse it)"},
    [WSYNC_FAULT_SETUP_DELAY_MS] = {"WSYNC_TEST_SETUP_DELAY_MS", 0, 0, 600000,
                                    "engine's first-pull image set-up takes N ms longer (a slow reserve)"},
    [WSYNC_FAULT_RECV_STALL_MS] = {"WSYNC_TEST_RECV_STALL_MS", 0, 0, 600000,
                                   "engine's tcp receiver reads nothing for N ms after its first put (once)"},
    [WSYNC_FAULT_NO_DIGESTS] = {"WSYNC_TEST_NO_DIGESTS", 0, 0, 1,
                                "with 1, trainer announces a late-digest version and never posts its digests "
                                "(as if it died after announcing)"},
    [WSYNC_FAULT_BAD_DIGEST] = {"WSYNC_TEST_BAD_DIGEST", -1, -1, 0x7fffffff,
                                "trainer posts a wrong late digest for piece N (engines must refuse it)"},
    [WSYNC_FAULT_DIGEST_DELAY_MS] = {"WSYNC_TEST_DIGEST_DELAY_MS", 0, 0, 600000,
                                     "trainer waits N ms before posting the digests of a late-digest version "
                                     "(engines land first)"},
    [WSYNC_FAULT_HOST_FAN_WINDOW] = {"WSYNC_TEST_HOST_FAN_WINDOW", 0, 0, 1,
                                     "1: in place into host tensors with a target, take the sparse GPU image's "
                                     "path (every destination byte lands or is copied straight, fan-out windows) "
                                     "on a whole shm image, so CPU tests cover it"},
    [WSYNC_FAULT_CORRUPT_HELD] = {"WSYNC_TEST_CORRUPT_HELD", -1, -1, 0x7fffffff,
                                  "engine rank landing piece N (a node of targets: put N of its node plan) "
                                  "flips one byte of it in the version it holds, once, before its first pull "
                                  "that asks for deltas (the delta base is then wrong)"},
    [WSYNC_FAULT_CORRUPT_WIRE] = {"WSYNC_TEST_CORRUPT_WIRE", -1, -1, 0x7fffffff,
                                  "trainer (or relay) breaks the magic of piece N's delta wire in every request "
                                  "it sends it (engines must refuse the wire and fetch the piece in full)"},
    [WSYNC_FAULT_AMAX_REFUSE] = {"WSYNC_TEST_AMAX_REFUSE", -1, -1, 4095,
                                 "trainer rank N refuses its peers' requests for the FP8 block maxima of the "
                                 "bands "
                                 "they share (their pulls must fail naming rank N)"},
    [WSYNC_FAULT_TDIG_DELAY_MS] = {"WSYNC_TEST_TDIG_DELAY_MS", 0, 0, 600000,
                                   "trainer's digest of a target's puts (or segments) for a pull takes N ms "
                                   "longer (its other pulls must not wait for it to start their puts)"},
    [WSYNC_FAULT_REJOIN_MS] = {"WSYNC_TEST_REJOIN_MS", 0, 0, 600000,
                               "engine local rank > 0 waits N ms, not 30 s, for local rank 0's board (at start "
                               "and when rank 0 restarted): a test of the timeout need not wait it out"},
    [WSYNC_FAULT_REFUSE_REDIRECT] = {"WSYNC_TEST_REFUSE_REDIRECT", 0, 0, 1,
                                     "with 1, the engine's tcp transport refuses redirect spans as the local "
                                     "transport refuses memory CUDA cannot export (the bytes must land in the "
                                     "image and be copied on)"},
    [WSYNC_FAULT_ONE_GPU_HINT] = {"WSYNC_TEST_ONE_GPU_HINT", 0, 0, 1,
                                  "with 1, an engine node of targets sends the landing hint of one GPU under "
                                  "it and its trainers (every rank on every trainer's GPU), also on host "
                                  "memory: each rank then lands all it holds, so CPU tests cover that plan "
                                  "(such a node, as any with a colocated hint, serves no relay children)"},
};

static long long values[WSYNC_FAULT_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static wsync_status_t init_status;
static char init_error[256];

const wsync_fault_def_t *wsync_fault_def(wsync_fault_id_t id)
{
    return (unsigned)id < WSYNC_FAULT_COUNT ? &table[id] : NULL;
}

static void init_once(void)
{
    int i;
    init_status = WSYNC_OK;
    for (i = 0; i < WSYNC_FAULT_COUNT; i++) {
        const char *s = getenv(table[i].env);
        char *end = NULL;
        long long v;
        values[i] = table[i].off;
        if (s == NULL || s[0] == '\0')
            continue;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < table[i].min || v > table[i].max) {
            init_status = WSYNC_ERR_INVALID;
            snprintf(init_error, sizeof(init_error), "test hook %s='%s': expected an integer in %lld..%lld",
                     table[i].env, s, table[i].min, table[i].max);
            continue;
        }
        values[i] = v;
    }
}

wsync_status_t wsync_faults_init(void)
{
    pthread_once(&once, init_once);
    if (init_status != WSYNC_OK)
        return wsync_error(init_status, "%s", init_error);
    return WSYNC_OK;
}

wsync_status_t wsync_faults_reload(void)
{
    pthread_once(&once, init_once);
    init_once();
    return wsync_faults_init();
}

long long wsync_fault(wsync_fault_id_t id)
{
    pthread_once(&once, init_once);
    return (unsigned)id < WSYNC_FAULT_COUNT ? values[id] : 0;
}
