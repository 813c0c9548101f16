/* control_client.c: libcurl requests to the control endpoint. */
#include "common/control_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checks.h"
#include "common/settings.h"

#define CONTROL_TIMEOUT_MS 15000L

struct wsync_control {
    CURL *curl;
    char *url;
    char auth[600];
};

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
    free(c->url);
    free(c);
}

wsync_status_t wsync_control_request(wsync_control_t *c, const char *method, const char *path, const json_t *body,
                                     long timeout_ms, long *http, json_t **resp)
{
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
    rc = curl_easy_perform(c->curl);
    curl_slist_free_all(hdrs);
    free(text);
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

/* A request whose non-2xx answer is an error carrying the server's message. */
static wsync_status_t call(wsync_control_t *c, const char *method, const char *path, const json_t *body,
                           long timeout_ms, json_t **out)
{
    json_t *resp = NULL;
    long http = 0;
    wsync_status_t st;
    WSYNC_CHECK(wsync_control_request(c, method, path, body, timeout_ms, &http, &resp));
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
    case 409: st = WSYNC_ERR_CONFLICT; break;
    case 400: case 413: case 422: st = WSYNC_ERR_INVALID; break;
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
    json_t *b = json_pack("{s:s, s:s, s:i}", "id", engine_id, "host", host, "local_ranks", local_ranks);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    if (endpoint)
        json_object_set(b, "endpoint", (json_t *)endpoint);
    st = call(c, "POST", "/v1/engines/register", b, 0, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_publish(wsync_control_t *c, int rank, int world, uint64_t version, const json_t *layout,
                                     const json_t *pieces)
{
    json_t *b = json_pack("{s:i, s:i, s:I, s:O, s:O}", "rank", rank, "world", world, "version", (json_int_t)version,
                          "layout", layout, "pieces", pieces);
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
        return wsync_error(WSYNC_ERR_FORMAT, "control endpoint %s: GET %s: the answer has no manifest", c->url, path);
    }
    *manifest = json_incref(json_object_get(doc, "manifest"));
    json_decref(doc);
    return WSYNC_OK;
}

wsync_status_t wsync_control_wait_version(wsync_control_t *c, uint64_t after, int timeout_ms, uint64_t *version)
{
    char path[128];
    json_t *resp = NULL;
    long http = 0;
    int t = timeout_ms < 0 ? 0 : timeout_ms > 60000 ? 60000 : timeout_ms;
    snprintf(path, sizeof(path), "/v1/versions/latest?after=%llu&timeout_ms=%d", (unsigned long long)after, t);
    WSYNC_CHECK(wsync_control_request(c, "GET", path, NULL, (long)t + 10000, &http, &resp));
    *version = 0;
    if (http == 200)
        *version = (uint64_t)json_integer_value(json_object_get(resp, "version"));
    json_decref(resp);
    if (http != 200 && http != 204)
        return wsync_error(WSYNC_ERR_HTTP, "control endpoint %s: long poll answered HTTP %ld", c->url, http);
    /* A longer wait than one poll: poll again until the caller's deadline. */
    if (http == 204 && timeout_ms > 60000)
        return wsync_control_wait_version(c, after, timeout_ms - 60000, version);
    return WSYNC_OK;
}

wsync_status_t wsync_control_get_version(wsync_control_t *c, uint64_t version, json_t **out)
{
    char path[64];
    snprintf(path, sizeof(path), "/v1/versions/%llu", (unsigned long long)version);
    return call(c, "GET", path, NULL, 60000, out);
}

wsync_status_t wsync_control_report(wsync_control_t *c, const char *engine_id, uint64_t version, const char *state,
                                    double duration_s, uint64_t bytes, const char *error)
{
    char path[256];
    json_t *b = json_pack("{s:I, s:s, s:f, s:I}", "version", (json_int_t)version, "state", state, "duration_s",
                          duration_s, "bytes", (json_int_t)bytes);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    if (error)
        json_object_set_new(b, "error", json_string(error));
    snprintf(path, sizeof(path), "/v1/engines/%s/report", engine_id);
    st = call(c, "POST", path, b, 0, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_report_progress(wsync_control_t *c, const char *engine_id, uint64_t version,
                                             const char *phase, uint64_t done, uint64_t total)
{
    char path[256];
    json_t *b = json_pack("{s:I, s:s, s:s, s:I, s:I}", "version", (json_int_t)version, "state", "pulling", "phase",
                          phase, "bytes", (json_int_t)done, "total", (json_int_t)total);
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(b);
    snprintf(path, sizeof(path), "/v1/engines/%s/report", engine_id);
    st = call(c, "POST", path, b, 0, NULL);
    json_decref(b);
    return st;
}

wsync_status_t wsync_control_status(wsync_control_t *c, json_t **out)
{
    return call(c, "GET", "/v1/status", NULL, 0, out);
}
