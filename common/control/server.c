/* server.c: the control endpoint's HTTP side (libmicrohttpd): one handler
 * pattern (per-request context, body cap, JSON parse, route, respond), auth,
 * long polls held as suspended connections (no thread each), metrics. */
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/proto/msg.h"
#include "common/net/auth.h"
#include "common/base/util.h"
#include "common/control/control_server.h"
#include "common/control/layout_files.h"
#include "common/control/model.h"
#include "common/control/server_internal.h"
#include "common/control/state_file.h"
#include "common/control/state_store.h"

/* Records a write's outcome; logs only when the condition changes. */
static void state_health(wsync_control_server_t *s, wsync_status_t rc)
{
    pthread_mutex_lock(&s->health_lock);
    if (rc != WSYNC_OK) {
        s->state_failures++;
        if (strcmp(s->state_error, wsync_last_error()) != 0) {
            snprintf(s->state_error, sizeof(s->state_error), "%s", wsync_last_error());
            s->state_changes++;
            LOG_ERROR("%s; the state is kept in memory and written again every second until that works "
                      "(GET /healthz says 503 meanwhile)",
                      s->state_error);
        }
    } else if (s->state_error[0]) {
        LOG_WARN("state file %s: written again, after %llu failed writes", s->state_path,
                 (unsigned long long)s->state_failures);
        s->state_error[0] = '\0';
        s->state_changes++;
    }
    pthread_mutex_unlock(&s->health_lock);
}

int ctl_state_failing(wsync_control_server_t *s, char *why, size_t len, uint64_t *failures, uint64_t *changes)
{
    int failing;
    pthread_mutex_lock(&s->health_lock);
    failing = s->state_error[0] != '\0';
    if (why)
        snprintf(why, len, "%s", s->state_error);
    if (failures)
        *failures = s->state_failures;
    if (changes)
        *changes = s->state_changes;
    pthread_mutex_unlock(&s->health_lock);
    return failing;
}

/* Saves what changed (state_store.c: appended to the log, or the whole
 * state). The dirty mark is cleared before, so a report that lands
 * meanwhile is either in it or marks again; a write that fails marks it
 * again, so the timer retries once a second. */
static void save_state(wsync_control_server_t *s)
{
    wsync_status_t rc;
    if (s->state_path == NULL)
        return;
    pthread_mutex_lock(&s->save_lock);
    __atomic_store_n(&s->state_dirty, 0, __ATOMIC_RELEASE);
    rc = ctl_store_save(&s->model, s->state_path, 0);
    state_health(s, rc);
    if (rc != WSYNC_OK)
        __atomic_store_n(&s->state_dirty, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&s->saved_ns, wsync_now_ns(), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->save_lock);
}

/* Wake every long poll that can now be answered (or, with `all`, every one).
 * They are taken off the list under wait_lock and resumed after it is
 * released: a publish may resume 10 000, and the MHD threads answering the
 * first ones need wait_lock meanwhile (ctl_count). A held connection is not
 * closed by MHD, so each is still there when it is resumed. */
static void wake_waiters(wsync_control_server_t *s, int all)
{
    uint64_t latest = ctl_latest(&s->model), now = wsync_now_ns();
    req_ctx_t **pp, *ready = NULL, *c;
    pthread_mutex_lock(&s->wait_lock);
    pp = &s->waiters;
    while (*pp) {
        c = *pp;
        if (all || now >= c->deadline ||
            (c->digests_of ? ctl_digests_done(&s->model, c->digests_of) : latest > c->after)) {
            *pp = c->next_waiter;
            c->waiting = 0;
            c->next_waiter = ready;
            ready = c;
        } else {
            pp = &c->next_waiter;
        }
    }
    pthread_mutex_unlock(&s->wait_lock);
    while (ready) {
        c = ready;
        ready = c->next_waiter; /* read first: once resumed, c may be answered and freed */
        MHD_resume_connection(c->conn);
    }
}

static void *timer_main(void *arg)
{
    wsync_control_server_t *s = arg;
    unsigned tick = 0;
    uint64_t sweep_ns = wsync_now_ns();
    while (!__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE)) {
        usleep(5000);
        wake_waiters(s, 0);
        if (++tick % 50 == 0) { /* every 250 ms: requests past their deadline */
            pthread_mutex_lock(&s->wait_lock);
            ctl_conns_expire(&s->conns, wsync_now_ns(), s->request_timeout_ns);
            pthread_mutex_unlock(&s->wait_lock);
        }
        /* Once a second: who is gone, who is forgotten (saved). */
        if (wsync_now_ns() - sweep_ns >= 1000000000ULL) {
            sweep_ns = wsync_now_ns();
            if (ctl_sweep(&s->model, 0))
                __atomic_store_n(&s->state_dirty, 1, __ATOMIC_RELEASE);
        }
        /* Engine reports reach the file at most once a second, off the
         * HTTP thread: the file holds up to 8 manifests. */
        if (__atomic_load_n(&s->state_dirty, __ATOMIC_ACQUIRE) &&
            wsync_now_ns() - __atomic_load_n(&s->saved_ns, __ATOMIC_RELAXED) >= 1000000000ULL)
            save_state(s);
    }
    return NULL;
}

void ctl_count(wsync_control_server_t *s, const char *route, int code)
{
    int i;
    pthread_mutex_lock(&s->wait_lock);
    for (i = 0; i < s->ncounts; i++)
        if (s->counts[i].code == code && strcmp(s->counts[i].route, route) == 0)
            break;
    if (i == s->ncounts && s->ncounts < CTL_MAX_COUNTS) {
        s->counts[i].route = route;
        s->counts[i].code = code;
        s->counts[i].n = 0;
        s->ncounts++;
    }
    if (i < s->ncounts)
        s->counts[i].n++;
    pthread_mutex_unlock(&s->wait_lock);
}

enum MHD_Result ctl_respond(struct MHD_Connection *conn, int code, const char *type, char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    ret = MHD_queue_response(conn, (unsigned)code, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result ctl_respond_json(struct MHD_Connection *conn, int code, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (text == NULL)
        return MHD_NO;
    return ctl_respond(conn, code, "application/json", text);
}

const char *ctl_status_name(int code)
{
    switch (code) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 409: return "conflict";
    case 413: return "payload_too_large";
    case 422: return "invalid_field";
    case 429: return "too_many_requests";
    case 507: return "insufficient_storage";
    default: return "internal_error";
    }
}

enum MHD_Result ctl_error(struct MHD_Connection *conn, int code, const char *msg)
{
    return ctl_respond_json(conn, code,
                            json_pack("{s:{s:i, s:s, s:s}}", "error", "code", code, "status",
                                      ctl_status_name(code), "message", msg));
}

/* Appends an upload chunk to the body (past the route's cap: dropped, and
 * answered 413 once the request is in; a chunked body declares no size). */
static enum MHD_Result take_upload(req_ctx_t *c, const char *url, const char *method, const char *upload, size_t n)
{
    int method_ok = 0;
    const ctl_route_t *route = ctl_route_find(url, method, &method_ok);
    if (c->len + n > (route ? route->body_cap : CTL_BODY_CAP)) {
        c->too_big = 1;
    } else if (!c->too_big) {
        if (c->len + n + 1 > c->cap) {
            size_t ncap = (c->len + n + 1) * 2;
            char *nb = realloc(c->body, ncap);
            if (nb == NULL)
                return MHD_NO;
            c->body = nb;
            c->cap = ncap;
        }
        memcpy(c->body + c->len, upload, n);
        c->len += n;
    }
    return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    wsync_control_server_t *s = cls;
    req_ctx_t *c = *con_cls;
    const ctl_route_t *route;
    int method_ok = 0;
    enum MHD_Result ret;

    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return MHD_NO;
        c->conn = conn;
        *con_cls = c;
        if (s->max_client_conns > 0) {
            const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
            pthread_mutex_lock(&s->wait_lock);
            c->over_limit = ci && ctl_clients_open(&s->clients, ci->client_addr) > s->max_client_conns;
            pthread_mutex_unlock(&s->wait_lock);
        }
        if (ctl_refuse_on_headers(s, c, url, method, &ret))
            return ret;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        ret = take_upload(c, url, method, upload, *upload_size);
        *upload_size = 0;
        return ret;
    }
    if (c->resumed_answer) /* a long poll woke up: answer it */
        return ctl_long_poll_answer(s, c);
    ctl_request_received(s, conn);
    route = ctl_route_find(url, method, &method_ok);
    if (route == NULL) /* refused on the headers already */
        return MHD_NO;
    if (c->too_big) {
        char msg[128];
        snprintf(msg, sizeof(msg), "request body over the %zu-byte limit of this route", route->body_cap);
        ctl_count(s, route->name, 413);
        return ctl_error(conn, 413, msg);
    }
    return route->run(s, c, url);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    wsync_control_server_t *s = cls;
    req_ctx_t *c = *con_cls;
    /* Answered: the deadline runs again for the next request on it. */
    pthread_mutex_lock(&s->wait_lock);
    ctl_conns_receiving(ctl_track_of(conn), 1, wsync_now_ns());
    pthread_mutex_unlock(&s->wait_lock);
    if (c == NULL)
        return;
    free(c->body);
    free(c);
    *con_cls = NULL;
}

/* Route handlers call this after a change that must survive a restart
 * (registration, publish): written before the request is answered. */
void ctl_changed(wsync_control_server_t *s, int published)
{
    save_state(s);
    if (published)
        wsync_trace("control: version %llu complete, waking its long polls",
                    (unsigned long long)ctl_latest(&s->model));
    wake_waiters(s, 0); /* a new version, or late digests filled in: the waiters that can be answered now */
}

/* After an engine's ready/failed report: what it holds is kept across a
 * restart too, but written by the timer within a second (and at stop);
 * the engine reports again on its next pull anyway. */
void ctl_reported(wsync_control_server_t *s)
{
    __atomic_store_n(&s->state_dirty, 1, __ATOMIC_RELEASE);
}

wsync_status_t ctl_suspend(wsync_control_server_t *s, req_ctx_t *c)
{
    pthread_mutex_lock(&s->wait_lock);
    /* Shutting down: a connection suspended now would never be resumed,
     * and MHD_stop_daemon refuses suspended connections. */
    if (__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&s->wait_lock);
        return WSYNC_ERR_CANCELLED;
    }
    /* Checked again under wait_lock: with a pool of MHD threads a publish on
     * another one may have come since the caller looked, and its wake-up
     * (which takes this lock after the model changed) would miss this poll. */
    if (c->digests_of ? ctl_digests_done(&s->model, c->digests_of) : ctl_latest(&s->model) > c->after) {
        pthread_mutex_unlock(&s->wait_lock);
        return WSYNC_ERR_CONFLICT;
    }
    c->waiting = 1;
    c->resumed_answer = 1;
    c->next_waiter = s->waiters;
    s->waiters = c;
    MHD_suspend_connection(c->conn);
    pthread_mutex_unlock(&s->wait_lock);
    return WSYNC_OK;
}

/* MHD threads: as asked, else one per two CPUs, up to 16 (the rest of the
 * machine keeps the other half: trainer rank 0 may run this in-process); never
 * more than the connection limit (MHD splits it between them). On the 2-core
 * dev VM, where the clients share the cores, 2 threads answered 10 000 polls
 * in no less time than 1 and spent ~1.8x its CPU per poll (bench/RESULTS.md). */
static unsigned pool_size(int asked, unsigned conn_limit)
{
    long n = asked > 0 ? asked : sysconf(_SC_NPROCESSORS_ONLN) / 2;
    if (asked <= 0 && n > 16)
        n = 16;
    if (n > (long)conn_limit)
        n = (long)conn_limit;
    return (unsigned)(n < 1 ? 1 : n);
}

wsync_status_t wsync_control_server_start(const wsync_control_server_config_t *cfg, wsync_control_server_t **out)
{
    wsync_control_server_t *s = calloc(1, sizeof(*s));
    char host[128] = "0.0.0.0", adv[64];
    int port = WSYNC_CONTROL_PORT, fd = -1, found = 0;
    unsigned conn_limit;
    wsync_status_t st;

    WSYNC_CHECK_ALLOC(s);
    ctl_model_init(&s->model);
    pthread_mutex_init(&s->wait_lock, NULL);
    pthread_mutex_init(&s->save_lock, NULL);
    pthread_mutex_init(&s->health_lock, NULL);
    pthread_mutex_init(&s->cache_lock, NULL);
    if (cfg->listen && cfg->listen[0])
        WSYNC_CHECK_GOTO(wsync_split_hostport(cfg->listen, host, sizeof(host), &port), st, err);
    if (cfg->token_file) {
        char buf[512];
        WSYNC_CHECK_GOTO(wsync_auth_read_token_file(cfg->token_file, buf, sizeof(buf)), st, err);
        s->token = strdup(buf);
        memset(buf, 0, sizeof(buf));
        if (s->token == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory for the token");
            goto err;
        }
    }
    if (cfg->private_status && s->token == NULL) {
        st = wsync_error(WSYNC_ERR_INVALID, "private status (--private-status) needs a token (--token-file): "
                                            "without one nobody could read /v1/status");
        goto err;
    }
    s->private_status = cfg->private_status;
    s->max_client_conns = cfg->max_client_connections > 0 ? cfg->max_client_connections : 0;
    s->model.max_engines = cfg->max_engines > 0 ? cfg->max_engines : 0;
    s->model.lease_s = cfg->lease_s;
    s->model.forget_after_s = cfg->forget_after_s;
    if (cfg->state_file) {
        s->state_path = strdup(cfg->state_file);
        WSYNC_CHECK_GOTO(ctl_state_prepare_dir(cfg->state_file), st, err);
        WSYNC_CHECK_GOTO(ctl_store_load(&s->model, cfg->state_file, &found), st, err);
        if (found)
            LOG_INFO("state file %s: continuing from version %llu", cfg->state_file,
                     (unsigned long long)s->model.latest);
        /* A state file that cannot be written is found now, not after the
         * first publish: refuse to start rather than lose it silently. The
         * log, if any, is folded in. */
        st = ctl_store_save(&s->model, cfg->state_file, 1);
        if (st != WSYNC_OK) {
            st = wsync_error(st, "%s; refusing to start (the state file's directory must be writable)",
                             wsync_last_error());
            goto err;
        }
    }
    conn_limit = (unsigned)(cfg->max_connections > 0 ? cfg->max_connections : 16384);
    WSYNC_CHECK_GOTO(wsync_tcp_listen(host, port, &fd, &port), st, err);
    s->request_timeout_ns = (uint64_t)(cfg->request_timeout_s > 0 ? cfg->request_timeout_s : CTL_REQUEST_TIMEOUT_S) *
                            1000000000ULL;
    /* A pool of MHD threads, each with its own epoll set: a publish resumes
     * every held long poll at once and each thread answers its share (one
     * thread answered 10 000 in 2.4x the raw loopback time on the 16-core
     * host, where the bench's client has cores to spare). */
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0,
                            ctl_accept_policy, s, handler, s, MHD_OPTION_THREAD_POOL_SIZE,
                            pool_size(cfg->threads, conn_limit), MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                            ctl_on_connection, s, MHD_OPTION_CONNECTION_LIMIT, conn_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)(cfg->idle_timeout_s > 0 ? cfg->idle_timeout_s : 120),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, CTL_CONN_POOL, MHD_OPTION_END);
    if (s->d == NULL) {
        close(fd);
        st = wsync_error(WSYNC_ERR_IO, "cannot start the HTTP server on %s:%d", host, port);
        goto err;
    }
    if (pthread_create(&s->timer, NULL, timer_main, s) != 0) {
        st = wsync_error(WSYNC_ERR_IO, "cannot start the long-poll timer");
        goto err;
    }
    s->timer_started = 1;
    if (strcmp(host, "0.0.0.0") == 0 || host[0] == '\0')
        wsync_primary_ipv4(adv, sizeof(adv));
    else
        snprintf(adv, sizeof(adv), "%s", host);
    snprintf(s->url, sizeof(s->url), "http://%s:%d", adv, port);
    LOG_INFO("control endpoint listening on %s:%d (%s)", host, port, s->url);
    *out = s;
    return WSYNC_OK;
err:
    wsync_control_server_stop(s);
    return st;
}

const char *wsync_control_server_url(const wsync_control_server_t *s)
{
    return s->url;
}

void wsync_control_server_stop(wsync_control_server_t *s)
{
    if (s == NULL)
        return;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    if (s->timer_started)
        pthread_join(s->timer, NULL);
    if (s->d) {
        wake_waiters(s, 1);
        MHD_stop_daemon(s->d);
    }
    if (__atomic_load_n(&s->state_dirty, __ATOMIC_ACQUIRE))
        save_state(s);
    ctl_status_cache_drop(s);
    if (s->latest_resp)
        MHD_destroy_response(s->latest_resp);
    if (s->latest_rec_resp)
        MHD_destroy_response(s->latest_rec_resp);
    json_decref(s->latest_rec_obj);
    if (s->rec_resp)
        MHD_destroy_response(s->rec_resp);
    json_decref(s->rec_obj);
    if (s->lay_resp)
        MHD_destroy_response(s->lay_resp);
    json_decref(s->lay_obj);
    ctl_model_free(&s->model);
    pthread_mutex_destroy(&s->wait_lock);
    pthread_mutex_destroy(&s->save_lock);
    pthread_mutex_destroy(&s->health_lock);
    pthread_mutex_destroy(&s->cache_lock);
    free(s->state_path);
    free(s->token);
    ctl_clients_free(&s->clients);
    while (s->conns.head) /* none left once MHD stopped; a daemon that never started has none */
        ctl_conns_close(&s->conns, s->conns.head);
    free(s);
}
