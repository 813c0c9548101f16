/* control_client.c: libcurl requests to the control endpoint, and the retry
 * layer that rides through its restarts: a request that gets no answer (or a
 * 502/503/504 from a proxy in front) is sent again with capped exponential
 * backoff and jitter until the grace period has passed. Every route the
 * retries touch is idempotent on the endpoint's side (a publish reported twice
 * is one publish, a report or registration repeated changes nothing more). */
#include "common/control/client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/proto/engine_report.h"
#include "common/proto/relay_registration.h"
#include "common/base/interrupt.h"
#include "common/base/settings.h"
#include "common/base/util.h"

#define CONTROL_TIMEOUT_MS 15000L
#define RETRY_FIRST_MS 100 /* first backoff; doubles up to RETRY_CAP_MS */
#define RETRY_CAP_MS 2000

struct wsync_control {
    CURL *curl;
    char *url;
    char auth[600];
    long grace_ms;
    unsigned jitter;   /* rand_r state: clients retry out of step */
    CURLM *multi;      /* every transfer runs through it, to be abortable */
    const int *cancel; /* the owner's cancel flag (wsync_control_set_cancel) */
};

void wsync_control_set_cancel(wsync_control_t *c, const int *flag)
{
    c->cancel = flag;
}

long wsync_control_default_grace_ms(void)
{
    return (long)wsync_setting_int(WSYNC_SET_CONTROL_GRACE_MS);
}

void wsync_control_set_grace(wsync_control_t *c, long grace_ms)
{
    c->grace_ms = grace_ms < 0 ? 0 : grace_ms;
}

long wsync_control_grace_ms(const wsync_control_t *c)
{
    return c->grace_ms;
}

typedef struct buf {
    char *p;
    size_t len;
} buf_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    buf_t *b = ud;
    size_t n = size * nmemb;
    char *np = realloc(b->p, b->len + n + 1);
    if (np == NULL)
        return 0;
    b->p = np;
    memcpy(b->p + b->len, ptr, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

wsync_status_t wsync_control_open(const char *url, const char *token, wsync_control_t **out)
{
    wsync_control_t *c;
    size_t n;
    if (url == NULL || strncmp(url, "http", 4) != 0)
        return wsync_error(WSYNC_ERR_INVALID, "control URL '%s' must start with http:// (e.g. http://host:8470)",
                           url ? url : "");
    pthread_once(&curl_once, curl_init_once);
    c = calloc(1, sizeof(*c));
    WSYNC_CHECK_ALLOC(c);
    c->url = strdup(url);
    c->grace_ms = wsync_control_default_grace_ms();
    c->jitter = (unsigned)wsync_now_ns() ^ (unsigned)getpid();
    n = strlen(c->url);
    while (n > 0 && c->url[n - 1] == '/')
        c->url[--n] = '\0';
    if (token == NULL)
        token = wsync_setting_str(WSYNC_SET_TOKEN);
    if (token && token[0])
        snprintf(c->auth, sizeof(c->auth), "Authorization: Bearer %s", token);
    c->curl = curl_easy_init();
    if (c->curl == NULL) {
        wsync_control_close(c);
        return wsync_error(WSYNC_ERR_NOMEM, "curl_easy_init failed");
    }
    *out = c;
    return WSYNC_OK;
}

void wsync_control_close(wsync_control_t *c)
{
    if (c == NULL)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    free(c->url);
    free(c);
}

/* One transfer, through the multi handle, woken every
 * WSYNC_INTERRUPT_SLICE_MS to see whether the owner was cancelled, which
 * aborts it (curl_easy_perform sleeps up to a second between looks, and a
 * connect to a host that drops packets takes its 5 s); `cancelled` NULL:
 * never aborted. */
static CURLcode perform(wsync_control_t *c, int *cancelled)
{
    CURLcode rc = CURLE_FAILED_INIT;
    int running = 1;
    CURLMsg *m;
    int left;
    if (c->multi == NULL && (c->multi = curl_multi_init()) == NULL)
        return curl_easy_perform(c->curl);
    curl_multi_add_handle(c->multi, c->curl);
    while (running) {
        if (curl_multi_perform(c->multi, &running) != CURLM_OK)
            break;
        if (running == 0)
            break;
        if (cancelled && wsync_cancelled(c->cancel)) {
            *cancelled = 1;
            break;
        }
        curl_multi_poll(c->multi, NULL, 0, WSYNC_INTERRUPT_SLICE_MS, NULL);
    }
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL)
        if (m->msg == CURLMSG_DONE)
            rc = m->data.result;
    curl_multi_remove_handle(c->multi, c->curl);
    return rc;
}

/* A request started once the owner was cancelled still goes out (the last
 * reports of an object being destroyed); one in flight when the cancel
 * comes is aborted. */
static wsync_status_t request(wsync_control_t *c, const char *method, const char *path, const json_t *body,
                              long timeout_ms, long *http, json_t **resp)
{
    int cancelled = 0, abortable = !wsync_cancelled(c->cancel);
    struct curl_slist *hdrs = NULL;
    char url[2048], *text = NULL;
    buf_t b = {0};
    CURLcode rc;
    json_error_t jerr;

    snprintf(url, sizeof(url), "%s%s", c->url, path);
    curl_easy_reset(c->curl);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : CONTROL_TIMEOUT_MS);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_ACCEPT_ENCODING, ""); /* gzip where the answer has it (GET /v1/status) */
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (c->auth[0])
        hdrs = curl_slist_append(hdrs, c->auth);
    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        if (text == NULL) {
            curl_slist_free_all(hdrs);
            return wsync_error(WSYNC_ERR_NOMEM, "cannot encode the request body");
        }
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    }
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
    rc = perform(c, abortable ? &cancelled : NULL);
    curl_slist_free_all(hdrs);
    free(text);
    if (cancelled) {
        free(b.p);
        return wsync_error(WSYNC_ERR_CANCELLED,
                           "control endpoint %s: %s %s: interrupted (SIGINT/SIGTERM, or a cancel)", c->url, method,
                           path);
    }
    if (rc != CURLE_OK) {
        free(b.p);
        return wsync_error(rc == CURLE_OPERATION_TIMEDOUT ? WSYNC_ERR_TIMEOUT : WSYNC_ERR_HTTP,
                           "control endpoint %s: %s %s: %s", c->url, method, path, curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, http);
    if (resp)
        *resp = NULL;
    if (b.len > 0 && resp) {
        *resp = json_loadb(b.p, b.len, 0, &jerr);
    }
    free(b.p);
    return WSYNC_OK;
}

wsync_status_t wsync_control_request(wsync_control_t *c, const char *method, const char *path, const json_t *body,
                                     long timeout_ms, long *http, json_t **resp)
{
    return request(c, method, path, body, timeout_ms, http, resp);
}

static int retryable_http(long http)
{
    return http == 429 || http == 502 || http == 503 || http == 504;
}

/* Sleeps the backoff of retry `attempt` (from 0), jittered to 50-150%, but not
 * past `until_ns`. */
static void backoff(wsync_control_t *c, int attempt, uint64_t until_ns)
{
    long ms = RETRY_FIRST_MS;
    uint64_t now = wsync_now_ns();
    int i;
    for (i = 0; i < attempt && ms < RETRY_CAP_MS; i++)
        ms *= 2;
    if (ms > RETRY_CAP_MS)
        ms = RETRY_CAP_MS;
    ms = ms / 2 + (long)(rand_r(&c->jitter) % (unsigned)(ms + 1));
    if (now >= until_ns)
        return;
    if ((uint64_t)ms * 1000000ULL > until_ns - now)
        ms = (long)((until_ns - now) / 1000000ULL);
    wsync_sleep_cancellable(ms, c->cancel);
}

wsync_status_t wsync_control_request_retry(wsync_control_t *c, const char *method, const char *path,
                                           const json_t *body, long timeout_ms, long *http, json_t **resp)
{
    const uint64_t t0 = wsync_now_ns(), until = t0 + (uint64_t)c->grace_ms * 1000000ULL;
    char last[512];
    int attempt;
    for (attempt = 0;; attempt++) {
        wsync_status_t st = wsync_control_request(c, method, path, body, timeout_ms, http, resp);
        if (st == WSYNC_OK && !retryable_http(*http))
            return WSYNC_OK;
        if (st == WSYNC_OK) {
            snprintf(last, sizeof(last), "HTTP %ld", *http);
            if (resp) {
                json_decref(*resp);
                *resp = NULL;
            }
        } else {
            snprintf(last, sizeof(last), "%s", wsync_last_error());
        }
        if (wsync_now_ns() >= until) {
            if (attempt == 0)
                return st == WSYNC_OK ? wsync_error(WSYNC_ERR_HTTP, "control endpoint %s: %s %s: %s", c->url,
                                                    method, path, last)
                                      : st;
            return wsync_error(st == WSYNC_OK ? WSYNC_ERR_HTTP : st,
                               "control endpoint %s: %s %s: no answer for %.1f s (%d attempts, grace period "
                               "%.0f s, WSYNC_CONTROL_GRACE_MS): %s",
                               c->url, method, path, (double)(wsync_now_ns() - t0) / 1e9, attempt + 1,
                               (double)c->grace_ms / 1e3, last);
        }
        if (wsync_cancelled(c->cancel))
            return wsync_error(WSYNC_ERR_CANCELLED, "control endpoint %s: %s %s: interrupted while retrying: %s",
                               c->url, method, path, last);
        if (attempt == 0)
            LOG_WARN("%s; retrying for up to %.1f s", last, (double)c->grace_ms / 1e3);
        backoff(c, attempt, until);
    }
}

/* A request whose non-2xx answer is an error carrying the server's message. */
static wsync_status_t call(wsync_control_t *c, const char *method, const char *path, const json_t *body,
                           long timeout_ms, json_t **out)
{
    json_t *resp = NULL;
    long http = 0;
    wsync_status_t st;
    WSYNC_CHECK(wsync_control_request_retry(c, method, path, body, timeout_ms, &http, &resp));
    if (http >= 200 && http < 300) {
        if (out)
            *out = resp;
        else
            json_decref(resp);
        return WSYNC_OK;
    }
    switch (http) {
    case 401: st = WSYNC_ERR_AUTH; break;
    case 404: st = WSYNC_ERR_NOT_FOUND; break;
    case 403:
    case 409: st = WSYNC_ERR_CONFLICT; break;
    case 400:
    case 413:
    case 422: st = WSYNC_ERR_INVALID; break;
    default: st = WSYNC_ERR_HTTP; break;
    }
    {
        const char *msg = json_string_value(json_object_get(json_object_get(resp, "error"), "message"));
        wsync_error(st, "control endpoint %s: %s %s: HTTP %ld: %s", c->url, method, path, http,
                    msg ? msg : "(no message)");
    }
    json_decref(resp);
    return st;
}

wsync_status_t wsync_control_register_trainer(wsync_control_t *c, int rank, int world, const char *host,
                                              const json_t *endpoint)
{
    json_t *b = json_pack("{s:i, s:i, s:s, s:O}", "rank", rank, "world", world, "host", host, "endpoint", endpoint);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    st = call(c, "POST", "/v1/trainers/register", b, 0, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_trainers(wsync_control_t *c, json_t **out)
{
    return call(c, "GET", "/v1/trainers", NULL, 0, out);
}

wsync_status_t wsync_control_register_engine(wsync_control_t *c, const char *engine_id, const char *host,
                                             int local_ranks, const json_t *endpoint)
{
    wsync_relay_registration_t reg = {.local_ranks = local_ranks, .holds = -1, .endpoint = (json_t *)endpoint};
    json_t *b;
    wsync_status_t st;
    snprintf(reg.id, sizeof(reg.id), "%s", engine_id);
    snprintf(reg.host, sizeof(reg.host), "%s", host);
    b = wsync_relay_registration_to_json(&reg);
    WSYNC_CHECK_ALLOC(b);
    st = call(c, "POST", "/v1/engines/register", b, 0, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_publish(wsync_control_t *c, int rank, int world, uint64_t version,
                                     const json_t *layout, const json_t *pieces)
{
    json_t *b = json_pack("{s:i, s:i, s:I, s:O, s:O}", "rank", rank, "world", world, "version",
                          (json_int_t)version, "layout", layout, "pieces", pieces);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    st = call(c, "POST", "/v1/publish", b, 60000, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_put_layout(wsync_control_t *c, const char *digest, const json_t *manifest)
{
    char path[128];
    json_t *b = json_pack("{s:O}", "manifest", manifest);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    snprintf(path, sizeof(path), "/v1/layouts/%.64s", digest);
    st = call(c, "POST", path, b, 60000, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_get_layout(wsync_control_t *c, const char *digest, json_t **manifest)
{
    char path[128];
    json_t *doc = NULL;
    snprintf(path, sizeof(path), "/v1/layouts/%.64s", digest);
    WSYNC_CHECK(call(c, "GET", path, NULL, 60000, &doc));
    if (!json_is_object(json_object_get(doc, "manifest"))) {
        json_decref(doc);
        return wsync_error(WSYNC_ERR_FORMAT, "control endpoint %s: GET %s: the answer has no manifest", c->url,
                           path);
    }
    *manifest = json_incref(json_object_get(doc, "manifest"));
    json_decref(doc);
    return WSYNC_OK;
}

static wsync_status_t wait_version(wsync_control_t *c, uint64_t after, int timeout_ms, uint64_t *version,
                                   json_t **record);

wsync_status_t wsync_control_wait_version(wsync_control_t *c, uint64_t after, int timeout_ms, uint64_t *version)
{
    return wait_version(c, after, timeout_ms, version, NULL);
}

wsync_status_t wsync_control_wait_version_record(wsync_control_t *c, uint64_t after, int timeout_ms,
                                                 uint64_t *version, json_t **record)
{
    *record = NULL;
    return wait_version(c, after, timeout_ms, version, record);
}

/* The long poll; with `record`, asks for the version's record in the answer
 * (an endpoint from before that answers without it: *record stays NULL). */
static wsync_status_t wait_version(wsync_control_t *c, uint64_t after, int timeout_ms, uint64_t *version,
                                   json_t **record)
{
    const uint64_t end = wsync_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ULL;
    uint64_t down_since = 0; /* first unanswered poll of the current outage */
    char path[128];
    int attempt = 0;

    *version = 0;
    for (;;) {
        json_t *resp = NULL;
        long http = 0;
        uint64_t now = wsync_now_ns();
        int left = now >= end ? 0 : (int)((end - now) / 1000000ULL);
        int t = left > 60000 ? 60000 : left;
        wsync_status_t st;
        snprintf(path, sizeof(path), "/v1/versions/latest?after=%llu&timeout_ms=%d%s", (unsigned long long)after,
                 t, record ? "&record=1" : "");
        if (wsync_cancelled(c->cancel)) /* a wait: none starts once cancelled */
            return wsync_cancel_error("control endpoint long poll");
        st = request(c, "GET", path, NULL, (long)t + 10000, &http, &resp);
        if (st == WSYNC_ERR_CANCELLED)
            return st;
        if (st == WSYNC_OK && http == 200) {
            json_t *rec = json_object_get(resp, "record");
            *version = (uint64_t)json_integer_value(json_object_get(resp, "version"));
            if (record && json_is_object(rec) &&
                (uint64_t)json_integer_value(json_object_get(rec, "version")) == *version)
                *record = json_incref(rec);
        }
        json_decref(resp);
        if (st == WSYNC_OK && http == 200)
            return WSYNC_OK;
        if (st == WSYNC_OK && http != 204 && !retryable_http(http))
            return wsync_error(WSYNC_ERR_HTTP, "control endpoint %s: long poll answered HTTP %ld", c->url, http);
        now = wsync_now_ns();
        if (now >= end)
            return WSYNC_OK; /* the caller's wait is over: no newer version */
        if (st == WSYNC_OK && http == 204) {
            down_since = 0; /* a longer wait than one poll */
            attempt = 0;
            continue;
        }
        /* No answer: ride through an endpoint restart for the grace period,
         * but never past the caller's deadline. */
        if (down_since == 0) {
            down_since = now;
            LOG_WARN("%s; retrying for up to %.0f s", st != WSYNC_OK ? wsync_last_error() : "long poll: HTTP 503",
                     (double)c->grace_ms / 1e3);
        }
        if (now - down_since >= (uint64_t)c->grace_ms * 1000000ULL) {
            if (st == WSYNC_OK)
                return wsync_error(WSYNC_ERR_HTTP, "control endpoint %s: long poll answered HTTP %ld for %.1f s",
                                   c->url, http, (double)(now - down_since) / 1e9);
            return wsync_error(st, "%s (no answer for %.1f s, grace period %.0f s, WSYNC_CONTROL_GRACE_MS)",
                               wsync_last_error(), (double)(now - down_since) / 1e9, (double)c->grace_ms / 1e3);
        }
        if (wsync_cancelled(c->cancel))
            return wsync_cancel_error("control endpoint long poll");
        {
            uint64_t until = down_since + (uint64_t)c->grace_ms * 1000000ULL;
            backoff(c, attempt++, end < until ? end : until);
        }
    }
}

wsync_status_t wsync_control_latest_version(wsync_control_t *c, uint64_t *version)
{
    json_t *resp = NULL;
    long http = 0;

    *version = 0;
    WSYNC_CHECK(wsync_control_request_retry(c, "GET", "/v1/versions/latest?after=0&timeout_ms=0", NULL, 10000,
                                            &http, &resp));
    if (http == 200)
        *version = (uint64_t)json_integer_value(json_object_get(resp, "version"));
    json_decref(resp);
    if (http != 200 && http != 204)
        return wsync_error(http == 401 ? WSYNC_ERR_AUTH : WSYNC_ERR_HTTP,
                           "control endpoint %s: GET /v1/versions/latest answered HTTP %ld", c->url, http);
    return WSYNC_OK;
}

wsync_status_t wsync_control_get_version(wsync_control_t *c, uint64_t version, json_t **out)
{
    char path[64];
    snprintf(path, sizeof(path), "/v1/versions/%llu", (unsigned long long)version);
    return call(c, "GET", path, NULL, 60000, out);
}

wsync_status_t wsync_control_wait_digests(wsync_control_t *c, uint64_t version, int timeout_ms, json_t **out)
{
    char path[96];
    int t = timeout_ms < 0 ? 0 : timeout_ms > 60000 ? 60000 : timeout_ms;
    snprintf(path, sizeof(path), "/v1/versions/%llu?digests=1&timeout_ms=%d", (unsigned long long)version, t);
    return call(c, "GET", path, NULL, (long)t + 10000, out);
}

static wsync_status_t post_report(wsync_control_t *c, const char *engine_id, const wsync_engine_report_t *r)
{
    char path[256];
    json_t *b = wsync_engine_report_to_json(r);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    snprintf(path, sizeof(path), "/v1/engines/%s/report", engine_id);
    st = call(c, "POST", path, b, 0, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_report(wsync_control_t *c, const char *engine_id, uint64_t version, const char *state,
                                    double duration_s, uint64_t bytes, const char *error)
{
    wsync_engine_report_t r = {.version = version, .duration_s = duration_s, .bytes = bytes, .holds = -1};
    int s;
    for (s = WSYNC_REPORT_PULLING; s <= WSYNC_REPORT_EXITED; s++)
        if (strcmp(state, wsync_report_state_name((wsync_report_state_t)s)) == 0)
            break;
    if (s > WSYNC_REPORT_EXITED)
        return wsync_error(WSYNC_ERR_INVALID,
                           "engine %s: report state '%s' is not pulling, ready, failed or exited", engine_id, state);
    r.state = (wsync_report_state_t)s;
    if (error) {
        r.has_error = 1;
        snprintf(r.error, sizeof(r.error), "%s", error);
    }
    return post_report(c, engine_id, &r);
}

wsync_status_t wsync_control_report_progress(wsync_control_t *c, const char *engine_id, uint64_t version,
                                             const char *phase, uint64_t done, uint64_t total)
{
    wsync_engine_report_t r = {.version = version,
                               .state = WSYNC_REPORT_PULLING,
                               .phase = strcmp(phase, "setup") == 0 ? WSYNC_PHASE_SETUP : WSYNC_PHASE_LANDING,
                               .bytes = done,
                               .total = total,
                               .holds = -1};
    return post_report(c, engine_id, &r);
}

wsync_status_t wsync_control_status(wsync_control_t *c, json_t **out)
{
    return call(c, "GET", "/v1/status", NULL, 0, out);
}
