/* sync_layout.c: manifest + layout + plan of a version, and their JSON. */
#include "common/control/sync_layout.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"

static const char *kind_name(int kind)
{
    return kind == 1 ? "fsdp" : "even";
}

static void layout_digest(wsync_sync_layout_t *sl)
{
    XXH3_state_t *st = XXH3_createState();
    uint64_t head[3] = {(uint64_t)sl->kind, (uint64_t)sl->world, sl->plan->chunk_size};
    int r;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, head, sizeof(head));
    for (r = 0; r < sl->layout->world; r++) {
        uint64_t n = sl->layout->nextents[r];
        XXH3_64bits_update(st, &n, sizeof(n));
        XXH3_64bits_update(st, sl->layout->extents[r], n * sizeof(wsync_extent_t));
    }
    wsync_digest_hex(XXH3_64bits_digest(st), sl->layout_digest);
    XXH3_freeState(st);
}

wsync_status_t wsync_sync_layout_build(wsync_manifest_t *manifest, int kind, int world, uint64_t chunk_size,
                                       wsync_sync_layout_t **out)
{
    wsync_sync_layout_t *sl = calloc(1, sizeof(*sl));
    wsync_status_t st;

    if (sl == NULL) {
        wsync_manifest_free(manifest);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    sl->manifest = manifest;
    sl->kind = kind;
    sl->world = world;
    wsync_manifest_digest(manifest, sl->manifest_digest);
    if (kind == 1)
        WSYNC_CHECK_GOTO(wsync_layout_fsdp(manifest, world, &sl->layout), st, err);
    else if (kind == 0)
        WSYNC_CHECK_GOTO(wsync_layout_even(manifest->image_size, world, &sl->layout), st, err);
    else
        WSYNC_CHECK_GOTO(wsync_error(WSYNC_ERR_INVALID, "unknown layout kind %d", kind), st, err);
    WSYNC_CHECK_GOTO(wsync_plan_build(sl->layout, chunk_size ? chunk_size : WSYNC_DEFAULT_CHUNK, &sl->plan), st,
                     err);
    layout_digest(sl);
    *out = sl;
    return WSYNC_OK;
err:
    wsync_sync_layout_free(sl);
    return st;
}

void wsync_sync_layout_free(wsync_sync_layout_t *sl)
{
    if (sl == NULL)
        return;
    wsync_plan_free(sl->plan);
    wsync_layout_free(sl->layout);
    wsync_manifest_free(sl->manifest);
    free(sl);
}

json_t *wsync_sync_layout_to_json(const wsync_sync_layout_t *sl, int with_manifest)
{
    json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:I, s:i}", "manifest_digest", sl->manifest_digest, "chunk_size",
                          (json_int_t)sl->plan->chunk_size, "layout", kind_name(sl->kind), "layout_digest",
                          sl->layout_digest, "image_size", (json_int_t)sl->manifest->image_size, "world", sl->world);
    if (j && with_manifest) {
        json_t *m = NULL;
        if (wsync_manifest_to_json(sl->manifest, &m) != WSYNC_OK) {
            json_decref(j);
            return NULL;
        }
        json_object_set_new(j, "manifest", m);
    }
    return j;
}

wsync_status_t wsync_sync_layout_fetch(wsync_control_t *c, const wsync_version_record_t *v, wsync_sync_layout_t **out)
{
    json_t *manifest = NULL;
    wsync_status_t st;
    if (v->manifest)
        return wsync_sync_layout_from_record(v, NULL, out);
    WSYNC_CHECK(wsync_control_get_layout(c, v->manifest_digest, &manifest));
    st = wsync_sync_layout_from_record(v, manifest, out);
    json_decref(manifest);
    return st;
}

wsync_status_t wsync_sync_layout_from_record(const wsync_version_record_t *v, const json_t *manifest,
                                             wsync_sync_layout_t **out)
{
    wsync_manifest_t *m = NULL;
    wsync_sync_layout_t *sl = NULL;
    int k;

    if (strcmp(v->layout, "even") == 0)
        k = 0;
    else if (strcmp(v->layout, "fsdp") == 0)
        k = 1;
    else
        return wsync_error(WSYNC_ERR_FORMAT, "version record %llu: unknown layout '%s' (even or fsdp)",
                           (unsigned long long)v->version, v->layout);
    WSYNC_CHECK(wsync_manifest_from_json(manifest ? manifest : v->manifest, &m));
    WSYNC_CHECK(wsync_sync_layout_build(m, k, v->world, v->chunk_size, &sl));
    if (strcmp(sl->manifest_digest, v->manifest_digest) != 0 || strcmp(sl->layout_digest, v->layout_digest) != 0) {
        wsync_sync_layout_free(sl);
        return wsync_error(WSYNC_ERR_CONFLICT,
                           "version record: manifest or layout digest does not match its contents "
                           "(trainer and engine disagree on the layout rules; same wsync version?)");
    }
    *out = sl;
    return WSYNC_OK;
}

wsync_status_t wsync_sync_layout_digests(const wsync_sync_layout_t *sl, const wsync_version_record_t *v,
                                         uint64_t **digests, size_t *missing)
{
    const wsync_plan_t *p = sl->plan;
    uint64_t *d;
    char *seen;
    size_t i;

    if (v->npieces != p->npieces)
        return wsync_error(WSYNC_ERR_FORMAT, "version record %llu has %zu pieces, the plan has %zu",
                           (unsigned long long)v->version, v->npieces, p->npieces);
    d = calloc(p->npieces ? p->npieces : 1, sizeof(*d));
    seen = calloc(p->npieces ? p->npieces : 1, 1);
    if (missing)
        *missing = 0;
    if (d == NULL || seen == NULL) {
        free(d);
        free(seen);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (i = 0; i < p->npieces; i++) {
        const wsync_record_piece_t *e = &v->pieces[i];
        int late = e->digest[0] == '\0' && missing;
        if ((size_t)e->id >= p->npieces || seen[e->id] || e->offset != p->pieces[e->id].offset ||
            e->len != p->pieces[e->id].len || (!late && wsync_digest_parse(e->digest, &d[e->id]) != 0)) {
            free(d);
            free(seen);
            return wsync_error(WSYNC_ERR_FORMAT,
                               "version record %llu: piece %u (offset %llu, %llu bytes, digest '%s') does not "
                               "match the plan",
                               (unsigned long long)v->version, e->id, (unsigned long long)e->offset,
                               (unsigned long long)e->len, e->digest);
        }
        seen[e->id] = 1;
        if (late)
            (*missing)++;
    }
    free(seen);
    *digests = d;
    return WSYNC_OK;
}
