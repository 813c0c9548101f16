/* pull_reply.c: the answer to a pull request, to and from JSON. */
#include "common/proto/pull_reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"

#define MAX_SEGMENTS (1u << 24) /* far above any target's verification segments or node plan's puts */
#define MAX_DELTAS (1u << 24)   /* far above any rank's pieces */

static int set(json_t *out, const char *key, json_t *v)
{
    return v == NULL || json_object_set_new(out, key, v) != 0 ? -1 : 0;
}

/* "base" and "deltas". */
static int write_deltas(const wsync_pull_reply_t *r, json_t *out)
{
    json_t *arr;
    size_t k;
    if (!r->has_base)
        return 0;
    if (set(out, "base", json_integer((json_int_t)r->base)) || set(out, "deltas", arr = json_array()))
        return -1;
    for (k = 0; k < r->ndeltas; k++) {
        const wsync_pull_delta_t *d = &r->deltas[k];
        json_t *e = json_pack("{s:I, s:s, s:I, s:I}", "piece", (json_int_t)d->piece, "form",
                              wsync_delta_form_name(d->form), "bytes", (json_int_t)d->bytes, "at",
                              (json_int_t)d->at);
        char hex[17];
        if (e && d->has_digest) {
            wsync_digest_hex(d->digest, hex);
            if (set(e, "digest", json_string(hex))) {
                json_decref(e);
                return -1;
            }
        }
        if (json_array_append_new(arr, e) != 0)
            return -1;
    }
    return 0;
}

wsync_status_t wsync_pull_reply_write(const wsync_pull_reply_t *r, json_t *out)
{
    int bad;
    if (r->error[0] != '\0')
        bad = set(out, "error", json_string(r->error));
    else
        bad = set(out, "ok", json_true()) || (r->segments && set(out, "segments", json_incref(r->segments))) ||
              (r->puts && set(out, "puts", json_incref(r->puts))) ||
              set(out, "pieces", json_integer((json_int_t)r->pieces)) ||
              set(out, "bytes", json_integer((json_int_t)r->bytes)) || write_deltas(r, out);
    return bad ? wsync_error(WSYNC_ERR_NOMEM, "out of memory building a pull reply") : WSYNC_OK;
}

json_t *wsync_pull_reply_to_json(const wsync_pull_reply_t *r)
{
    json_t *j = json_object();
    if (j && wsync_pull_reply_write(r, j) != WSYNC_OK) {
        json_decref(j);
        return NULL;
    }
    return j;
}

void wsync_pull_reply_write_error(json_t *out, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_object_set_new(out, "error", json_string(msg));
}

int wsync_pull_reply_add_segment(json_t *segments, uint32_t id, uint64_t digest)
{
    char hex[17], key[16];
    wsync_digest_hex(digest, hex);
    snprintf(key, sizeof(key), "%u", id);
    return set(segments, key, json_string(hex));
}

/* A count field: an integer >= 0. */
static wsync_status_t get_count(const json_t *j, const char *field, uint64_t *out)
{
    const json_t *v = json_object_get(j, field);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field '%s' must be an integer >= 0", field);
    *out = (uint64_t)json_integer_value(v);
    return WSYNC_OK;
}

/* A segment id: decimal digits of a uint32, no sign, no leading zeros. */
static int parse_id(const char *key, uint32_t *out)
{
    unsigned long long v = 0;
    size_t k, n = strlen(key);
    if (n == 0 || n > 10 || (n > 1 && key[0] == '0'))
        return -1;
    for (k = 0; k < n; k++) {
        if (key[k] < '0' || key[k] > '9')
            return -1;
        v = v * 10 + (unsigned)(key[k] - '0');
    }
    if (v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* A digests object ("segments" or "puts"): {"<id>": "<16 hex digits>"}, unpacked
 * into n ids and digests (in the object's order); *keep takes a reference. */
static wsync_status_t get_digests(const json_t *obj, const char *field, json_t **keep, uint32_t **ids,
                                  uint64_t **digests, size_t *nout)
{
    const char *key;
    json_t *val;
    size_t n = json_object_size(obj), k = 0;
    if (!json_is_object(obj) || n > MAX_SEGMENTS)
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field '%s' must be an object of at most %u digests by id",
                           field, MAX_SEGMENTS);
    *ids = calloc(n ? n : 1, sizeof(**ids));
    *digests = calloc(n ? n : 1, sizeof(**digests));
    if (*ids == NULL || *digests == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory parsing a pull reply");
    json_object_foreach((json_t *)obj, key, val)
    {
        if (parse_id(key, &(*ids)[k]) != 0)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "pull reply: field '%s' key '%.40s' must be an id (decimal, < 2^32)", field, key);
        if (wsync_digest_parse(json_string_value(val), &(*digests)[k]) != 0)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "pull reply: field '%s' entry '%s' must be a digest of 16 lowercase hex digits",
                               field, key);
        k++;
    }
    *nout = n;
    *keep = json_incref((json_t *)obj);
    return WSYNC_OK;
}

/* One "deltas" entry: an object of piece, form, bytes (> 0) and at, its
 * wire inside the staging region (at + bytes does not overflow), and
 * optionally digest (16 hex digits). */
static wsync_status_t get_delta(const json_t *e, size_t k, wsync_pull_delta_t *d)
{
    const json_t *piece = json_object_get(e, "piece"), *bytes = json_object_get(e, "bytes"),
                 *at = json_object_get(e, "at"), *dig = json_object_get(e, "digest");
    const char *form = json_string_value(json_object_get(e, "form"));
    uint64_t digest = 0;
    if (!json_is_object(e) || !json_is_integer(piece) || json_integer_value(piece) < 0 ||
        json_integer_value(piece) >= 0x80000000LL)
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field 'deltas' entry %zu: 'piece' must be a piece id", k);
    if (form == NULL || (strcmp(form, "bitmap") != 0 && strcmp(form, "pairs") != 0))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull reply: field 'deltas' entry %zu: 'form' must be bitmap or pairs", k);
    if (!json_is_integer(bytes) || json_integer_value(bytes) < WSYNC_DELTA_HEADER || !json_is_integer(at) ||
        json_integer_value(at) < 0 || json_integer_value(at) > INT64_MAX - json_integer_value(bytes))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull reply: field 'deltas' entry %zu: 'bytes' must be an integer >= %u and 'at' "
                           "an offset >= 0",
                           k, WSYNC_DELTA_HEADER);
    if (dig && (!json_is_string(dig) || strlen(json_string_value(dig)) != 16 ||
                wsync_digest_parse(json_string_value(dig), &digest) != 0))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "pull reply: field 'deltas' entry %zu: 'digest' must be 16 hex digits", k);
    *d = (wsync_pull_delta_t){.piece = (uint32_t)json_integer_value(piece),
                              .has_digest = dig != NULL,
                              .digest = digest,
                              .form = strcmp(form, "bitmap") == 0 ? WSYNC_DELTA_BITMAP : WSYNC_DELTA_PAIRS,
                              .bytes = (uint64_t)json_integer_value(bytes),
                              .at = (uint64_t)json_integer_value(at)};
    return WSYNC_OK;
}

static wsync_status_t get_deltas(const json_t *j, wsync_pull_reply_t *out)
{
    const json_t *arr = json_object_get(j, "deltas"), *e;
    size_t k;
    WSYNC_CHECK(get_count(j, "base", &out->base));
    out->has_base = 1;
    if (!json_is_array(arr) || json_array_size(arr) > MAX_DELTAS)
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field 'deltas' must be an array of at most %u pieces",
                           MAX_DELTAS);
    if (json_array_size(arr) > 0 && out->base == 0)
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field 'deltas' lists pieces but field 'base' is 0");
    out->deltas = calloc(json_array_size(arr) + 1, sizeof(*out->deltas));
    if (out->deltas == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory parsing a pull reply");
    json_array_foreach(arr, k, e)
    {
        WSYNC_CHECK(get_delta(e, k, &out->deltas[k]));
        out->ndeltas++;
    }
    return WSYNC_OK;
}

static wsync_status_t parse(const json_t *j, wsync_pull_reply_t *out)
{
    const json_t *err = json_object_get(j, "error"), *segs, *puts;
    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: not a JSON object");
    if (err) {
        const char *s = json_string_value(err);
        if (s == NULL || s[0] == '\0')
            return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field 'error' must be a non-empty string");
        snprintf(out->error, sizeof(out->error), "%s", s);
        return WSYNC_OK;
    }
    if (!json_is_true(json_object_get(j, "ok")))
        return wsync_error(WSYNC_ERR_FORMAT, "pull reply: field 'ok' must be true (or field 'error' say why not)");
    WSYNC_CHECK(get_count(j, "pieces", &out->pieces));
    WSYNC_CHECK(get_count(j, "bytes", &out->bytes));
    segs = json_object_get(j, "segments");
    if (segs)
        WSYNC_CHECK(get_digests(segs, "segments", &out->segments, &out->segment_ids, &out->segment_digests,
                                &out->nsegments));
    puts = json_object_get(j, "puts");
    if (puts)
        WSYNC_CHECK(get_digests(puts, "puts", &out->puts, &out->put_ids, &out->put_digests, &out->nputs));
    return json_object_get(j, "base") || json_object_get(j, "deltas") ? get_deltas(j, out) : WSYNC_OK;
}

wsync_status_t wsync_pull_reply_from_json(const json_t *j, wsync_pull_reply_t *out)
{
    wsync_status_t st;
    memset(out, 0, sizeof(*out));
    st = parse(j, out);
    if (st != WSYNC_OK)
        wsync_pull_reply_clear(out);
    return st;
}

void wsync_pull_reply_clear(wsync_pull_reply_t *r)
{
    json_decref(r->segments);
    free(r->segment_ids);
    free(r->segment_digests);
    r->segments = NULL;
    r->segment_ids = NULL;
    r->segment_digests = NULL;
    r->nsegments = 0;
    json_decref(r->puts);
    free(r->put_ids);
    free(r->put_digests);
    r->puts = NULL;
    r->put_ids = NULL;
    r->put_digests = NULL;
    r->nputs = 0;
    free(r->deltas);
    r->deltas = NULL;
    r->ndeltas = 0;
}
