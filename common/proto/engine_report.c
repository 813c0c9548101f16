/* engine_report.c: the engine node's report, to and from JSON. */
#include "common/proto/engine_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/base/checks.h"

static const char *const state_names[] = {"pulling", "ready", "failed", "exited"};
static const char *const phase_names[] = {"", "setup", "landing"};

const char *wsync_report_state_name(wsync_report_state_t s)
{
    return (unsigned)s < WSYNC_ARRAY_LEN(state_names) ? state_names[s] : "?";
}

const char *wsync_report_phase_name(wsync_report_phase_t p)
{
    return (unsigned)p < WSYNC_ARRAY_LEN(phase_names) ? phase_names[p] : "?";
}

/* Sets the fields the report has, in the order the API lists them. */
static int set_fields(json_t *j, const wsync_engine_report_t *r)
{
    int rc = 0;
    if (r->phase != WSYNC_PHASE_NONE) {
        rc |= json_object_set_new(j, "phase", json_string(wsync_report_phase_name(r->phase)));
        rc |= json_object_set_new(j, "bytes", json_integer((json_int_t)r->bytes));
        rc |= json_object_set_new(j, "total", json_integer((json_int_t)r->total));
    } else if (r->has_node) {
        rc |= json_object_set_new(j, "node", json_string(r->node));
    } else if (r->state != WSYNC_REPORT_EXITED) {
        rc |= json_object_set_new(j, "duration_s", json_real(r->duration_s));
        rc |= json_object_set_new(j, "bytes", json_integer((json_int_t)r->bytes));
    }
    if (r->has_error)
        rc |= json_object_set_new(j, "error", json_string(r->error));
    if (r->holds >= 0)
        rc |= json_object_set_new(j, "holds", json_integer((json_int_t)r->holds));
    if (r->has_delta)
        rc |= json_object_set_new(j, "delta",
                                  json_pack("{s:I, s:I, s:I, s:I}", "pieces", (json_int_t)r->delta.pieces,
                                            "wire_bytes", (json_int_t)r->delta.wire_bytes, "piece_bytes",
                                            (json_int_t)r->delta.piece_bytes, "refetched",
                                            (json_int_t)r->delta.refetched));
    return rc;
}

json_t *wsync_engine_report_to_json(const wsync_engine_report_t *r)
{
    json_t *j = json_pack("{s:I, s:s}", "version", (json_int_t)r->version, "state",
                          wsync_report_state_name(r->state));
    if (j && set_fields(j, r) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* An integer field in [0, hi]; absent: *out untouched unless required. */
static wsync_status_t get_int(const json_t *j, const char *field, int required, long long hi, uint64_t *out)
{
    const json_t *v = json_object_get(j, field);
    if (v == NULL && !required)
        return WSYNC_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > hi)
        return wsync_error(WSYNC_ERR_FORMAT, "engine report: field '%s' must be an integer from 0 to %lld", field,
                           hi);
    *out = (uint64_t)json_integer_value(v);
    return WSYNC_OK;
}

/* One of `names` (n of them); its index in *out. */
static wsync_status_t get_name(const json_t *j, const char *field, const char *const *names, int n,
                               const char *want, int *out)
{
    const char *s = json_string_value(json_object_get(j, field));
    int i;
    for (i = 0; s && i < n; i++)
        if (names[i][0] && strcmp(s, names[i]) == 0) {
            *out = i;
            return WSYNC_OK;
        }
    return wsync_error(WSYNC_ERR_FORMAT, "engine report: field '%s' must be %s", field, want);
}

static wsync_status_t get_text(const json_t *j, const char *field, int *has, char *out, size_t cap)
{
    const json_t *v = json_object_get(j, field);
    if (v == NULL)
        return WSYNC_OK;
    if (!json_is_string(v))
        return wsync_error(WSYNC_ERR_FORMAT, "engine report: field '%s' must be a string", field);
    snprintf(out, cap, "%s", json_string_value(v)); /* a longer message is cut, not refused */
    *has = 1;
    return WSYNC_OK;
}

/* "delta": an object of four counts, wire bytes not above piece bytes. */
static wsync_status_t get_delta(const json_t *d, wsync_engine_report_t *out)
{
    if (!json_is_object(d))
        return wsync_error(WSYNC_ERR_FORMAT, "engine report: field 'delta' must be an object");
    WSYNC_CHECK(get_int(d, "pieces", 1, WSYNC_REPORT_MAX_BYTES, &out->delta.pieces));
    WSYNC_CHECK(get_int(d, "wire_bytes", 1, WSYNC_REPORT_MAX_BYTES, &out->delta.wire_bytes));
    WSYNC_CHECK(get_int(d, "piece_bytes", 1, WSYNC_REPORT_MAX_BYTES, &out->delta.piece_bytes));
    WSYNC_CHECK(get_int(d, "refetched", 1, WSYNC_REPORT_MAX_BYTES, &out->delta.refetched));
    if (out->delta.wire_bytes > out->delta.piece_bytes)
        return wsync_error(WSYNC_ERR_FORMAT, "engine report: field 'delta': 'wire_bytes' must not exceed "
                                             "'piece_bytes'");
    out->has_delta = 1;
    return WSYNC_OK;
}

wsync_status_t wsync_engine_report_from_json(const json_t *j, wsync_engine_report_t *out)
{
    const json_t *dur;
    uint64_t holds = 0;
    int state = 0, phase = 0;
    memset(out, 0, sizeof(*out));
    out->holds = -1;
    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "engine report: not a JSON object");
    WSYNC_CHECK(get_int(j, "version", 1, WSYNC_REPORT_MAX_VERSION, &out->version));
    WSYNC_CHECK(get_name(j, "state", state_names, 4, "pulling, ready, failed or exited", &state));
    out->state = (wsync_report_state_t)state;
    dur = json_object_get(j, "duration_s");
    if (dur && (!json_is_number(dur) || !isfinite(json_number_value(dur)) || json_number_value(dur) < 0 ||
                json_number_value(dur) > WSYNC_REPORT_MAX_DURATION_S))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "engine report: field 'duration_s' must be a finite number from 0 to %g",
                           WSYNC_REPORT_MAX_DURATION_S);
    out->duration_s = dur ? json_number_value(dur) : 0;
    WSYNC_CHECK(get_int(j, "bytes", 0, WSYNC_REPORT_MAX_BYTES, &out->bytes));
    if (json_object_get(j, "phase")) {
        WSYNC_CHECK(get_name(j, "phase", phase_names, 3, "setup or landing (a progress note)", &phase));
        if (out->state != WSYNC_REPORT_PULLING)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "engine report: field 'phase' (a progress note) needs state pulling");
        out->phase = (wsync_report_phase_t)phase;
    }
    WSYNC_CHECK(get_int(j, "total", 0, WSYNC_REPORT_MAX_BYTES, &out->total));
    if (json_object_get(j, "holds")) {
        WSYNC_CHECK(get_int(j, "holds", 1, WSYNC_REPORT_MAX_VERSION, &holds));
        out->holds = (int64_t)holds;
    }
    WSYNC_CHECK(get_text(j, "error", &out->has_error, out->error, sizeof(out->error)));
    if (json_object_get(j, "delta"))
        WSYNC_CHECK(get_delta(json_object_get(j, "delta"), out));
    if (json_string_length(json_object_get(j, "node")) >= sizeof(out->node))
        return wsync_error(WSYNC_ERR_FORMAT, "engine report: field 'node' must be a string of at most %zu bytes",
                           sizeof(out->node) - 1);
    return get_text(j, "node", &out->has_node, out->node, sizeof(out->node));
}
