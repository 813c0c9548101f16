/* reporter.c: queued engine reports, sent in order by one thread with the
 * control client's retries, heartbeats between them, and "exited" at the
 * end (see reporter.h). */
#include "engine_side/reporter.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/control/client.h"
#include "common/proto/engine_report.h"
#include "common/proto/relay_registration.h"
#include "common/base/settings.h"
#include "common/base/util.h"

#define REPORTER_QUEUE 32
/* One delivery round's grace: short, so stop() is not held up by an endpoint
 * that is away; the thread keeps trying rounds until it is back. */
#define REPORTER_ROUND_MS 2000
/* Heartbeat period (env WSYNC_HEARTBEAT_MS): the endpoint shows a node not
 * seen for its lease (default 30 s, three periods) as gone. */

typedef struct report {
    uint64_t version;
    char state[16];
    double duration_s;
    uint64_t bytes;
    char error[512];
    int has_error;
    int64_t holds; /* what the node holds after this report; -1: as before (ready: version) */
    int node_note; /* a note on the node's ranks (`error` is the text), not a pull report */
    int has_delta; /* ready: what came as deltas */
    wsync_report_delta_t delta;
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
    uint64_t holds;        /* what the node holds, as the endpoint was last told (thread only) */
    long heartbeat_ms;     /* 0: none */
    uint64_t next_beat_ns; /* when the next heartbeat is due */
    int refused;           /* the last heartbeat was refused (said once) */
    char note[512];        /* the last note on the node's ranks posted ("" none) */
};

/* POSTs `body` (taken) to `path`: 0 answered 2xx, 1 no answer / 5xx (try
 * again), or the HTTP code of a refusal (the message in wsync_last_error). */
static long post(recv_reporter_t *rp, const char *path, json_t *body)
{
    long http = 0;
    json_t *resp = NULL;
    wsync_status_t st;
    if (body == NULL)
        return 1;
    st = wsync_control_request_retry(rp->control, "POST", path, body, REPORTER_ROUND_MS, &http, &resp);
    json_decref(body);
    if (st != WSYNC_OK || http >= 500 || http == 429) {
        json_decref(resp);
        return 1;
    }
    if (http >= 300) {
        const char *msg = json_string_value(json_object_get(json_object_get(resp, "error"), "message"));
        wsync_error(WSYNC_ERR_HTTP, "HTTP %ld: %s", http, msg ? msg : "(no message)");
    }
    json_decref(resp);
    return http >= 300 ? http : 0;
}

/* Registers the node again, saying what it holds: a heartbeat (and the
 * re-registration after an endpoint that lost its state answered 404). */
static long beat(recv_reporter_t *rp)
{
    wsync_relay_registration_t reg = {.local_ranks = rp->local_ranks,
                                      .holds = (int64_t)rp->holds,
                                      .endpoint = rp->endpoint};
    long rc;
    snprintf(reg.id, sizeof(reg.id), "%s", rp->engine_id);
    snprintf(reg.host, sizeof(reg.host), "%s", rp->host);
    rc = post(rp, "/v1/engines/register", wsync_relay_registration_to_json(&reg));
    if (rc > 1 && !rp->refused)
        LOG_WARN("engine %s: the control endpoint refused this node's registration: %s", rp->engine_id,
                 wsync_last_error());
    rp->refused = rc > 1;
    rp->next_beat_ns = wsync_now_ns() + (uint64_t)rp->heartbeat_ms * 1000000ULL;
    return rc;
}

static json_t *report_body(const recv_reporter_t *rp, const report_t *rep)
{
    wsync_engine_report_t r = {.version = rep->version, .holds = rep->holds};
    if (rep->node_note) { /* a note only: the endpoint keeps the node's state */
        r.version = rp->holds;
        r.holds = -1;
        r.has_node = 1;
        snprintf(r.node, sizeof(r.node), "%s", rep->error);
    } else {
        r.state = strcmp(rep->state, "ready") == 0    ? WSYNC_REPORT_READY
                  : strcmp(rep->state, "failed") == 0 ? WSYNC_REPORT_FAILED
                  : strcmp(rep->state, "exited") == 0 ? WSYNC_REPORT_EXITED
                                                      : WSYNC_REPORT_PULLING;
        r.duration_s = rep->duration_s;
        r.bytes = rep->bytes;
        r.has_error = rep->has_error;
        r.has_delta = rep->has_delta;
        r.delta = rep->delta;
        snprintf(r.error, sizeof(r.error), "%s", rep->has_error ? rep->error : "");
    }
    return wsync_engine_report_to_json(&r);
}

/* Sends one report; 0 when it is done with (delivered, or refused for good). */
static int deliver(recv_reporter_t *rp, const report_t *rep)
{
    char path[256];
    long rc;
    snprintf(path, sizeof(path), "/v1/engines/%s/report", rp->engine_id);
    rc = post(rp, path, report_body(rp, rep));
    if (rc == 404) {
        LOG_WARN("engine %s: the control endpoint does not know this node (restarted without its state?): "
                 "registering again",
                 rp->engine_id);
        rc = beat(rp);
        if (rc == 0)
            rc = post(rp, path, report_body(rp, rep));
    }
    if (rc == 0) {
        if (strcmp(rep->state, "ready") == 0 && !rep->node_note)
            rp->holds = rep->version;
        else if (rep->holds >= 0)
            rp->holds = (uint64_t)rep->holds;
        return 0;
    }
    if (rc == 1 || rc == 404)
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
        while (rp->n == 0 && !rp->stopping) {
            struct timespec ts;
            uint64_t now = wsync_now_ns();
            if (rp->heartbeat_ms > 0 && now >= rp->next_beat_ns) {
                pthread_mutex_unlock(&rp->lock);
                beat(rp);
                pthread_mutex_lock(&rp->lock);
                continue;
            }
            wsync_abstime_after_ms(&ts,
                                   rp->heartbeat_ms > 0 ? (int)((rp->next_beat_ns - now) / 1000000ULL) + 1 : 1000);
            pthread_cond_timedwait(&rp->cond, &rp->lock, &ts);
        }
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
    rp->heartbeat_ms = (long)wsync_setting_int(WSYNC_SET_HEARTBEAT_MS);
    if (rp->heartbeat_ms < 0)
        rp->heartbeat_ms = 0;
    rp->next_beat_ns = 0; /* the first at once: a node that (re)started holds nothing */
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
    reporter_post_held(rp, version, state, duration_s, bytes, error, -1);
}

void reporter_note_node(recv_reporter_t *rp, const char *note)
{
    int same;
    if (rp == NULL)
        return;
    note = note ? note : "";
    pthread_mutex_lock(&rp->lock);
    same = strncmp(rp->note, note, sizeof(rp->note) - 1) == 0;
    snprintf(rp->note, sizeof(rp->note), "%s", note);
    pthread_mutex_unlock(&rp->lock);
    if (!same) /* a change only: callers may say it on every pull */
        reporter_post_held(rp, 0, "", 0, 0, note, -2);
}

/* Queues one report (delta: NULL, none). */
static void post_report(recv_reporter_t *rp, uint64_t version, const char *state, double duration_s,
                        uint64_t bytes, const char *error, int64_t holds, const wsync_report_delta_t *delta)
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
    rep->node_note = holds == -2;
    rep->holds = holds < 0 ? -1 : holds;
    if (delta && delta->pieces + delta->refetched > 0) {
        rep->has_delta = 1;
        rep->delta = *delta;
    }
    rp->n++;
    pthread_cond_broadcast(&rp->cond);
    pthread_mutex_unlock(&rp->lock);
}

void reporter_post_held(recv_reporter_t *rp, uint64_t version, const char *state, double duration_s,
                        uint64_t bytes, const char *error, int64_t holds)
{
    post_report(rp, version, state, duration_s, bytes, error, holds, NULL);
}

void reporter_post_ready(recv_reporter_t *rp, uint64_t version, double duration_s, uint64_t bytes,
                         const wsync_report_delta_t *delta)
{
    post_report(rp, version, "ready", duration_s, bytes, NULL, -1, delta);
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
        if (flush_ms > 0) { /* a clean stop: status lists the node as gone, not live (one try) */
            char path[256];
            long http = 0;
            wsync_engine_report_t ex = {.version = rp->holds, .state = WSYNC_REPORT_EXITED, .holds = -1};
            json_t *b = wsync_engine_report_to_json(&ex);
            snprintf(path, sizeof(path), "/v1/engines/%s/report", rp->engine_id);
            if (b)
                wsync_control_request(rp->control, "POST", path, b, 1000, &http, NULL);
            json_decref(b);
        }
    }
    wsync_control_close(rp->control);
    free(rp->engine_id);
    free(rp->host);
    json_decref(rp->endpoint);
    pthread_mutex_destroy(&rp->lock);
    pthread_cond_destroy(&rp->cond);
    free(rp);
}
