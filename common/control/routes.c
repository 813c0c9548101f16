/* routes.c: the control API's routes: one table, one handler each. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/util.h"
#include "common/control/page.h"
#include "common/control/server_internal.h"
#include "common/control/validate.h"

static int too_big_text(const char *e)
{
    return strstr(e, "too big") != NULL && strstr(e, "integer") != NULL; /* jansson's words, both signs */
}

/* A number too big for any integer type (2^64 and up) fails the parse. To
 * name its field as for every other bad value, the number is read as a
 * string (which no integer field takes) and the route's schema checked. */
static int too_big_integer(const req_ctx_t *c, const ctl_schema_t *schema, const json_error_t *first, char *msg,
                           size_t len)
{
    json_error_t jerr = *first;
    char *text = NULL;
    size_t n = c->len, round;
    json_t *j = NULL;
    int named = 0;

    if (schema == NULL || !too_big_text(jerr.text) || (text = malloc(n)) == NULL)
        return 0;
    memcpy(text, c->body, n);
    for (round = 0; round < 16 && j == NULL && too_big_text(jerr.text); round++) {
        /* jansson stops at the number's end; its digits are overwritten
         * as "0...0" between quotes where it starts. */
        size_t end = (size_t)jerr.position, start = end;
        while (start > 0 && (isdigit((unsigned char)text[start - 1]) || text[start - 1] == '-'))
            start--;
        if (end > n || end - start < 3)
            break;
        text[start] = '"';
        memset(text + start + 1, '0', end - start - 2);
        text[end - 1] = '"';
        j = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    }
    if (j != NULL)
        named = ctl_check(j, schema, msg, len) != 0;
    if (!named)
        snprintf(msg, len,
                 "an integer in the body is out of range: %s (line %d, column %d); integers must be below 2^63",
                 first->text, first->line, first->column);
    json_decref(j);
    free(text);
    return 1;
}

/* Parse the body as a JSON object; on failure answer 400 (422 for an
 * integer out of range) and return NULL. */
static json_t *parse_body(wsync_control_server_t *s, req_ctx_t *c, const char *route, const ctl_schema_t *schema,
                          enum MHD_Result *ret)
{
    json_error_t jerr;
    json_t *j = c->len ? json_loadb(c->body, c->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    char msg[512];
    if (j != NULL && json_is_object(j))
        return j;
    json_decref(j);
    if (c->len > 0 && j == NULL && too_big_integer(c, schema, &jerr, msg, sizeof(msg))) {
        ctl_count(s, route, 422);
        *ret = ctl_error(c->conn, 422, msg);
        return NULL;
    }
    if (c->len == 0)
        snprintf(msg, sizeof(msg), "empty body: a JSON object is required");
    else if (j != NULL)
        snprintf(msg, sizeof(msg), "body is JSON but not an object: a JSON object is required");
    else
        snprintf(msg, sizeof(msg), "body is not a JSON object: %s (line %d, column %d)", jerr.text, jerr.line,
                 jerr.column);
    ctl_count(s, route, 400);
    *ret = ctl_error(c->conn, 400, msg);
    return NULL;
}

static enum MHD_Result finish(wsync_control_server_t *s, req_ctx_t *c, const char *route, int code,
                              const char *err, json_t *reply)
{
    ctl_count(s, route, code);
    if (code >= 400) {
        json_decref(reply);
        return ctl_error(c->conn, code, err);
    }
    return ctl_respond_json(c->conn, code, reply ? reply : json_pack("{s:b}", "ok", 1));
}

/* 503 while state-file writes fail: the endpoint still serves, but what it
 * would continue from after a restart is falling behind. */
static enum MHD_Result r_healthz(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    char why[512], *text;
    if (!ctl_state_failing(s, why, sizeof(why), NULL, NULL)) {
        ctl_count(s, "/healthz", 200);
        return ctl_respond(c->conn, 200, "text/plain", strdup("ok\n"));
    }
    if (asprintf(&text, "degraded: %s\n", why) < 0)
        return MHD_NO;
    ctl_count(s, "/healthz", 503);
    return ctl_respond(c->conn, 503, "text/plain", text);
}

static enum MHD_Result r_status(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    enum MHD_Result ret = ctl_status_answer(s, c->conn);
    ctl_count(s, "/v1/status", 200);
    return ret;
}

static enum MHD_Result r_metrics(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    ctl_count(s, "/metrics", 200);
    return ctl_respond(c->conn, 200, "text/plain; version=0.0.4", ctl_metrics_text(s));
}

static enum MHD_Result r_trainers(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    return finish(s, c, "/v1/trainers", 200, NULL, ctl_trainers_json(&s->model));
}

/* POST routes: parse, apply to the model, save if changed. */
#define BODY_ROUTE(fn, route, schema, call)                                             \
    static enum MHD_Result fn(wsync_control_server_t *s, req_ctx_t *c, const char *url) \
    {                                                                                   \
        enum MHD_Result ret;                                                            \
        json_t *body = parse_body(s, c, route, schema, &ret), *reply = NULL;            \
        char err[512] = "";                                                             \
        int changed = 0, code;                                                          \
        uint64_t before = ctl_latest(&s->model);                                        \
        if (body == NULL)                                                               \
            return ret;                                                                 \
        code = (call);                                                                  \
        json_decref(body);                                                              \
        if (code < 300 && changed)                                                      \
            ctl_changed(s, ctl_latest(&s->model) != before);                            \
        return finish(s, c, route, code, err, reply);                                   \
    }

BODY_ROUTE(r_register_trainer, "/v1/trainers/register", &ctl_req_register_trainer,
           ctl_register_trainer(&s->model, body, err, sizeof(err), &changed))
BODY_ROUTE(r_register_engine, "/v1/engines/register", &ctl_req_register_engine,
           ctl_register_engine(&s->model, body, err, sizeof(err), &changed))
BODY_ROUTE(r_publish, "/v1/publish", &ctl_req_publish,
           ctl_publish(&s->model, body, &reply, err, sizeof(err), &changed))

static enum MHD_Result r_report(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    /* /v1/engines/<id>/report */
    const char *id0 = url + strlen("/v1/engines/");
    const char *slash = strchr(id0, '/');
    char id[128];
    enum MHD_Result ret;
    json_t *body;
    char err[512] = "";
    int changed = 0, code;

    if (slash == NULL || strcmp(slash, "/report") != 0 || slash == id0 || (size_t)(slash - id0) >= sizeof(id)) {
        ctl_count(s, "not_found", 404);
        return ctl_error(c->conn, 404, "no such route (POST /v1/engines/<id>/report)");
    }
    memcpy(id, id0, (size_t)(slash - id0));
    id[slash - id0] = '\0';
    if ((body = parse_body(s, c, "/v1/engines/report", &ctl_req_report, &ret)) == NULL)
        return ret;
    code = ctl_report(&s->model, id, body, err, sizeof(err), &changed);
    json_decref(body);
    if (code < 300 && changed)
        ctl_reported(s);
    return finish(s, c, "/v1/engines/report", code, err, NULL);
}

/* Integer query argument; 0 and *ok=1 when absent. */
static uint64_t query_u64(struct MHD_Connection *conn, const char *key, uint64_t dflt, int *ok)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
    char *end = NULL;
    unsigned long long x;
    if (v == NULL)
        return dflt;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*v == '\0' || *v == '-' || *end != '\0' || errno == ERANGE) /* 2^64 and up is no number of ours */
        *ok = 0;
    return x;
}

/* {"version":V,"record":{..}}: the long poll's answer with the record of V
 * (?record=1), one response object per version shared by every poll that
 * asked for it. NULL when V is not retained (answered without it then).
 * Under cache_lock. */
static struct MHD_Response *latest_with_record(wsync_control_server_t *s, uint64_t latest)
{
    json_t *rec, *doc;
    char *text;
    struct MHD_Response *r;
    if ((rec = ctl_version_json(&s->model, latest)) == NULL)
        return NULL;
    if (s->latest_rec_resp && s->latest_rec_resp_version == latest && s->latest_rec_obj == rec) {
        json_decref(rec);
        return s->latest_rec_resp;
    }
    json_decref(s->latest_rec_obj); /* held: a freed record's address may come again */
    s->latest_rec_obj = json_incref(rec);
    doc = json_pack("{s:I, s:o}", "version", (json_int_t)latest, "record", rec);
    text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    r = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (r == NULL) {
        free(text);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (s->latest_rec_resp)
        MHD_destroy_response(s->latest_rec_resp);
    s->latest_rec_resp = r;
    s->latest_rec_resp_version = latest;
    return r;
}

static enum MHD_Result answer_latest(wsync_control_server_t *s, req_ctx_t *c)
{
    uint64_t latest = ctl_latest(&s->model);
    struct MHD_Response *with_rec;
    enum MHD_Result ret;
    if (latest <= c->after) {
        ctl_count(s, "/v1/versions/latest", 204);
        return ctl_respond(c->conn, 204, "application/json", strdup(""));
    }
    pthread_mutex_lock(&s->cache_lock);
    if (c->with_record && (with_rec = latest_with_record(s, latest)) != NULL) {
        ret = MHD_queue_response(c->conn, 200, with_rec);
    } else {
        /* One response object per version, shared by every waiting poll (MHD
         * counts its references): a publish may answer 10 000 at once. */
        if (s->latest_resp == NULL || s->latest_resp_version != latest) {
            char text[64];
            int n = snprintf(text, sizeof(text), "{\"version\":%llu}", (unsigned long long)latest);
            struct MHD_Response *r = MHD_create_response_from_buffer((size_t)n, text, MHD_RESPMEM_MUST_COPY);
            if (r == NULL) {
                pthread_mutex_unlock(&s->cache_lock);
                return MHD_NO;
            }
            MHD_add_response_header(r, "Content-Type", "application/json");
            if (s->latest_resp)
                MHD_destroy_response(s->latest_resp);
            s->latest_resp = r;
            s->latest_resp_version = latest;
        }
        ret = MHD_queue_response(c->conn, 200, s->latest_resp);
    }
    pthread_mutex_unlock(&s->cache_lock);
    ctl_count(s, "/v1/versions/latest", 200);
    return ret;
}

static enum MHD_Result answer_record(wsync_control_server_t *s, req_ctx_t *c, uint64_t v);

enum MHD_Result ctl_long_poll_answer(wsync_control_server_t *s, req_ctx_t *c)
{
    enum MHD_Result r = c->digests_of ? answer_record(s, c, c->digests_of) : answer_latest(s, c);
    wsync_trace("control: a long poll for %s answered", c->digests_of ? "late digests" : "the latest version");
    return r;
}

/* With --private-status a version record (it lists the trainers' pull
 * addresses) is for token holders: GET /v1/versions/<v>, and the long poll
 * with ?record=1. 1 when this request may not see it (answered 401). */
static int record_hidden(wsync_control_server_t *s, req_ctx_t *c, enum MHD_Result *ret)
{
    if (!s->private_status || s->token == NULL || ctl_token_ok(s, c->conn))
        return 0;
    ctl_count(s, "/v1/versions", 401);
    *ret = ctl_error(c->conn, 401,
                     "missing or wrong bearer token (Authorization: Bearer <token>): with --private-status a "
                     "version record (it lists the trainers' pull addresses) needs the token; "
                     "GET /v1/versions/latest without record=1 does not");
    return 1;
}

static enum MHD_Result r_versions(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    enum MHD_Result hidden_ret;
    const char *rest = url + strlen("/v1/versions/");
    char *end = NULL;
    unsigned long long v;
    int ok = 1;

    if (strcmp(rest, "latest") == 0) {
        uint64_t timeout = query_u64(c->conn, "timeout_ms", 0, &ok);
        c->after = query_u64(c->conn, "after", 0, &ok);
        c->with_record = query_u64(c->conn, "record", 0, &ok) != 0;
        if (!ok) {
            ctl_count(s, "/v1/versions/latest", 400);
            return ctl_error(c->conn, 400,
                             "query arguments after, timeout_ms and record must be non-negative integers");
        }
        if (c->with_record && record_hidden(s, c, &hidden_ret))
            return hidden_ret;
        if (timeout > CTL_MAX_POLL_MS)
            timeout = CTL_MAX_POLL_MS;
        if (ctl_latest(&s->model) > c->after || timeout == 0)
            return answer_latest(s, c);
        c->deadline = wsync_now_ns() + timeout * 1000000ULL;
        if (ctl_suspend(s, c) != WSYNC_OK)
            return answer_latest(s, c); /* stopping: answer now (204) */
        return MHD_YES;
    }
    v = strtoull(rest, &end, 10);
    if (*rest == '\0' || *end != '\0' || v == 0) {
        ctl_count(s, "/v1/versions", 404);
        return ctl_error(c->conn, 404, "no such route: use /v1/versions/latest or /v1/versions/<N>");
    }
    if (record_hidden(s, c, &hidden_ret))
        return hidden_ret;
    if (query_u64(c->conn, "digests", 0, &ok) != 0) {
        /* Late digests: answer once every piece of the record has its
         * digest, or at timeout_ms (the record as it is then). */
        uint64_t timeout = query_u64(c->conn, "timeout_ms", 0, &ok);
        if (!ok) {
            ctl_count(s, "/v1/versions", 400);
            return ctl_error(c->conn, 400, "query arguments digests and timeout_ms must be non-negative integers");
        }
        if (timeout > CTL_MAX_POLL_MS)
            timeout = CTL_MAX_POLL_MS;
        if (timeout > 0 && !ctl_digests_done(&s->model, v)) {
            c->digests_of = v;
            c->deadline = wsync_now_ns() + timeout * 1000000ULL;
            if (ctl_suspend(s, c) == WSYNC_OK)
                return MHD_YES;
        }
    }
    return answer_record(s, c, v);
}

/* GET /v1/versions/<v>: the record, the answer cached by record object. */
static enum MHD_Result answer_record(wsync_control_server_t *s, req_ctx_t *c, uint64_t v)
{
    json_t *rec = ctl_version_json(&s->model, v);
    enum MHD_Result ret;
    if (rec == NULL) {
        char msg[256];
        uint64_t oldest = 0, newest = 0, latest = ctl_latest(&s->model);
        ctl_retained(&s->model, &oldest, &newest);
        if (v > latest)
            snprintf(msg, sizeof(msg), "version %llu is not published yet (latest is %llu)", (unsigned long long)v,
                     (unsigned long long)latest);
        else if (newest == 0)
            snprintf(msg, sizeof(msg), "version %llu is no longer retained: no version is (latest is %llu)",
                     (unsigned long long)v, (unsigned long long)latest);
        else
            snprintf(msg, sizeof(msg),
                     "version %llu is no longer retained: the endpoint keeps versions %llu to %llu (latest is "
                     "%llu)",
                     (unsigned long long)v, (unsigned long long)oldest, (unsigned long long)newest,
                     (unsigned long long)latest);
        ctl_count(s, "/v1/versions", 404);
        return ctl_error(c->conn, 404, msg);
    }
    pthread_mutex_lock(&s->cache_lock);
    if (rec != s->rec_obj) {
        char *text = json_dumps(rec, JSON_COMPACT);
        struct MHD_Response *r = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)
                                      : NULL;
        if (r == NULL) {
            pthread_mutex_unlock(&s->cache_lock);
            free(text);
            json_decref(rec);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "application/json");
        if (s->rec_resp)
            MHD_destroy_response(s->rec_resp);
        json_decref(s->rec_obj);
        s->rec_resp = r;
        s->rec_obj = json_incref(rec);
    }
    ret = MHD_queue_response(c->conn, 200, s->rec_resp);
    pthread_mutex_unlock(&s->cache_lock);
    json_decref(rec);
    ctl_count(s, "/v1/versions", 200);
    return ret;
}

/* /v1/layouts/<digest>: POST registers a manifest under its digest (201
 * new, 200 known), GET returns {"digest","manifest"}. */
static enum MHD_Result r_put_layout(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    const char *digest = url + strlen("/v1/layouts/");
    enum MHD_Result ret;
    json_t *body = parse_body(s, c, "/v1/layouts", &ctl_req_layout, &ret), *reply = NULL;
    char err[768] = "";
    int changed = 0, code;
    if (body == NULL)
        return ret;
    code = ctl_put_layout(&s->model, digest, body, &reply, err, sizeof(err), &changed);
    json_decref(body);
    if (code < 300 && changed)
        ctl_changed(s, 0);
    return finish(s, c, "/v1/layouts", code, err, reply);
}

static enum MHD_Result r_get_layout(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    const char *digest = url + strlen("/v1/layouts/");
    json_t *doc = ctl_layout_json(&s->model, digest);
    enum MHD_Result ret;
    char msg[200];
    if (doc == NULL) {
        snprintf(msg, sizeof(msg), "layout %.40s is not registered here (POST /v1/layouts/<digest> registers one)",
                 digest);
        ctl_count(s, "/v1/layouts", 404);
        return ctl_error(c->conn, 404, msg);
    }
    /* Every engine rank of every node fetches a new layout at once: its text
     * is built once, as for version records. */
    pthread_mutex_lock(&s->cache_lock);
    if (doc != s->lay_obj) {
        char *text = json_dumps(doc, JSON_COMPACT);
        struct MHD_Response *r = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)
                                      : NULL;
        if (r == NULL) {
            pthread_mutex_unlock(&s->cache_lock);
            free(text);
            json_decref(doc);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "application/json");
        if (s->lay_resp)
            MHD_destroy_response(s->lay_resp);
        json_decref(s->lay_obj);
        s->lay_resp = r;
        s->lay_obj = json_incref(doc);
    }
    ret = MHD_queue_response(c->conn, 200, s->lay_resp);
    pthread_mutex_unlock(&s->cache_lock);
    json_decref(doc);
    ctl_count(s, "/v1/layouts", 200);
    return ret;
}

static const ctl_route_t routes[] = {
    {"/", "GET", "/", 0, CTL_BODY_CAP, 0, 0, ctl_page}, /* the status page: no data in it */
    {"/healthz", "GET", "/healthz", 0, CTL_BODY_CAP, 0, 0, r_healthz},
    {"/metrics", "GET", "/metrics", 0, CTL_BODY_CAP, 0, 0, r_metrics},
    {"/v1/status", "GET", "/v1/status", 0, CTL_BODY_CAP, 0, 1, r_status},
    {"/v1/trainers", "GET", "/v1/trainers", 0, CTL_BODY_CAP, 0, 1, r_trainers},
    {"/v1/trainers/register", "POST", "/v1/trainers/register", 0, CTL_BODY_CAP, 1, 0, r_register_trainer},
    {"/v1/engines/register", "POST", "/v1/engines/register", 0, CTL_BODY_CAP, 1, 0, r_register_engine},
    {"/v1/publish", "POST", "/v1/publish", 0, CTL_PUBLISH_CAP, 1, 0, r_publish},
    {"/v1/versions", "GET", "/v1/versions/", 1, CTL_BODY_CAP, 0, 0, r_versions},
    {"/v1/engines/report", "POST", "/v1/engines/", 1, CTL_BODY_CAP, 1, 0, r_report},
    {"/v1/layouts", "POST", "/v1/layouts/", 1, CTL_PUBLISH_CAP, 1, 0, r_put_layout},
    {"/v1/layouts", "GET", "/v1/layouts/", 1, CTL_BODY_CAP, 0, 0, r_get_layout},
};

const ctl_route_t *ctl_route_find(const char *url, const char *method, int *path_known)
{
    size_t i;
    *path_known = 0;
    for (i = 0; i < WSYNC_ARRAY_LEN(routes); i++) {
        const ctl_route_t *r = &routes[i];
        int match = r->prefix ? strncmp(url, r->path, strlen(r->path)) == 0 : strcmp(url, r->path) == 0;
        /* /v1/engines/register is exact; the report prefix must not take it. */
        if (r->prefix && r->run == r_report && strcmp(url, "/v1/engines/register") == 0)
            match = 0;
        if (!match)
            continue;
        *path_known = 1;
        if (strcmp(method, r->method) == 0)
            return r;
    }
    return NULL;
}
