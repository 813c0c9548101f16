/* hold.c: single-copy versions. A version published single-copy is served
 * straight out of the caller's extents (no snapshot into a slot: one copy,
 * trainer -> engine, end to end); wsync_publisher_wait_held() returns once
 * every engine node on this rank's host (the ones that read the caller's
 * memory over the local transport, or over loopback for host memory)
 * reports it ready at the control endpoint and no pull of it is in flight
 * here, or at a timeout; either way the version is then released: this
 * rank stops serving it, so the caller may write its extents. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/interrupt.h"
#include "common/base/util.h"
#include "trainer_side/publisher_internal.h"

/* The control endpoint's engine states are read every 1 ms for 30 ms after
 * a pull served here ends (the engine that made it reports ready within a
 * few ms: measured 2-20 ms on a loaded 2-core host), then every 2, 4, ...
 * ms, backing off to one look every 50 ms while nothing is served here (a
 * node that got the version elsewhere, say from a relay). Read every 1 ms
 * throughout instead, a wait of 10 s cost the endpoint 10,000 answers. */
#define HOLD_LOOK_MIN_MS 1
#define HOLD_LOOK_MAX_MS 50
#define HOLD_EAGER_MS 30

void pub_release_direct(wsync_publisher_t *p, uint64_t version, const char *why)
{
    pub_slot_t *s = &p->slots.slot[PUB_DIRECT];
    if (version == 0 || p->slots.held_version != version || p->slots.held_released)
        return;
    p->slots.held_released = 1;
    if (s->version == version) {
        s->version = 0;
        if (p->slots.latest == PUB_DIRECT)
            p->slots.latest = -1;
        /* A pull in flight waits for "copied" before each put: it stops
         * there, failing with `why`, instead of reading bytes the caller
         * may be writing. */
        memset(s->copied, 0, p->share.nmy ? p->share.nmy : 1);
        s->copy_status = WSYNC_ERR_CANCELLED;
        p->slots.withdrawn = version;
        snprintf(p->slots.withdrawn_why, sizeof(p->slots.withdrawn_why), "%s", why);
    }
    pthread_cond_broadcast(&p->cond);
}

/* One look at the engine nodes registered from this host: 1 when all hold
 * `version` (or newer), 0 while some do not yet, -1 when one failed it;
 * msg names them. */
static int nodes_hold(wsync_publisher_t *p, const json_t *status, uint64_t version, char *msg, size_t len)
{
    const json_t *e;
    size_t i, n = 0;
    int failed = 0, waiting = 0;
    msg[0] = '\0';
    json_array_foreach(json_object_get(status, "engines"), i, e)
    {
        const char *hid = json_string_value(json_object_get(json_object_get(e, "endpoint"), "host_id"));
        const char *id = json_string_value(json_object_get(e, "id"));
        const char *state = json_string_value(json_object_get(e, "state"));
        const char *err = json_string_value(json_object_get(e, "last_error"));
        uint64_t held = (uint64_t)json_integer_value(json_object_get(e, "version"));
        uint64_t target = (uint64_t)json_integer_value(json_object_get(e, "target"));
        if (hid == NULL || strcmp(hid, p->host_id) != 0 || held >= version)
            continue;
        if (state && strcmp(state, "failed") == 0 && target == version) {
            if (!failed)
                n = 0; /* name the failures alone */
            failed++;
            if (n < len)
                n += (size_t)snprintf(msg + n, len - n, "%sengine %s failed it: %.200s", failed > 1 ? "; " : "",
                                      id ? id : "?", err ? err : "");
        } else if (!failed) {
            waiting++;
            if (n < len)
                n += (size_t)snprintf(msg + n, len - n, "%sengine %s is %s, holding version %llu",
                                      waiting > 1 ? "; " : "", id ? id : "?", state ? state : "?",
                                      (unsigned long long)held);
        }
    }
    return failed ? -1 : waiting ? 0 : 1;
}

/* Until the next look at the engine states: `ms` or `end`, or sooner when
 * a pull served here ends (the one place this wait is woken: p->cond). The
 * interval for the look after it: the shortest for HOLD_EAGER_MS after a
 * pull ended (*eager_until), else twice this one. */
static int wait_look(wsync_publisher_t *p, uint64_t *seen, uint64_t *eager_until, int ms, uint64_t end)
{
    uint64_t until = wsync_now_ns() + (uint64_t)ms * 1000000ULL;
    int ended;
    if (until > end)
        until = end;
    pthread_mutex_lock(&p->lock);
    while (p->serving.pulls_ended == *seen && !p->serving.stopping && !wsync_interrupted() &&
           wsync_now_ns() < until) {
        struct timespec ts;
        uint64_t left = until - wsync_now_ns();
        int wait_ms = (int)(left / 1000000ULL) + 1;
        /* In slices, so SIGINT/SIGTERM (wsync_interrupt) ends the wait at once. */
        wsync_abstime_after_ms(&ts, wait_ms < WSYNC_INTERRUPT_SLICE_MS ? wait_ms : WSYNC_INTERRUPT_SLICE_MS);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    ended = p->serving.pulls_ended != *seen;
    *seen = p->serving.pulls_ended;
    pthread_mutex_unlock(&p->lock);
    if (ended)
        *eager_until = wsync_now_ns() + HOLD_EAGER_MS * 1000000ULL;
    if (wsync_now_ns() < *eager_until)
        return HOLD_LOOK_MIN_MS;
    return ms * 2 < HOLD_LOOK_MAX_MS ? ms * 2 : HOLD_LOOK_MAX_MS;
}

/* Until every engine node of this host holds `version`, one failed it, or
 * `end`. */
static wsync_status_t wait_nodes(wsync_publisher_t *p, uint64_t version, uint64_t end, int timeout_ms)
{
    char msg[768] = "the control endpoint did not answer";
    uint64_t seen, eager_until = 0;
    int ms = HOLD_LOOK_MIN_MS;
    pthread_mutex_lock(&p->lock);
    seen = p->serving.pulls_ended;
    pthread_mutex_unlock(&p->lock);
    for (;;) {
        json_t *status = NULL;
        long http = 0;
        int held = 0;
        /* Once, not retried: the loop asks again until `end`. */
        if (wsync_control_request(p->control, "GET", "/v1/status", NULL, 5000, &http, &status) == WSYNC_OK &&
            http == 200)
            held = nodes_hold(p, status, version, msg, sizeof(msg));
        else if (http)
            snprintf(msg, sizeof(msg), "GET /v1/status answered HTTP %ld", http);
        json_decref(status);
        if (held > 0)
            return WSYNC_OK;
        if (held < 0)
            return wsync_error(WSYNC_ERR_PEER, "trainer rank %d: version %llu is not held on host %s: %s",
                               p->cfg.rank, (unsigned long long)version, p->host_id, msg);
        if (wsync_interrupted())
            return wsync_cancel_error("wsync_publisher_wait_held");
        if (wsync_now_ns() >= end)
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "trainer rank %d: version %llu was not held by every engine node on host %s "
                               "within %d ms (%s)",
                               p->cfg.rank, (unsigned long long)version, p->host_id, timeout_ms, msg);
        ms = wait_look(p, &seen, &eager_until, ms, end);
    }
}

/* Until no pull of the direct slot is in flight (p->lock held). A pull
 * that ends unpins under p->lock and broadcasts p->cond (pull_server.c),
 * so the wait sleeps on it: in WSYNC_INTERRUPT_SLICE_MS slices only to see
 * SIGINT/SIGTERM, not to look at `pins` (it looked every 1 ms before). */
static wsync_status_t wait_unpinned(wsync_publisher_t *p, uint64_t version, uint64_t end, int timeout_ms)
{
    while (p->slots.slot[PUB_DIRECT].pins > 0) {
        struct timespec ts;
        uint64_t now = wsync_now_ns();
        int ms;
        if (wsync_interrupted())
            return wsync_cancel_error("wsync_publisher_wait_held");
        if (wsync_now_ns() >= end)
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "trainer rank %d: %d pulls of version %llu were still in flight after %d ms",
                               p->cfg.rank, p->slots.slot[PUB_DIRECT].pins, (unsigned long long)version, timeout_ms);
        ms = end > now ? (int)((end - now) / 1000000ULL) + 1 : 1;
        wsync_abstime_after_ms(&ts, ms < WSYNC_INTERRUPT_SLICE_MS ? ms : WSYNC_INTERRUPT_SLICE_MS);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    return WSYNC_OK;
}

wsync_status_t wsync_publisher_wait_held(wsync_publisher_t *p, uint64_t version, int timeout_ms)
{
    const uint64_t t0 = wsync_now_ns();
    const uint64_t end = t0 + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    wsync_status_t st;
    char why[400];

    pthread_mutex_lock(&p->lock);
    if (version == 0 || p->slots.held_version != version) {
        unsigned long long last = (unsigned long long)p->slots.held_version;
        pthread_mutex_unlock(&p->lock);
        return wsync_error(WSYNC_ERR_INVALID,
                           "trainer rank %d: version %llu was not published single-copy by this rank (the last "
                           "single-copy version is %llu); publish with WSYNC_PUBLISH_SINGLE_COPY or zero_copy = 1",
                           p->cfg.rank, (unsigned long long)version, last);
    }
    if (p->slots.held_released) { /* a wait before, the next publish, or a failed publish took it down */
        pthread_mutex_unlock(&p->lock);
        return WSYNC_OK;
    }
    pthread_mutex_unlock(&p->lock);
    st = wait_nodes(p, version, end, timeout_ms);
    pthread_mutex_lock(&p->lock);
    if (st == WSYNC_OK)
        st = wait_unpinned(p, version, end, timeout_ms);
    if (st == WSYNC_OK)
        snprintf(why, sizeof(why),
                 "it was served single-copy and released once the engines on host %s held it: publish a newer "
                 "version",
                 p->host_id);
    else
        snprintf(why, sizeof(why), "it was served single-copy and released after wsync_publisher_wait_held: %.300s",
                 wsync_last_error());
    pub_release_direct(p, version, why);
    pthread_mutex_unlock(&p->lock);
    wsync_trace("trainer rank %d: version %llu %s after %.3f ms of wait_held", p->cfg.rank,
                (unsigned long long)version, st == WSYNC_OK ? "held" : "released unheld",
                (double)(wsync_now_ns() - t0) / 1e6);
    return st;
}
