/* pull_future_test.c: wsync_receiver_pull(v) for a version not published yet
 * waits for it, up to the timeout (an engine started before its trainers);
 * one older than the oldest retained fails at once, saying which versions
 * are retained (issue 25 item 12). One process: the control endpoint, a
 * publisher (1 rank) and a receiver (1 local rank) over tcp on loopback. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "tests/unit/rig.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#define IMAGE (1u << 20)
#define CHUNK (256u << 10)

typedef test_rig_t rig_t;

static int rig_ok(rig_t *g)
{
    const test_rig_opts_t o = {.name = "futuretest", .image = IMAGE, .chunk = CHUNK, .receiver = 1};
    return test_rig_ok(g, &o);
}

static wsync_status_t publish(rig_t *g, uint64_t v)
{
    wsync_fill_pattern(g->src, g->size, 0, v);
    return wsync_publisher_publish(g->pub, v);
}

typedef struct pull_job {
    wsync_receiver_t *recv;
    uint64_t want, got;
    int timeout_ms;
    wsync_status_t st;
    double t_done;
    char error[512];
} pull_job_t;

static void *pull_main(void *arg)
{
    pull_job_t *j = arg;
    j->st = wsync_receiver_pull(j->recv, j->want, j->timeout_ms, &j->got);
    j->t_done = wsync_now_s();
    snprintf(j->error, sizeof(j->error), "%s", j->st == WSYNC_OK ? "" : wsync_last_error());
    return NULL;
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

/* pull(2) before anything is published: it waits; versions 1 and 2 come
 * 0.5 s later, and it returns version 2 (not 1, and not an error at once). */
static void test_pull_of_unpublished_version_waits_for_it(void)
{
    rig_t g;
    pull_job_t j = {.want = 2, .timeout_ms = 20000};
    pthread_t th;
    double t0;
    if (!rig_ok(&g))
        goto out;
    j.recv = g.recv;
    t0 = wsync_now_s();
    CHECK(pthread_create(&th, NULL, pull_main, &j) == 0);
    usleep(500000);
    CHECK_OK(publish(&g, 1));
    usleep(100000);
    CHECK_OK(publish(&g, 2));
    pthread_join(th, NULL);
    if (j.st != WSYNC_OK)
        fprintf(stderr, "  pull(2): %s\n", j.error);
    CHECK_OK(j.st);
    CHECK_EQ(j.got, 2);
    CHECK(j.t_done - t0 >= 0.5);
    CHECK(holds(&g, 2));
    /* the next one, named while the engine holds 2 */
    j = (pull_job_t){.recv = g.recv, .want = 3, .timeout_ms = 20000};
    CHECK(pthread_create(&th, NULL, pull_main, &j) == 0);
    usleep(300000);
    CHECK_OK(publish(&g, 3));
    pthread_join(th, NULL);
    CHECK_OK(j.st);
    CHECK_EQ(j.got, 3);
    CHECK(holds(&g, 3));
out:
    test_rig_down(&g);
}

/* pull(5) when 5 never comes: a timeout naming the version, after the
 * timeout (not at once). */
static void test_pull_of_unpublished_version_times_out(void)
{
    rig_t g;
    double t0;
    uint64_t got = 0;
    if (!rig_ok(&g))
        goto out;
    CHECK_OK(publish(&g, 1));
    t0 = wsync_now_s();
    CHECK_FAILS(wsync_receiver_pull(g.recv, 5, 800, &got), WSYNC_ERR_TIMEOUT, "version 5 was not published");
    CHECK(wsync_now_s() - t0 >= 0.7);
    CHECK_EQ(wsync_receiver_version(g.recv), 0);
out:
    test_rig_down(&g);
}

/* Ten versions published, the endpoint keeps the last eight: pull(1) fails
 * at once naming the retained ones; pull(10) works. */
static void test_pull_of_version_no_longer_retained_fails_at_once(void)
{
    rig_t g;
    uint64_t v, got = 0;
    double t0;
    if (!rig_ok(&g))
        goto out;
    for (v = 1; v <= 10; v++)
        CHECK_OK(publish(&g, v));
    t0 = wsync_now_s();
    CHECK_FAILS(wsync_receiver_pull(g.recv, 1, 20000, &got), WSYNC_ERR_NOT_FOUND,
                "version 1 is no longer retained: the endpoint keeps versions 3 to 10");
    CHECK(wsync_now_s() - t0 < 5.0);
    CHECK_OK(wsync_receiver_pull(g.recv, 10, 20000, &got));
    CHECK_EQ(got, 10);
    CHECK(holds(&g, 10));
out:
    test_rig_down(&g);
}

int main(void)
{
    RUN(test_pull_of_unpublished_version_waits_for_it);
    RUN(test_pull_of_unpublished_version_times_out);
    RUN(test_pull_of_version_no_longer_retained_fails_at_once);
    TEST_EXIT();
}
