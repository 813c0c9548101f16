/* version_record.c: the control endpoint's version record, to and from JSON. */
#include "common/proto/version_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

static json_t *piece_json(const wsync_record_piece_t *p)
{
    json_t *j = json_pack("{s:I, s:I, s:I}", "id", (json_int_t)p->id, "offset", (json_int_t)p->offset, "len",
                          (json_int_t)p->len);
    if (j && p->digest[0] && json_object_set_new(j, "digest", json_string(p->digest)) != 0) {
        json_decref(j);
        return NULL;
    }
    if (j && json_object_set_new(j, "rank", json_integer(p->rank)) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *wsync_version_record_to_json(const wsync_version_record_t *r)
{
    json_t *pieces = json_array(), *trainers = json_array(), *j;
    size_t i;
    int ok = pieces && trainers;
    for (i = 0; ok && i < r->npieces; i++)
        ok = json_array_append_new(pieces, piece_json(&r->pieces[i])) == 0;
    for (i = 0; ok && i < (size_t)r->ntrainers; i++)
        ok = json_array_append_new(trainers, json_pack("{s:i, s:O}", "rank", r->trainers[i].rank, "endpoint",
                                                       r->trainers[i].endpoint)) == 0;
    if (!ok) {
        json_decref(pieces);
        json_decref(trainers);
        return NULL;
    }
    j = json_pack("{s:s, s:I, s:s, s:s, s:I, s:i, s:I, s:o, s:o, s:f}", "manifest_digest", r->manifest_digest,
                  "chunk_size", (json_int_t)r->chunk_size, "layout", r->layout, "layout_digest", r->layout_digest,
                  "image_size", (json_int_t)r->image_size, "world", r->world, "version", (json_int_t)r->version,
                  "pieces", pieces, "trainers", trainers, "published_at", r->published_at);
    if (j && r->digests_pending &&
        json_object_set_new(j, "digests_pending", json_integer((json_int_t)r->digests_pending)) != 0) {
        json_decref(j);
        return NULL;
    }
    if (j && r->manifest && json_object_set(j, "manifest", r->manifest) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* A string field that fits `cap` bytes with its terminator, not empty. */
static wsync_status_t get_string(const json_t *j, const char *what, const char *field, char *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(j, field));
    if (s == NULL || s[0] == '\0' || strlen(s) >= cap)
        return wsync_error(WSYNC_ERR_FORMAT, "version record: %s'%s' must be a string of 1 to %zu characters",
                           what, field, cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return WSYNC_OK;
}

/* An integer field in [lo, hi]. */
static wsync_status_t get_int(const json_t *j, const char *what, const char *field, long long lo, long long hi,
                              long long *out)
{
    const json_t *v = json_object_get(j, field);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return wsync_error(WSYNC_ERR_FORMAT, "version record: %s'%s' must be an integer from %lld to %lld", what,
                           field, lo, hi);
    *out = (long long)json_integer_value(v);
    return WSYNC_OK;
}

static wsync_status_t get_piece(const json_t *e, size_t i, int world, wsync_record_piece_t *p)
{
    char what[48];
    long long v = 0;
    const json_t *d = json_object_get(e, "digest");
    snprintf(what, sizeof(what), "pieces[%zu].", i);
    if (!json_is_object(e))
        return wsync_error(WSYNC_ERR_FORMAT, "version record: pieces[%zu] must be an object", i);
    WSYNC_CHECK(get_int(e, what, "id", 0, 0x7fffffff, &v));
    p->id = (uint32_t)v;
    WSYNC_CHECK(get_int(e, what, "offset", 0, WSYNC_RECORD_MAX_BYTES, &v));
    p->offset = (uint64_t)v;
    WSYNC_CHECK(get_int(e, what, "len", 0, WSYNC_RECORD_MAX_BYTES, &v));
    p->len = (uint64_t)v;
    WSYNC_CHECK(get_int(e, what, "rank", 0, world - 1, &v));
    p->rank = (int)v;
    p->digest[0] = '\0';
    if (d)
        WSYNC_CHECK(get_string(e, what, "digest", p->digest, sizeof(p->digest)));
    return WSYNC_OK;
}

static wsync_status_t get_pieces(const json_t *j, wsync_version_record_t *out)
{
    const json_t *arr = json_object_get(j, "pieces"), *e;
    size_t i;
    if (!json_is_array(arr) || json_array_size(arr) > WSYNC_RECORD_MAX_PIECES)
        return wsync_error(WSYNC_ERR_FORMAT, "version record: 'pieces' must be an array of at most %d pieces",
                           WSYNC_RECORD_MAX_PIECES);
    out->npieces = json_array_size(arr);
    out->pieces = calloc(out->npieces ? out->npieces : 1, sizeof(*out->pieces));
    WSYNC_CHECK_ALLOC(out->pieces);
    json_array_foreach(arr, i, e)
    {
        WSYNC_CHECK(get_piece(e, i, out->world, &out->pieces[i]));
        if (i > 0 && out->pieces[i].id < out->pieces[i - 1].id)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "version record: pieces[%zu].'id' (%u) must not be below the one before it (%u): "
                               "pieces are sorted by id",
                               i, out->pieces[i].id, out->pieces[i - 1].id);
        out->digests_pending += out->pieces[i].digest[0] == '\0';
    }
    return WSYNC_OK;
}

static wsync_status_t get_trainers(const json_t *j, wsync_version_record_t *out)
{
    const json_t *arr = json_object_get(j, "trainers"), *e;
    size_t i;
    if (arr == NULL)
        return WSYNC_OK; /* records from before the endpoints came with them */
    if (!json_is_array(arr) || json_array_size(arr) > (size_t)out->world)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "version record: 'trainers' must be an array of at most 'world' (%d) trainer ranks",
                           out->world);
    out->trainers = calloc(json_array_size(arr) + 1, sizeof(*out->trainers));
    WSYNC_CHECK_ALLOC(out->trainers);
    json_array_foreach(arr, i, e)
    {
        char what[48];
        long long rank = 0;
        snprintf(what, sizeof(what), "trainers[%zu].", i);
        WSYNC_CHECK(get_int(e, what, "rank", 0, out->world - 1, &rank));
        if (!json_is_object(json_object_get(e, "endpoint")))
            return wsync_error(WSYNC_ERR_FORMAT, "version record: trainers[%zu].'endpoint' must be an object", i);
        out->trainers[i].rank = (int)rank;
        out->trainers[i].endpoint = json_incref(json_object_get(e, "endpoint"));
        out->ntrainers = (int)i + 1;
    }
    return WSYNC_OK;
}

static wsync_status_t parse(const json_t *j, wsync_version_record_t *out)
{
    const json_t *at = json_object_get(j, "published_at"), *manifest = json_object_get(j, "manifest");
    long long v = 0;
    if (!json_is_object(j))
        return wsync_error(WSYNC_ERR_FORMAT, "version record: not a JSON object");
    WSYNC_CHECK(get_int(j, "", "version", 1, WSYNC_RECORD_MAX_VERSION, &v));
    out->version = (uint64_t)v;
    WSYNC_CHECK(get_string(j, "", "manifest_digest", out->manifest_digest, sizeof(out->manifest_digest)));
    WSYNC_CHECK(get_int(j, "", "chunk_size", 1, 1LL << 40, &v));
    out->chunk_size = (uint64_t)v;
    WSYNC_CHECK(get_string(j, "", "layout", out->layout, sizeof(out->layout)));
    WSYNC_CHECK(get_string(j, "", "layout_digest", out->layout_digest, sizeof(out->layout_digest)));
    WSYNC_CHECK(get_int(j, "", "image_size", 0, WSYNC_RECORD_MAX_BYTES, &v));
    out->image_size = (uint64_t)v;
    WSYNC_CHECK(get_int(j, "", "world", 1, WSYNC_RECORD_MAX_WORLD, &v));
    out->world = (int)v;
    if (at && (!json_is_number(at) || !isfinite(json_number_value(at)) || json_number_value(at) < 0))
        return wsync_error(WSYNC_ERR_FORMAT, "version record: 'published_at' must be a finite number from 0 (unix "
                                             "time)");
    out->published_at = at ? json_number_value(at) : 0;
    if (manifest && !json_is_object(manifest))
        return wsync_error(WSYNC_ERR_FORMAT, "version record: 'manifest' must be an object when present");
    out->manifest = manifest ? json_incref((json_t *)manifest) : NULL;
    WSYNC_CHECK(get_pieces(j, out));
    return get_trainers(j, out);
}

wsync_status_t wsync_version_record_from_json(const json_t *j, wsync_version_record_t *out)
{
    wsync_status_t st;
    memset(out, 0, sizeof(*out));
    st = parse(j, out);
    if (st != WSYNC_OK)
        wsync_version_record_clear(out);
    return st;
}

void wsync_version_record_clear(wsync_version_record_t *r)
{
    int i;
    if (r == NULL)
        return;
    free(r->pieces);
    for (i = 0; r->trainers && i < r->ntrainers; i++)
        json_decref(r->trainers[i].endpoint);
    free(r->trainers);
    json_decref(r->manifest);
    memset(r, 0, sizeof(*r));
}

int wsync_version_record_copy(const wsync_version_record_t *r, wsync_version_record_t *out)
{
    int i;
    *out = *r;
    out->pieces = malloc((r->npieces ? r->npieces : 1) * sizeof(*out->pieces));
    out->trainers = calloc((size_t)r->ntrainers + 1, sizeof(*out->trainers));
    if (out->pieces == NULL || out->trainers == NULL) {
        free(out->pieces);
        free(out->trainers);
        memset(out, 0, sizeof(*out));
        return -1;
    }
    memcpy(out->pieces, r->pieces, r->npieces * sizeof(*out->pieces));
    for (i = 0; i < r->ntrainers; i++) {
        out->trainers[i].rank = r->trainers[i].rank;
        out->trainers[i].endpoint = json_incref(r->trainers[i].endpoint); /* never changed in place */
    }
    json_incref(out->manifest);
    return 0;
}

size_t wsync_version_record_count_late(const wsync_version_record_t *r)
{
    size_t i, n = 0;
    for (i = 0; i < r->npieces; i++)
        n += r->pieces[i].digest[0] == '\0';
    return n;
}

wsync_record_piece_t *wsync_version_record_piece(const wsync_version_record_t *r, uint32_t id)
{
    size_t lo = 0, hi = r->npieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->pieces[mid].id == id)
            return &r->pieces[mid];
        if (r->pieces[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
