/* relay_registration.c: an engine node's registration, to and from JSON. */
#include "common/proto/relay_registration.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

int wsync_engine_id_ok(const char *id)
{
    size_t i, n = strlen(id);
    if (n == 0 || n >= sizeof(((wsync_relay_registration_t *)0)->id))
        return 0;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)id[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '/' || ch == '"' || ch == '\\' || ch == '%' || ch == '?' || ch == '#')
            return 0;
    }
    return 1;
}

json_t *wsync_relay_registration_endpoint(const wsync_relay_registration_t *r)
{
    json_t *ep;
    if (r->endpoint)
        return json_incref(r->endpoint);
    if (!r->host_id[0] && !r->relay[0])
        return NULL;
    ep = json_object();
    if (ep && r->host_id[0] && json_object_set_new(ep, "host_id", json_string(r->host_id)) != 0)
        json_decref(ep), ep = NULL;
    if (ep && r->relay[0] && json_object_set_new(ep, "relay", json_string(r->relay)) != 0)
        json_decref(ep), ep = NULL;
    return ep;
}

json_t *wsync_relay_registration_to_json(const wsync_relay_registration_t *r)
{
    json_t *j = json_pack("{s:s, s:s, s:i}", "id", r->id, "host", r->host, "local_ranks", r->local_ranks), *ep;
    if (j && r->holds >= 0 && json_object_set_new(j, "holds", json_integer((json_int_t)r->holds)) != 0) {
        json_decref(j);
        return NULL;
    }
    ep = j ? wsync_relay_registration_endpoint(r) : NULL;
    if (ep && json_object_set_new(j, "endpoint", ep) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static wsync_status_t get_string(const json_t *j, const char *field, char *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(j, field));
    if (s == NULL || s[0] == '\0' || strlen(s) >= cap)
        return wsync_error(WSYNC_ERR_FORMAT, "engine registration: field '%s' must be a string of 1 to %zu bytes",
                           field, cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return WSYNC_OK;
}

/* The endpoint: an object of at most WSYNC_REG_MAX_ENDPOINT bytes; its
 * host_id and relay, when there, strings that fit. */
static wsync_status_t get_endpoint(const json_t *ep, wsync_relay_registration_t *out)
{
    char *text;
    size_t n;
    if (!json_is_object(ep))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "engine registration: field 'endpoint' must be an object of at most %d "
                           "bytes as JSON",
                           WSYNC_REG_MAX_ENDPOINT);
    text = json_dumps(ep, JSON_COMPACT);
    n = text ? strlen(text) : 0;
    free(text);
    if (text == NULL || n > WSYNC_REG_MAX_ENDPOINT)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "engine registration: field 'endpoint' must be an object of at most %d "
                           "bytes as JSON",
                           WSYNC_REG_MAX_ENDPOINT);
    if (json_object_get(ep, "host_id"))
        WSYNC_CHECK(get_string(ep, "host_id", out->host_id, sizeof(out->host_id)));
    if (json_object_get(ep, "relay"))
        WSYNC_CHECK(get_string(ep, "relay", out->relay, sizeof(out->relay)));
    out->endpoint = json_incref((json_t *)ep);
    return WSYNC_OK;
}

wsync_status_t wsync_relay_registration_from_json(const json_t *j, wsync_relay_registration_t *out)
{
    const json_t *v;
    memset(out, 0, sizeof(*out));
    out->holds = -1;
    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "engine registration: not a JSON object");
    WSYNC_CHECK(get_string(j, "id", out->id, sizeof(out->id)));
    if (!wsync_engine_id_ok(out->id))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "field 'id' must be under %zu printable characters without '/', quotes, "
                           "backslashes or spaces (it goes into URLs and metric labels)",
                           sizeof(out->id));
    WSYNC_CHECK(get_string(j, "host", out->host, sizeof(out->host)));
    v = json_object_get(j, "local_ranks");
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > WSYNC_REG_MAX_RANKS)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "engine registration: field 'local_ranks' must be an integer from 1 to %d",
                           WSYNC_REG_MAX_RANKS);
    out->local_ranks = (int)json_integer_value(v);
    v = json_object_get(j, "holds");
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 9007199254740991LL))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "engine registration: field 'holds' must be an integer from 0 to 9007199254740991");
    out->holds = v ? (int64_t)json_integer_value(v) : -1;
    v = json_object_get(j, "endpoint");
    return v ? get_endpoint(v, out) : WSYNC_OK;
}

void wsync_relay_registration_clear(wsync_relay_registration_t *r)
{
    json_decref(r->endpoint);
    r->endpoint = NULL;
}
