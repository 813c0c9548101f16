/* progress.c: a pull's phase and bytes, and the reporter thread (see
 * progress.h). */
#include "engine_side/progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/control/client.h"
#include "common/base/util.h"
#include "engine_side/receiver_internal.h"

#define REPORT_EVERY_MS 1000

struct recv_progress {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    recv_phase_t phase;
    uint64_t version, done, total, since_ns;
    double setup_s;
    int stop;
    pthread_t th;
    int th_started;
    wsync_control_t *control; /* the reporter's own client */
    char *engine_id;
};

static const char *phase_name(recv_phase_t ph)
{
    return ph == RECV_PHASE_SETUP ? "setup" : ph == RECV_PHASE_LANDING ? "landing" : "idle";
}

static void *reporter_main(void *arg)
{
    recv_progress_t *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, REPORT_EVERY_MS);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        if (!p->stop && p->phase != RECV_PHASE_IDLE && wsync_now_ns() - p->since_ns >= 1000000000ULL) {
            recv_phase_t ph = p->phase;
            uint64_t v = p->version, done = p->done, total = p->total;
            pthread_mutex_unlock(&p->lock);
            /* Best effort: a missed note is replaced a second later. */
            wsync_control_report_progress(p->control, p->engine_id, v, phase_name(ph), done, total);
            pthread_mutex_lock(&p->lock);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

recv_progress_t *recv_progress_open(const char *control_url, const char *token, const char *engine_id, int report)
{
    recv_progress_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (report && (p->engine_id = strdup(engine_id)) != NULL &&
        wsync_control_open(control_url, token, &p->control) == WSYNC_OK &&
        pthread_create(&p->th, NULL, reporter_main, p) == 0)
        p->th_started = 1;
    return p;
}

void recv_progress_close(recv_progress_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (p->th_started)
        pthread_join(p->th, NULL);
    wsync_control_close(p->control);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->engine_id);
    free(p);
}

void recv_progress_phase(recv_progress_t *p, recv_phase_t phase, uint64_t version, uint64_t total)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->phase = phase;
    p->version = version;
    p->done = 0;
    p->total = total;
    p->since_ns = wsync_now_ns();
    pthread_mutex_unlock(&p->lock);
}

void recv_progress_bytes(recv_progress_t *p, uint64_t done)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = done;
    pthread_mutex_unlock(&p->lock);
}

void recv_progress_setup_took(recv_progress_t *p, double secs)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->setup_s = secs;
    pthread_mutex_unlock(&p->lock);
}

void wsync_receiver_progress(const wsync_receiver_t *r, wsync_pull_progress_t *out)
{
    recv_progress_t *p = r ? r->run.progress : NULL;
    memset(out, 0, sizeof(*out));
    out->phase = "idle";
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    out->phase = phase_name(p->phase);
    out->version = p->version;
    out->done = p->done;
    out->total = p->total;
    out->elapsed_s = p->phase == RECV_PHASE_IDLE ? 0 : (double)(wsync_now_ns() - p->since_ns) / 1e9;
    out->last_setup_s = p->setup_s;
    pthread_mutex_unlock(&p->lock);
}
