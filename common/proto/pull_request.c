/* pull_request.c: the engine -> trainer pull request, to and from JSON. */
#include "common/proto/pull_request.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/proto/msg.h"
#include "common/model/plan.h"

#define MAX_TARGET_CHUNKS (1u << 18) /* the node board's bound */
#define MAX_HINT_WORLD 65536

int wsync_pull_request_delta_to_json(const wsync_pull_request_t *r, json_t *j)
{
    if (r->base == 0)
        return 0;
    if (json_object_set_new(j, "base", json_integer((json_int_t)r->base)) != 0 ||
        json_object_set_new(j, "delta_key", wsync_blob_to_json(&r->delta_key)) != 0 ||
        json_object_set_new(j, "delta_at", json_integer((json_int_t)r->delta_at)) != 0 ||
        json_object_set_new(j, "delta_bytes", json_integer((json_int_t)r->delta_bytes)) != 0)
        return -1;
    return 0;
}

json_t *wsync_pull_request_to_json(const wsync_pull_request_t *r)
{
    json_t *j = json_pack("{s:I, s:s, s:i, s:i, s:I, s:s, s:o, s:o, s:s, s:I}", "version", (json_int_t)r->version,
                          "engine", r->engine, "local_rank", r->local_rank, "local_ranks", r->local_ranks, "req",
                          (json_int_t)r->req, "transport", r->transport, "addr", wsync_blob_to_json(&r->addr),
                          "key", wsync_blob_to_json(&r->key), "layout_digest", r->layout_digest, "timeout_ms",
                          (json_int_t)r->timeout_ms);
    if (j && ((r->in_order && json_object_set_new(j, "in_order", json_true()) != 0) ||
              (r->put_digests && json_object_set_new(j, "put_digests", json_true()) != 0) ||
              (r->no_segment_digests && json_object_set_new(j, "no_segment_digests", json_true()) != 0))) {
        json_decref(j);
        return NULL;
    }
    if (j && wsync_pull_request_delta_to_json(r, j) != 0) {
        json_decref(j);
        return NULL;
    }
    if (j && r->chunks && json_object_set_new(j, "chunks", wsync_hex_to_json(r->chunks, r->chunk_bytes)) != 0) {
        json_decref(j);
        return NULL;
    }
    if (j && r->ntargets > 0) {
        json_t *arr = json_array();
        int k;
        for (k = 0; arr && k < r->ntargets; k++)
            json_array_append_new(arr, json_string(r->targets[k]));
        if (arr == NULL || json_object_set_new(j, "targets", arr) != 0 ||
            (r->target_defs && json_object_set(j, "target_defs", r->target_defs) != 0)) {
            json_decref(j);
            return NULL;
        }
    }
    if (j && r->ntargets > 0 && r->hint_world > 0) {
        json_t *hint = json_array();
        int t, k;
        for (t = 0; hint && t < r->hint_world; t++) {
            json_t *one = json_array();
            for (k = 0; one && k < r->ncolo[t]; k++)
                json_array_append_new(one, json_integer(r->colo[t * r->local_ranks + k]));
            json_array_append_new(hint, one);
        }
        if (hint == NULL || json_object_set_new(j, "land_hint", hint) != 0) {
            json_decref(j);
            return NULL;
        }
    }
    return j;
}

/* A string field that fits `cap` bytes with its terminator. */
static wsync_status_t get_string(const json_t *j, const char *field, char *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(j, field));
    if (s == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: field '%s' must be a string", field);
    if (strlen(s) >= cap || s[0] == '\0')
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: field '%s' must have 1 to %zu characters", field,
                           cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return WSYNC_OK;
}

/* An integer field in [lo, hi]. */
static wsync_status_t get_int(const json_t *j, const char *field, json_int_t lo, json_int_t hi, json_int_t *out)
{
    const json_t *v = json_object_get(j, field);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: field '%s' must be an integer in [%lld, %lld]", field,
                           (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return WSYNC_OK;
}

/* "targets": one 32-hex-digit digest per local rank; "target_defs": an
 * object of target JSON objects keyed by digest. */
/* An optional true/false field; absent: 0. */
static wsync_status_t get_bool(const json_t *j, const char *field, int *out)
{
    const json_t *v = json_object_get(j, field);
    if (v && !json_is_boolean(v))
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: field '%s' must be true or false", field);
    *out = json_is_true(v);
    return WSYNC_OK;
}

static wsync_status_t get_targets(const json_t *j, wsync_pull_request_t *out)
{
    const json_t *arr = json_object_get(j, "targets"), *defs = json_object_get(j, "target_defs"), *e;
    size_t k;
    if (!json_is_array(arr) || json_array_size(arr) != (size_t)out->local_ranks)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull request: field 'targets' must be an array of %d target digests "
                           "(one per local rank)",
                           out->local_ranks);
    out->targets = calloc((size_t)out->local_ranks, sizeof(*out->targets));
    WSYNC_CHECK_ALLOC(out->targets);
    out->ntargets = out->local_ranks;
    json_array_foreach(arr, k, e)
    {
        const char *d = json_string_value(e);
        if (d == NULL || strlen(d) != 32 || strspn(d, "0123456789abcdef") != 32) {
            wsync_pull_request_clear(out);
            return wsync_error(WSYNC_ERR_FORMAT,
                               "pull request: field 'targets' entry %zu must be 32 lowercase hex "
                               "digits",
                               k);
        }
        memcpy(out->targets[k], d, 33);
    }
    if (defs && !json_is_object(defs)) {
        wsync_pull_request_clear(out);
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull request: field 'target_defs' must be an object of targets by digest");
    }
    if (defs)
        out->target_defs = json_incref((json_t *)defs);
    return WSYNC_OK;
}

/* "land_hint": per trainer rank, the local ranks on its GPU. */
static wsync_status_t get_hint(const json_t *j, wsync_pull_request_t *out)
{
    const json_t *hint = json_object_get(j, "land_hint"), *one, *e;
    const int L = out->local_ranks;
    size_t t, k, world = json_array_size(hint);
    if (!json_is_array(hint) || world == 0 || world > MAX_HINT_WORLD)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull request: field 'land_hint' must be an array of 1 to %d arrays "
                           "(one per trainer rank)",
                           MAX_HINT_WORLD);
    out->colo = calloc(world * (size_t)L, sizeof(*out->colo));
    out->ncolo = calloc(world, sizeof(*out->ncolo));
    if (out->colo == NULL || out->ncolo == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    out->hint_world = (int)world;
    json_array_foreach(hint, t, one)
    {
        if (!json_is_array(one) || json_array_size(one) > (size_t)L)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "pull request: field 'land_hint' entry %zu must be an array of at "
                               "most %d local ranks",
                               t, L);
        json_array_foreach(one, k, e)
        {
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= L)
                return wsync_error(WSYNC_ERR_FORMAT,
                                   "pull request: field 'land_hint' entry %zu holds a local rank "
                                   "outside [0, %d)",
                                   t, L);
            out->colo[t * (size_t)L + k] = (int)json_integer_value(e);
        }
        out->ncolo[t] = (int)json_array_size(one);
    }
    return WSYNC_OK;
}

/* "base" (an older version than the one asked for) and, with it, where the
 * delta wires go: "delta_key", "delta_at", "delta_bytes". */
static wsync_status_t get_delta(const json_t *j, wsync_pull_request_t *out)
{
    json_int_t v = 0;
    if (out->version < 2)
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: field 'base' must be older than version %llu",
                           (unsigned long long)out->version);
    WSYNC_CHECK(get_int(j, "base", 1, (json_int_t)out->version - 1, &v));
    out->base = (uint64_t)v;
    WSYNC_CHECK(
        wsync_blob_from_json(json_object_get(j, "delta_key"), "pull request: field 'delta_key'", &out->delta_key));
    WSYNC_CHECK(get_int(j, "delta_at", 0, INT64_MAX, &v));
    out->delta_at = (uint64_t)v;
    WSYNC_CHECK(get_int(j, "delta_bytes", 0, INT64_MAX - (json_int_t)out->delta_at, &v));
    out->delta_bytes = (uint64_t)v;
    return WSYNC_OK;
}

wsync_status_t wsync_pull_request_from_json(const json_t *j, uint32_t nchunks, wsync_pull_request_t *out)
{
    const json_t *cj;
    json_int_t v = 0;
    memset(out, 0, sizeof(*out));
    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "pull request: not a JSON object");
    WSYNC_CHECK(get_int(j, "version", 1, INT64_MAX, &v));
    out->version = (uint64_t)v;
    WSYNC_CHECK(get_string(j, "engine", out->engine, sizeof(out->engine)));
    WSYNC_CHECK(get_int(j, "local_ranks", 1, 1 << 16, &v));
    out->local_ranks = (int)v;
    WSYNC_CHECK(get_int(j, "local_rank", 0, out->local_ranks - 1, &v));
    out->local_rank = (int)v;
    WSYNC_CHECK(get_int(j, "req", 1, 0x7fffffff, &v));
    out->req = (uint32_t)v;
    WSYNC_CHECK(get_string(j, "transport", out->transport, sizeof(out->transport)));
    WSYNC_CHECK(wsync_blob_from_json(json_object_get(j, "addr"), "pull request: field 'addr'", &out->addr));
    WSYNC_CHECK(wsync_blob_from_json(json_object_get(j, "key"), "pull request: field 'key'", &out->key));
    WSYNC_CHECK(get_string(j, "layout_digest", out->layout_digest, sizeof(out->layout_digest)));
    if (json_object_get(j, "timeout_ms")) {
        WSYNC_CHECK(get_int(j, "timeout_ms", INT64_MIN, INT64_MAX, &v));
        out->timeout_ms = v;
    }
    /* before anything the request owns is allocated */
    WSYNC_CHECK(get_bool(j, "in_order", &out->in_order));
    WSYNC_CHECK(get_bool(j, "no_segment_digests", &out->no_segment_digests));
    WSYNC_CHECK(get_bool(j, "put_digests", &out->put_digests));
    if (json_object_get(j, "base"))
        WSYNC_CHECK(get_delta(j, out));
    if (json_object_get(j, "targets"))
        WSYNC_CHECK(get_targets(j, out));
    if (out->ntargets && json_object_get(j, "land_hint") && get_hint(j, out) != WSYNC_OK) {
        char why[300];
        snprintf(why, sizeof(why), "%s", wsync_last_error());
        wsync_pull_request_clear(out);
        return wsync_error(WSYNC_ERR_FORMAT, "%s", why);
    }
    cj = json_object_get(j, "chunks");
    if (cj) {
        /* With targets the node plan's chunk count is checked later. */
        size_t want = out->ntargets ? (size_t)MAX_TARGET_CHUNKS / 8 : ((size_t)nchunks + 7) / 8, got = 0;
        wsync_status_t st;
        out->chunks = malloc(want ? want : 1);
        if (out->chunks == NULL) {
            wsync_pull_request_clear(out);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        }
        st = wsync_hex_from_json(cj, "pull request: field 'chunks'", out->chunks, want, &got);
        if (st == WSYNC_OK && out->ntargets)
            want = got;
        if (st == WSYNC_OK && got != want)
            st = wsync_error(WSYNC_ERR_FORMAT,
                             "pull request: field 'chunks' has %zu bytes, the plan's %u chunks "
                             "need %zu",
                             got, nchunks, want);
        if (st != WSYNC_OK) {
            wsync_pull_request_clear(out);
            return st;
        }
        out->chunk_bytes = want;
    }
    return WSYNC_OK;
}

void wsync_pull_request_clear(wsync_pull_request_t *r)
{
    free(r->chunks);
    r->chunks = NULL;
    r->chunk_bytes = 0;
    free(r->targets);
    r->targets = NULL;
    r->ntargets = 0;
    json_decref(r->target_defs);
    r->target_defs = NULL;
    free(r->colo);
    free(r->ncolo);
    r->colo = r->ncolo = NULL;
    r->hint_world = 0;
}

wsync_status_t wsync_pull_request_check_chunks(const wsync_pull_request_t *r, uint32_t nchunks)
{
    if (r->chunks && r->chunk_bytes != ((size_t)nchunks + 7) / 8)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull request: field 'chunks' has %zu bytes, the plan's %u chunks "
                           "need %zu",
                           r->chunk_bytes, nchunks, ((size_t)nchunks + 7) / 8);
    return WSYNC_OK;
}

int wsync_pull_request_lands(const wsync_pull_request_t *r, uint32_t chunk)
{
    if (r->chunks == NULL)
        return wsync_plan_land_rank(NULL, chunk, r->local_ranks) == r->local_rank;
    return (size_t)chunk / 8 < r->chunk_bytes && (r->chunks[chunk / 8] >> (chunk % 8) & 1);
}
