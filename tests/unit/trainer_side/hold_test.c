/* hold_test.c: wsync_publisher_wait_held (trainer_side/hold.c) waits for the
 * engine nodes of its host without reading the control endpoint every 1 ms
 * (issue 25 item 13): it looks when a pull served here ends, backing off
 * while nothing happens. A node that never pulls: a 1.5 s wait costs tens of
 * GET /v1/status, not a thousand. A node that pulls: wait_held still returns
 * right after its pull. One process: the control endpoint, a publisher (1
 * rank, single copy) and a receiver over tcp on loopback. A pull still in
 * flight once the nodes hold the version is waited for on the publisher's
 * condition variable, not by looking every 1 ms (issue 26 item 5). */
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/control/client.h"
#include "common/model/manifest.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "tests/unit/rig.h"
#include "common/control/control_server.h"
#include "trainer_side/publisher_internal.h"
#include "trainer_side/wsync_publisher.h"

#define IMAGE (1u << 20)
#define CHUNK (256u << 10)

typedef test_rig_t rig_t;

/* Timed waits on `counted_cond` by `counted_thread`, counted: this
 * definition takes the place of libc's for the library linked into this
 * test, and hands each call on to libc's. */
static pthread_cond_t *counted_cond;
static pthread_t counted_thread;
static int timed_waits;

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts)
{
    static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (real == NULL)
        real = (int (*)(pthread_cond_t *, pthread_mutex_t *,
                        const struct timespec *))dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
    if (c == __atomic_load_n(&counted_cond, __ATOMIC_ACQUIRE) && pthread_equal(pthread_self(), counted_thread))
        __atomic_add_fetch(&timed_waits, 1, __ATOMIC_RELAXED);
    return real(c, m, ts);
}

/* One trainer rank serving zero-copy; engines register from its host
 * (g->host_id) themselves. */
static int rig_ok(rig_t *g)
{
    const test_rig_opts_t o = {.name = "holdtest", .image = IMAGE, .chunk = CHUNK, .zero_copy = 1, .fill_version = 1};
    return test_rig_ok(g, &o);
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    char *buf = arg;
    size_t have = strlen(buf), add = size * n;
    if (have + add < 65536) {
        memcpy(buf + have, data, add);
        buf[have + add] = '\0';
    }
    return add;
}

/* GET /v1/status answers counted by the endpoint's /metrics. */
static long status_gets(const rig_t *g)
{
    static char buf[65536];
    char url[256];
    const char *at;
    CURL *h = curl_easy_init();
    buf[0] = '\0';
    snprintf(url, sizeof(url), "%s/metrics", wsync_control_server_url(g->server));
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, buf);
    curl_easy_perform(h);
    curl_easy_cleanup(h);
    at = strstr(buf, "wsync_http_requests_total{route=\"/v1/status\",code=\"200\"} ");
    return at ? atol(strchr(at, '}') + 2) : 0;
}

/* An engine node registered from this host that never pulls: wait_held
 * waits its whole timeout, looking at the states a few dozen times. */
static void test_wait_held_does_not_poll_every_ms(void)
{
    rig_t g;
    wsync_control_t *c = NULL;
    json_t *ep = NULL;
    double t0, took;
    long before, looks;
    if (!rig_ok(&g))
        goto out;
    ep = json_pack("{s:s}", "host_id", g.host_id);
    CHECK_OK(wsync_control_open(wsync_control_server_url(g.server), NULL, &c));
    CHECK_OK(wsync_control_register_engine(c, "idle-node", "localhost", 1, ep));
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    before = status_gets(&g);
    t0 = wsync_now_s();
    CHECK_FAILS(wsync_publisher_wait_held(g.pub, 1, 1500), WSYNC_ERR_TIMEOUT, "engine idle-node");
    took = wsync_now_s() - t0;
    looks = status_gets(&g) - before;
    fprintf(stderr, "  wait_held(1500 ms) took %.2f s, %ld status looks\n", took, looks);
    CHECK(took >= 1.4);
    CHECK(looks >= 2 && looks <= 100); /* 1 ms polling: ~1,000 (fewer on a loaded host, hundreds still) */
out:
    json_decref(ep);
    wsync_control_close(c);
    test_rig_down(&g);
}

typedef struct pull_job {
    wsync_receiver_t *recv;
    wsync_status_t st;
    double t_done;
} pull_job_t;

static void *pull_main(void *arg)
{
    pull_job_t *j = arg;
    j->st = wsync_receiver_pull(j->recv, 1, 20000, NULL);
    j->t_done = wsync_now_s();
    return NULL;
}

/* A node on this host pulls the version: wait_held returns soon after its
 * pull does (woken by the pull's end, not a timer). */
static void test_wait_held_returns_once_the_node_holds_it(void)
{
    rig_t g;
    wsync_receiver_t *r = NULL;
    wsync_receiver_config_t rc = {.engine_id = "hold-node",
                                  .local_rank = 0,
                                  .local_world = 1,
                                  .mode = WSYNC_MODE_STAGED,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1"};
    pull_job_t j = {0};
    pthread_t th;
    double t_held;
    if (!rig_ok(&g))
        goto out;
    rc.control_url = wsync_control_server_url(g.server);
    rc.host_id = g.host_id;
    CHECK_OK(wsync_receiver_create(&rc, &r));
    if (r == NULL)
        goto out;
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    j.recv = r;
    CHECK(pthread_create(&th, NULL, pull_main, &j) == 0);
    CHECK_OK(wsync_publisher_wait_held(g.pub, 1, 20000));
    t_held = wsync_now_s();
    pthread_join(th, NULL);
    CHECK_OK(j.st);
    fprintf(stderr, "  wait_held returned %.3f s after the pull did\n", t_held - j.t_done);
    CHECK(t_held - j.t_done < 2.0);
out:
    wsync_receiver_destroy(r);
    test_rig_down(&g);
}

typedef struct unpin_job {
    wsync_publisher_t *pub;
    int ms;
} unpin_job_t;

/* A pull of the direct slot that ends `ms` after it started: unpinned as
 * pull_server.c does (p->lock, pins--, broadcast). */
static void *unpin_main(void *arg)
{
    unpin_job_t *j = arg;
    usleep((useconds_t)j->ms * 1000);
    pthread_mutex_lock(&j->pub->lock);
    j->pub->slots.slot[PUB_DIRECT].pins--;
    j->pub->serving.pulls_ended++;
    pthread_cond_broadcast(&j->pub->cond);
    pthread_mutex_unlock(&j->pub->lock);
    return NULL;
}

/* No engine node on this host (so every node holds it at the first look),
 * one pull in flight for 400 ms: wait_held returns once it ends, having
 * slept on p->cond a few times (20 ms slices: ~20), not ~400 times. */
static void test_wait_held_sleeps_until_the_pull_ends(void)
{
    rig_t g;
    unpin_job_t j;
    pthread_t th;
    int waits;
    if (!rig_ok(&g)) {
        fprintf(stderr, "  set-up: %s\n", wsync_last_error());
        CHECK(!"set-up");
        goto out;
    }
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    pthread_mutex_lock(&g.pub->lock);
    g.pub->slots.slot[PUB_DIRECT].pins++;
    pthread_mutex_unlock(&g.pub->lock);
    j = (unpin_job_t){.pub = g.pub, .ms = 400};
    counted_thread = pthread_self();
    __atomic_store_n(&counted_cond, &g.pub->cond, __ATOMIC_RELEASE);
    CHECK(pthread_create(&th, NULL, unpin_main, &j) == 0);
    CHECK_OK(wsync_publisher_wait_held(g.pub, 1, 20000));
    __atomic_store_n(&counted_cond, NULL, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    waits = __atomic_load_n(&timed_waits, __ATOMIC_RELAXED);
    fprintf(stderr, "  wait_held slept %d times on the publisher's condition during a 400 ms pull\n", waits);
    CHECK(g.pub->slots.slot[PUB_DIRECT].pins == 0);
    CHECK(waits >= 1 && waits <= 60); /* 1 ms slices: up to 400 (fewer on a loaded host, >100 still) */
out:
    test_rig_down(&g);
}

int main(void)
{
    RUN(test_wait_held_does_not_poll_every_ms);
    RUN(test_wait_held_returns_once_the_node_holds_it);
    RUN(test_wait_held_sleeps_until_the_pull_ends);
    TEST_EXIT();
}
