/* heartbeat.c: the trainer rank's heartbeat thread (see heartbeat.h). */
#include "trainer_side/heartbeat.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/control/client.h"
#include "common/base/settings.h"
#include "common/base/util.h"

#define HEARTBEAT_TRY_MS 2000

struct pub_heartbeat {
    wsync_control_t *control; /* the thread's own */
    char *path;
    json_t *body;
    long period_ms;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stopping;
    pthread_t thread;
};

static void *heartbeat_main(void *arg)
{
    pub_heartbeat_t *hb = arg;
    pthread_mutex_lock(&hb->lock);
    while (!hb->stopping) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, (int)hb->period_ms);
        pthread_cond_timedwait(&hb->cond, &hb->lock, &ts);
        if (hb->stopping)
            break;
        pthread_mutex_unlock(&hb->lock);
        wsync_control_request(hb->control, "POST", hb->path, hb->body, HEARTBEAT_TRY_MS, &(long){0}, NULL);
        pthread_mutex_lock(&hb->lock);
    }
    pthread_mutex_unlock(&hb->lock);
    return NULL;
}

/* What start set up, in reverse (the thread already joined or never started). */
static void heartbeat_free(pub_heartbeat_t *hb)
{
    wsync_control_close(hb->control);
    free(hb->path);
    json_decref(hb->body);
    pthread_mutex_destroy(&hb->lock);
    pthread_cond_destroy(&hb->cond);
    free(hb);
}

wsync_status_t pub_heartbeat_start(const char *url, const char *token, const char *path, const json_t *body,
                                   pub_heartbeat_t **out)
{
    long period = (long)wsync_setting_int(WSYNC_SET_HEARTBEAT_MS);
    pub_heartbeat_t *hb;
    wsync_status_t st;
    *out = NULL;
    if (period <= 0)
        return WSYNC_OK;
    hb = calloc(1, sizeof(*hb));
    WSYNC_CHECK_ALLOC(hb);
    hb->period_ms = period;
    hb->path = strdup(path);
    hb->body = json_deep_copy(body);
    pthread_mutex_init(&hb->lock, NULL);
    pthread_cond_init(&hb->cond, NULL);
    if (hb->path == NULL || hb->body == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "heartbeat: out of memory");
        goto err;
    }
    WSYNC_CHECK_GOTO(wsync_control_open(url, token, &hb->control), st, err);
    if (pthread_create(&hb->thread, NULL, heartbeat_main, hb) != 0) {
        st = wsync_error(WSYNC_ERR_IO, "cannot start the heartbeat thread");
        goto err;
    }
    *out = hb;
    return WSYNC_OK;
err:
    heartbeat_free(hb);
    return st;
}

void pub_heartbeat_stop(pub_heartbeat_t *hb)
{
    if (hb == NULL)
        return;
    pthread_mutex_lock(&hb->lock);
    hb->stopping = 1;
    pthread_cond_broadcast(&hb->cond);
    pthread_mutex_unlock(&hb->lock);
    pthread_join(hb->thread, NULL);
    heartbeat_free(hb);
}
