/* reporter.c: queued engine reports, sent in order by one thread with the
 * control client's retries (see reporter.h). */
#include "engine_side/reporter.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checks.h"
#include "common/control_client.h"
#include "common/util.h"

#define REPORTER_QUEUE 32
/* One delivery round's grace: short, so stop() is not held up by an endpoint
 * that is away; the thread keeps trying rounds until it is back. */
#define REPORTER_ROUND_MS 2000

typedef struct report {
    uint64_t version;
    char state[16];
    double duration_s;
    uint64_t bytes;
    char error[512];
    int has_error;
} report_t;

struct recv_reporter {
    wsync_control_t *control; /* the thread's own (a client is per thread) */
    char *engine_id, *host;
    int local_ranks;
    json_t *endpoint; /* registered with the node (host_id): sent again when re-registering */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    report_t q[REPORTER_QUEUE]; /* oldest first */
    int n;
    int busy; /* the thread is sending q[0] */
    int stopping;
    pthread_t thread;
    int started;
};

/* Sends one report; 0 when it is done with (delivered, or refused for good). */
static int deliver(recv_reporter_t *rp, const report_t *rep)
{
    wsync_status_t st = wsync_control_report(rp->control, rp->engine_id, rep->version, rep->state, rep->duration_s,
                                             rep->bytes, rep->has_error ? rep->error : NULL);
    if (st == WSYNC_ERR_NOT_FOUND) {
        LOG_WARN("engine %s: the control endpoint does not know this node (restarted without its state?): "
                 "registering again",
                 rp->engine_id);
        st = wsync_control_register_engine(rp->control, rp->engine_id, rp->host, rp->local_ranks, rp->endpoint);
        if (st == WSYNC_OK)
            st = wsync_control_report(rp->control, rp->engine_id, rep->version, rep->state, rep->duration_s,
                                      rep->bytes, rep->has_error ? rep->error : NULL);
    }
    if (st == WSYNC_OK)
        return 0;
    if (st == WSYNC_ERR_HTTP || st == WSYNC_ERR_TIMEOUT || st == WSYNC_ERR_NOT_FOUND)
        return 1; /* away (or 5xx): keep it, try again */
    LOG_WARN("engine %s: report '%s' of version %llu refused: %s", rp->engine_id, rep->state,
             (unsigned long long)rep->version, wsync_last_error());
    return 0;
}

static void *reporter_main(void *arg)
{
    recv_reporter_t *rp = arg;
    pthread_mutex_lock(&rp->lock);
    for (;;) {
        report_t rep;
        int again;
        while (rp->n == 0 && !rp->stopping)
            pthread_cond_wait(&rp->cond, &rp->lock);
        if (rp->n == 0 || rp->stopping)
            break;
        rep = rp->q[0];
        rp->busy = 1;
        pthread_mutex_unlock(&rp->lock);
        again = deliver(rp, &rep);
        pthread_mutex_lock(&rp->lock);
        rp->busy = 0;
        if (!again) /* q[0] is still `rep`: post() never drops the one being sent */
            memmove(&rp->q[0], &rp->q[1], (size_t)--rp->n * sizeof(rp->q[0]));
        pthread_cond_broadcast(&rp->cond);
        if (again && !rp->stopping) { /* endpoint away: next round soon */
            struct timespec ts;
            wsync_abstime_after_ms(&ts, 200);
            pthread_cond_timedwait(&rp->cond, &rp->lock, &ts);
        }
        if (again && rp->stopping)
            break;
    }
    pthread_mutex_unlock(&rp->lock);
    return NULL;
}

wsync_status_t reporter_start(const char *url, const char *token, const char *engine_id, const char *host,
                              int local_ranks, const json_t *endpoint, recv_reporter_t **out)
{
    recv_reporter_t *rp = calloc(1, sizeof(*rp));
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(rp);
    pthread_mutex_init(&rp->lock, NULL);
    pthread_cond_init(&rp->cond, NULL);
    rp->engine_id = strdup(engine_id);
    rp->host = strdup(host);
    rp->local_ranks = local_ranks;
    rp->endpoint = endpoint ? json_deep_copy(endpoint) : NULL;
    if (rp->engine_id == NULL || rp->host == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "engine %s: out of memory", engine_id);
        goto err;
    }
    WSYNC_CHECK_GOTO(wsync_control_open(url, token, &rp->control), st, err);
    if (wsync_control_grace_ms(rp->control) > REPORTER_ROUND_MS)
        wsync_control_set_grace(rp->control, REPORTER_ROUND_MS);
    if (pthread_create(&rp->thread, NULL, reporter_main, rp) != 0) {
        st = wsync_error(WSYNC_ERR_IO, "engine %s: cannot start the report thread", engine_id);
        goto err;
    }
    rp->started = 1;
    *out = rp;
    return WSYNC_OK;
err:
    reporter_stop(rp, 0);
    return st;
}

void reporter_post(recv_reporter_t *rp, uint64_t version, const char *state, double duration_s, uint64_t bytes,
                   const char *error)
{
    report_t *rep;
    pthread_mutex_lock(&rp->lock);
    if (rp->n == REPORTER_QUEUE) {
        int drop = rp->busy ? 1 : 0;
        LOG_WARN("engine %s: %d reports waiting for the control endpoint; dropping the oldest", rp->engine_id,
                 REPORTER_QUEUE);
        memmove(&rp->q[drop], &rp->q[drop + 1], (size_t)(rp->n - drop - 1) * sizeof(rp->q[0]));
        rp->n--;
    }
    rep = &rp->q[rp->n];
    memset(rep, 0, sizeof(*rep));
    rep->version = version;
    snprintf(rep->state, sizeof(rep->state), "%s", state);
    rep->duration_s = duration_s;
    rep->bytes = bytes;
    if (error) {
        snprintf(rep->error, sizeof(rep->error), "%s", error);
        rep->has_error = 1;
    }
    rp->n++;
    pthread_cond_broadcast(&rp->cond);
    pthread_mutex_unlock(&rp->lock);
}

void reporter_stop(recv_reporter_t *rp, int flush_ms)
{
    if (rp == NULL)
        return;
    if (rp->started) {
        uint64_t end = wsync_now_ns() + (uint64_t)(flush_ms > 0 ? flush_ms : 0) * 1000000ULL;
        pthread_mutex_lock(&rp->lock);
        while ((rp->n > 0 || rp->busy) && wsync_now_ns() < end) {
            struct timespec ts;
            wsync_abstime_after_ms(&ts, 20);
            pthread_cond_timedwait(&rp->cond, &rp->lock, &ts);
        }
        if (rp->n > 0)
            LOG_WARN("engine %s: %d reports not delivered to the control endpoint", rp->engine_id, rp->n);
        rp->stopping = 1;
        pthread_cond_broadcast(&rp->cond);
        pthread_mutex_unlock(&rp->lock);
        pthread_join(rp->thread, NULL);
    }
    wsync_control_close(rp->control);
    free(rp->engine_id);
    free(rp->host);
    json_decref(rp->endpoint);
    pthread_mutex_destroy(&rp->lock);
    pthread_cond_destroy(&rp->cond);
    free(rp);
}
