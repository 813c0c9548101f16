/* receiver_cancel_test.c: wsync_receiver_cancel from another thread ends a
 * pull waiting for a version within a second (it waited out its whole
 * timeout before, issue 26.2), with WSYNC_ERR_CANCELLED; later pulls are
 * cancelled too until wsync_receiver_cancel_clear, after which the receiver
 * works as before. */
#include <pthread.h>
#include <unistd.h>

#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "common/control/control_server.h"

typedef struct pull_job {
    wsync_receiver_t *r;
    wsync_status_t st;
    double secs;
} pull_job_t;

static void *pull_main(void *arg)
{
    pull_job_t *j = arg;
    uint64_t got = 0, t0 = wsync_now_ns();
    j->st = wsync_receiver_pull(j->r, 0, 20000, &got);
    j->secs = (double)(wsync_now_ns() - t0) / 1e9;
    return NULL;
}

static void test_cancel_ends_a_waiting_pull(void)
{
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_control_server_t *server = NULL;
    wsync_receiver_t *r = NULL;
    pull_job_t j = {0};
    pthread_t th;
    uint64_t got = 0;
    char host_id[64];

    snprintf(host_id, sizeof(host_id), "canceltest-%d", (int)getpid());
    if (wsync_control_server_start(&sc, &server) != WSYNC_OK) {
        CHECK(!"control endpoint");
        return;
    }
    {
        wsync_receiver_config_t rc = {.control_url = wsync_control_server_url(server),
                                      .engine_id = "canceltest",
                                      .local_rank = 0,
                                      .local_world = 1,
                                      .transport = "tcp",
                                      .bind_host = "127.0.0.1",
                                      .host_id = host_id};
        CHECK_OK(wsync_receiver_create(&rc, &r));
    }
    if (r == NULL)
        goto out;
    j.r = r;
    CHECK(pthread_create(&th, NULL, pull_main, &j) == 0);
    usleep(300000); /* long-polling for a version now */
    wsync_receiver_cancel(r);
    pthread_join(th, NULL);
    CHECK_EQ(j.st, WSYNC_ERR_CANCELLED);
    CHECK(j.secs < 1.3); /* 0.3 s of waiting + well under a second */
    CHECK_FAILS(wsync_receiver_pull(r, 0, 5000, &got), WSYNC_ERR_CANCELLED, "interrupted");
    wsync_receiver_cancel_clear(r);
    CHECK_FAILS(wsync_receiver_pull(r, 0, 200, &got), WSYNC_ERR_TIMEOUT, "no version newer");
out:
    wsync_receiver_destroy(r);
    wsync_control_server_stop(server);
}

int main(void)
{
    wsync_log_set_level(WSYNC_LOG_ERROR);
    RUN(test_cancel_ends_a_waiting_pull);
    TEST_EXIT();
}
