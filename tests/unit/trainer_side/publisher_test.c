/* publisher_test.c: publish() announces a version before it copies it into
 * the publish slot, so an engine pulls while the copy runs; a copy that fails
 * takes the version down with a message the engine sees; a refusal names
 * the version and the engine rank that asked. One process: the
 * control endpoint, a publisher (1 rank) and a receiver (1 local rank) over
 * tcp on loopback; test hooks slow the copy (and the engine's landing). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "engine_side/requests.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "tests/unit/rig.h"
#include "common/control/control_server.h"
#include "trainer_side/publisher_internal.h"
#include "trainer_side/wsync_publisher.h"

#define IMAGE (8u << 20)
#define CHUNK (1u << 20) /* 8 pieces, all from rank 0 */
#define DELAY_MS 100     /* per piece copied (trainer) and landed (engine) */

typedef test_rig_t rig_t;

typedef struct pull_job {
    wsync_receiver_t *recv;
    wsync_status_t st;
    uint64_t got;
    double t_done;
    char error[512];
} pull_job_t;

/* A rig, or the case fails saying why. */
static int rig_ok(rig_t *g, uint64_t image, uint64_t chunk, int threads)
{
    const test_rig_opts_t o = {.name = "pubtest", .image = image, .chunk = chunk, .threads = threads, .receiver = 1};
    return test_rig_ok(g, &o);
}

static void *pull_main(void *arg)
{
    pull_job_t *j = arg;
    j->st = wsync_receiver_pull(j->recv, 0, 20000, &j->got);
    j->t_done = wsync_now_s();
    snprintf(j->error, sizeof(j->error), "%s", j->st == WSYNC_OK ? "" : wsync_last_error());
    return NULL;
}

/* The engine pulls the newest version on a thread; it is long-polling when
 * this returns. */
static void pull_start(rig_t *g, pull_job_t *j, pthread_t *th)
{
    j->recv = g->recv;
    CHECK(pthread_create(th, NULL, pull_main, j) == 0);
    usleep(200000);
}

static void pull_join(pthread_t th, pull_job_t *j)
{
    pthread_join(th, NULL);
    if (j->st != WSYNC_OK)
        fprintf(stderr, "  pull: %s\n", j->error);
}

/* The engine's image equals version v of the pattern. */
static int holds(const rig_t *g, uint64_t v)
{
    char *want = malloc(g->size), *img = NULL;
    size_t len = 0;
    int ok = want && wsync_receiver_image(g->recv, (void **)&img, &len) == WSYNC_OK && len == g->size;
    if (ok) {
        wsync_fill_pattern(want, g->size, 0, v);
        ok = memcmp(want, img, g->size) == 0;
    }
    free(want);
    return ok;
}

/* Copy and landing both take DELAY_MS per piece. Copy first, then pull (as
 * before) would leave the engine nothing verified when publish() returns;
 * announced before the copy, the engine lands each piece right after its
 * copy, so pieces are verified on the engine while publish() still copies
 * (an order of events, read from the engine's progress, not a duration). */
static void test_engine_pulls_while_publish_copies(void)
{
    rig_t g;
    pull_job_t j = {0};
    pthread_t th;
    double t0, t1;
    wsync_pull_progress_t pp = {0};
    char delay[16];

    snprintf(delay, sizeof(delay), "%d", DELAY_MS);
    setenv("WSYNC_TEST_COPY_DELAY_MS", delay, 1);
    setenv("WSYNC_TEST_LAND_DELAY_MS", delay, 1);
    wsync_settings_reload(); /* the hooks are read once, at start */
    if (!rig_ok(&g, IMAGE, CHUNK, 1))
        goto out;
    wsync_fill_pattern(g.src, g.size, 0, 1);
    pull_start(&g, &j, &th);
    t0 = wsync_now_s();
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    t1 = wsync_now_s();
    wsync_receiver_progress(g.recv, &pp);
    pull_join(th, &j);
    CHECK_EQ(j.st, WSYNC_OK);
    CHECK_EQ(j.got, 1);
    CHECK(holds(&g, 1));
    /* publish() took the 8 slow copies ... */
    CHECK(t1 - t0 >= 8 * DELAY_MS / 1000.0);
    /* ... and the engine had verified pieces of version 1 before it returned. */
    if (pp.version != 1 || pp.done == 0)
        fprintf(stderr, "  when publish() returned the engine was %s version %llu, %llu of %llu bytes verified\n",
                pp.phase, (unsigned long long)pp.version, (unsigned long long)pp.done, (unsigned long long)pp.total);
    CHECK(pp.version == 1 && pp.done > 0);
out:
    test_rig_down(&g);
    unsetenv("WSYNC_TEST_COPY_DELAY_MS");
    unsetenv("WSYNC_TEST_LAND_DELAY_MS");
    wsync_settings_reload(); /* the hooks are read once, at start */
}

/* A copy that fails after the version was announced: publish() says so, the
 * engine's pull fails naming it, and the next version goes through. */
static void test_failed_copy_withdraws_version(void)
{
    rig_t g;
    pull_job_t j = {0};
    pthread_t th;
    uint64_t got = 0;

    setenv("WSYNC_TEST_COPY_DELAY_MS", "50", 1);
    setenv("WSYNC_TEST_COPY_FAIL_PIECE", "3", 1);
    wsync_settings_reload(); /* the hooks are read once, at start */
    if (!rig_ok(&g, IMAGE, CHUNK, 1))
        goto out;
    wsync_fill_pattern(g.src, g.size, 0, 1);
    pull_start(&g, &j, &th);
    CHECK_FAILS(wsync_publisher_publish(g.pub, 1), WSYNC_ERR_IO,
                "version 1 was announced, but its copy into the publish slot failed: test hook: the copy of "
                "piece 3 failed");
    pthread_join(th, NULL);
    CHECK(j.st != WSYNC_OK);
    if (strstr(j.error, "trainer rank 0, version 1, engine pubtest-engine rank 0: ") == NULL ||
        strstr(j.error, "withdr") == NULL || strstr(j.error, "copy of piece 3 failed") == NULL) {
        fprintf(stderr, "  engine's error lacks the withdrawal: '%s'\n", j.error);
        CHECK(!"engine names the failed copy");
    }
    CHECK_EQ(wsync_receiver_version(g.recv), 0);

    unsetenv("WSYNC_TEST_COPY_FAIL_PIECE");
    wsync_settings_reload(); /* the hooks are read once, at start */
    wsync_fill_pattern(g.src, g.size, 0, 2);
    CHECK_OK(wsync_publisher_publish(g.pub, 2));
    CHECK_OK(wsync_receiver_pull(g.recv, 0, 20000, &got));
    CHECK_EQ(got, 2);
    CHECK(holds(&g, 2));
out:
    test_rig_down(&g);
    unsetenv("WSYNC_TEST_COPY_DELAY_MS");
    unsetenv("WSYNC_TEST_COPY_FAIL_PIECE");
    wsync_settings_reload(); /* the hooks are read once, at start */
}

/* Pieces bigger than a copy block, shared among 3 threads: an engine that
 * pulls during the copy holds every byte. */
static void test_big_pieces_copied_by_blocks(void)
{
    rig_t g;
    pull_job_t j = {0};
    pthread_t th;

    if (!rig_ok(&g, 40u << 20, 20u << 20, 3))
        goto out;
    wsync_fill_pattern(g.src, g.size, 0, 5);
    pull_start(&g, &j, &th);
    CHECK_OK(wsync_publisher_publish(g.pub, 5));
    pull_join(th, &j);
    CHECK_EQ(j.got, 5);
    CHECK(holds(&g, 5));
out:
    test_rig_down(&g);
}

/* Sends `q` to the rig's trainer rank as an engine rank would and returns
 * its refusal (or "" when it was served). */
static void refusal(rig_t *g, const wsync_pull_request_t *q, char *out, size_t len)
{
    recv_request_t rq = {0};
    wsync_auth_t none;
    char addr[64];
    json_t *msg = wsync_pull_request_to_json(q);
    snprintf(out, len, "no answer");
    if (msg == NULL || wsync_auth_init(&none, NULL) != WSYNC_OK)
        return;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", g->pub->serving.listen_port);
    if (recv_request_start(&rq, NULL, &none, 0, addr, msg, wsync_now_ns() + 10000000000ULL) != WSYNC_OK)
        return;
    while (!recv_request_done(&rq))
        usleep(1000);
    snprintf(out, len, "%s", rq.status == WSYNC_OK ? "" : rq.error);
    recv_request_end(&rq);
}

/* A trainer rank's refusal names it, the version, the engine rank that
 * asked and what was wrong, whole image or targets: a version it does not
 * hold, another layout, a target it does not know. */
static void test_refusals_name_the_engine_rank(void)
{
    static char targets[2][33] = {"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"};
    wsync_pull_request_t q = {.version = 9,
                              .engine = "probe-engine",
                              .local_rank = 1,
                              .local_ranks = 2,
                              .req = 77,
                              .transport = "tcp",
                              .addr = {.len = 4, .data = "addr"},
                              .key = {.len = 3, .data = "key"}};
    rig_t g;
    char err[512], want[256];
    if (!rig_ok(&g, IMAGE, CHUNK, 1))
        return;
    wsync_fill_pattern(g.src, g.size, 0, 1);
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    snprintf(q.layout_digest, sizeof(q.layout_digest), "%s", g.pub->sl->layout_digest);

    refusal(&g, &q, err, sizeof(err));
    CHECK(strstr(err, "trainer rank 0, version 9, engine probe-engine rank 1: this rank no longer holds the "
                      "version (newest: 1)") != NULL);
    q.version = 1;
    q.ntargets = 2;
    q.targets = targets;
    refusal(&g, &q, err, sizeof(err));
    snprintf(want, sizeof(want), "trainer rank 0, version 1, engine probe-engine rank 1: does not know target %s",
             targets[0]);
    CHECK(strstr(err, want) != NULL);
    q.ntargets = 0;
    q.targets = NULL;
    snprintf(q.layout_digest, sizeof(q.layout_digest), "%s", "00000000deadbeef");
    refusal(&g, &q, err, sizeof(err));
    snprintf(want, sizeof(want),
             "trainer rank 0, version 1, engine probe-engine rank 1: layout digest %s differs "
             "from the engine's 00000000deadbeef",
             g.pub->sl->layout_digest);
    CHECK(strstr(err, want) != NULL);
    if (test_case_failed_)
        fprintf(stderr, "  last refusal: '%s'\n", err);
    test_rig_down(&g);
}

int main(void)
{
    wsync_log_set_level(WSYNC_LOG_ERROR);
    RUN(test_engine_pulls_while_publish_copies);
    RUN(test_failed_copy_withdraws_version);
    RUN(test_big_pieces_copied_by_blocks);
    RUN(test_refusals_name_the_engine_rank);
    TEST_EXIT();
}
