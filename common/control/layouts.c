/* layouts.c: the control endpoint's layouts, content-addressed: a manifest
 * is posted once per layout under its digest (POST /v1/layouts/<digest>)
 * and every version names it by that digest, so what travels and is parsed
 * per version no longer grows with the tensor count (a manifest of 100k
 * tensors is ~10 MB of JSON). Layouts that no retained or pending version
 * names are kept, newest first, up to CTL_LAYOUTS_SPARE; older ones go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/model/manifest.h"
#include "common/control/model.h"
#include "common/control/validate.h"

int ctl_layout_digest_ok(const char *d)
{
    size_t i;
    if (d == NULL || strlen(d) != 32)
        return 0;
    for (i = 0; i < 32; i++)
        if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
            return 0;
    return 1;
}

static ctl_layout_t *find(const ctl_model_t *m, const char *digest)
{
    int i;
    for (i = 0; i < m->nlayouts; i++)
        if (strcmp(m->layouts[i].digest, digest) == 0)
            return &m->layouts[i];
    return NULL;
}

int ctl_layout_known_locked(const ctl_model_t *m, const char *digest)
{
    return digest && find(m, digest) != NULL;
}

/* Is the layout named by a retained record or a pending version? */
static int referenced(const ctl_model_t *m, const char *digest)
{
    int i;
    for (i = 0; i < m->nrecords; i++) {
        if (strcmp(m->records[i].rec.manifest_digest, digest) == 0)
            return 1;
    }
    for (i = 0; i < m->npending; i++) {
        if (strcmp(m->pending[i].head.manifest_digest, digest) == 0)
            return 1;
    }
    return 0;
}

static void drop(ctl_model_t *m, int i)
{
    if (m->ndropped < CTL_MAX_DROPPED)
        memcpy(m->dropped[m->ndropped++], m->layouts[i].digest, 33);
    LOG_INFO("layout %s dropped: no retained version names it", m->layouts[i].digest);
    json_decref(m->layouts[i].doc);
    m->layouts[i] = m->layouts[--m->nlayouts];
}

void ctl_layouts_trim_locked(ctl_model_t *m)
{
    for (;;) {
        int i, spare = 0, oldest = -1;
        for (i = 0; i < m->nlayouts; i++)
            if (!referenced(m, m->layouts[i].digest)) {
                spare++;
                if (oldest < 0 || m->layouts[i].seq < m->layouts[oldest].seq)
                    oldest = i;
            }
        if (spare <= CTL_LAYOUTS_SPARE)
            return;
        drop(m, oldest);
    }
}

int ctl_layout_add_locked(ctl_model_t *m, const char *digest, json_t *manifest, int saved)
{
    ctl_layout_t *l;
    if (find(m, digest))
        return 0;
    if (m->nlayouts == m->cap_layouts) {
        int cap = m->cap_layouts ? 2 * m->cap_layouts : 8;
        ctl_layout_t *nl = realloc(m->layouts, (size_t)cap * sizeof(*nl));
        if (nl == NULL)
            return -1;
        m->layouts = nl;
        m->cap_layouts = cap;
    }
    l = &m->layouts[m->nlayouts];
    memset(l, 0, sizeof(*l));
    snprintf(l->digest, sizeof(l->digest), "%s", digest);
    l->doc = json_pack("{s:s, s:O}", "digest", digest, "manifest", manifest);
    if (l->doc == NULL)
        return -1;
    l->seq = ++m->layout_seq;
    l->saved = saved;
    m->nlayouts++;
    m->gen++;
    ctl_layouts_trim_locked(m);
    return 0;
}

int ctl_put_layout(ctl_model_t *m, const char *digest, const json_t *body, json_t **reply, char *err,
                   size_t errlen, int *changed)
{
    json_t *manifest = json_object_get(body, "manifest");
    wsync_manifest_t *man = NULL;
    char actual[33];
    int code = ctl_check(body, &ctl_req_layout, err, errlen), known;

    if (code)
        return code;
    if (!ctl_layout_digest_ok(digest)) {
        snprintf(err, errlen,
                 "layout digest '%.40s' must be 32 lowercase hex digits (the manifest's digest, as "
                 "wsync inspect prints it)",
                 digest ? digest : "");
        return 422;
    }
    pthread_mutex_lock(&m->lock);
    known = find(m, digest) != NULL;
    pthread_mutex_unlock(&m->lock);
    if (!known) {
        /* Content-addressed: the manifest must be valid and carry this digest.
         * O(tensors), once per layout, outside the lock. */
        if (wsync_manifest_from_json(manifest, &man) != WSYNC_OK) {
            snprintf(err, errlen, "field 'manifest': %s", wsync_last_error());
            return 422;
        }
        wsync_manifest_digest(man, actual);
        wsync_manifest_free(man);
        if (strcmp(actual, digest) != 0) {
            snprintf(err, errlen, "field 'manifest' has digest %s, not the %s it is posted under", actual, digest);
            return 422;
        }
        pthread_mutex_lock(&m->lock);
        known = find(m, digest) != NULL; /* another post of it may have won the race */
        if (!known && ctl_layout_add_locked(m, digest, manifest, 0) != 0) {
            pthread_mutex_unlock(&m->lock);
            snprintf(err, errlen, "out of memory");
            return 500;
        }
        m->snapshot_due |= !known; /* the state file lists its layouts */
        pthread_mutex_unlock(&m->lock);
        if (!known)
            LOG_INFO("layout %s registered (%zu tensors)", digest,
                     json_array_size(json_object_get(manifest, "tensors")));
    }
    *changed = !known;
    *reply = json_pack("{s:s, s:b}", "digest", digest, "new", !known);
    return *changed ? 201 : 200;
}

json_t *ctl_layout_json(ctl_model_t *m, const char *digest)
{
    ctl_layout_t *l;
    json_t *r = NULL;
    pthread_mutex_lock(&m->lock);
    if ((l = find(m, digest)) != NULL)
        r = json_incref(l->doc);
    pthread_mutex_unlock(&m->lock);
    return r;
}

json_t *ctl_layouts_state_locked(const ctl_model_t *m)
{
    json_t *a = json_array();
    int i;
    /* Only digests that can name a file (a client from before layouts may
     * have sent any string): the others live until a restart. */
    for (i = 0; a && i < m->nlayouts; i++)
        if (ctl_layout_digest_ok(m->layouts[i].digest))
            json_array_append_new(a, json_string(m->layouts[i].digest));
    return a;
}

int ctl_layouts_unsaved(ctl_model_t *m, ctl_layout_file_t **out)
{
    ctl_layout_file_t *f;
    int i, n = 0;
    pthread_mutex_lock(&m->lock);
    f = calloc((size_t)(m->nlayouts ? m->nlayouts : 1), sizeof(*f));
    for (i = 0; f && i < m->nlayouts; i++)
        if (!m->layouts[i].saved && ctl_layout_digest_ok(m->layouts[i].digest)) {
            memcpy(f[n].digest, m->layouts[i].digest, 33);
            f[n++].doc = json_incref(m->layouts[i].doc);
        }
    pthread_mutex_unlock(&m->lock);
    *out = f;
    return f ? n : -1;
}

void ctl_layout_mark_saved(ctl_model_t *m, const char *digest)
{
    ctl_layout_t *l;
    pthread_mutex_lock(&m->lock);
    if ((l = find(m, digest)) != NULL)
        l->saved = 1;
    pthread_mutex_unlock(&m->lock);
}

int ctl_layouts_take_dropped(ctl_model_t *m, char (*out)[33], int max)
{
    int i, n = 0;
    pthread_mutex_lock(&m->lock);
    for (i = 0; i < m->ndropped; i++)
        if (find(m, m->dropped[i]) == NULL && n < max) /* not registered again since */
            memcpy(out[n++], m->dropped[i], 33);
    m->ndropped = 0;
    pthread_mutex_unlock(&m->lock);
    return n;
}

void ctl_layouts_free_locked(ctl_model_t *m)
{
    int i;
    for (i = 0; i < m->nlayouts; i++)
        json_decref(m->layouts[i].doc);
    free(m->layouts);
    m->layouts = NULL;
    m->nlayouts = m->cap_layouts = 0;
}
