/* model.c: the control endpoint's rules: registration, publish (all W ranks
 * with one layout make a version; versions only move forward), engine
 * reports, and the JSON views of it all. */
#include "common/control/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "common/base/checks.h"
#include "common/control/validate.h"

const double ctl_hist_bounds[CTL_HIST_BUCKETS] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

static double unix_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void ctl_model_init(ctl_model_t *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
}

static void pending_free(ctl_pending_t *p)
{
    int r;
    json_decref(p->layout);
    for (r = 0; p->pieces && r < p->world; r++)
        json_decref(p->pieces[r]);
    free(p->pieces);
}

void ctl_model_free(ctl_model_t *m)
{
    int i;
    for (i = 0; i < m->nrecords; i++)
        json_decref(m->records[i]);
    for (i = 0; i < m->world; i++)
        json_decref(m->trainers[i].endpoint);
    free(m->trainers);
    for (i = 0; i < m->nengines; i++)
        json_decref(m->engines[i].endpoint);
    free(m->engines);
    for (i = 0; i < m->npending; i++)
        pending_free(&m->pending[i]);
    free(m->pending);
    ctl_layouts_free_locked(m);
    json_decref(m->journal);
    pthread_mutex_destroy(&m->lock);
}

/* Grow (or set) the trainer table to `world` ranks. Called with the lock held. */
static int set_world(ctl_model_t *m, int world, char *err, size_t errlen)
{
    ctl_trainer_t *t;
    if (world < 1 || world > CTL_MAX_WORLD) {
        snprintf(err, errlen, "field 'world' must be between 1 and %d", CTL_MAX_WORLD);
        return 422;
    }
    if (world == m->world)
        return 0;
    /* A new trainer job with another world size takes over: ranks beyond it
     * are forgotten; published versions keep the world they were made with. */
    if (m->world)
        LOG_INFO("trainer world size changes from %d to %d ranks", m->world, world);
    for (int r = world; r < m->world; r++)
        json_decref(m->trainers[r].endpoint);
    t = realloc(m->trainers, (size_t)world * sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    if (world > m->world)
        memset(t + m->world, 0, (size_t)(world - m->world) * sizeof(*t));
    m->trainers = t;
    m->world = world;
    return 0;
}

int ctl_register_trainer(ctl_model_t *m, const json_t *body, char *err, size_t errlen, int *changed)
{
    int code = ctl_check(body, &ctl_req_register_trainer, err, errlen), rank, world;
    ctl_trainer_t *t;
    int world_before;
    if (code)
        return code;
    rank = (int)json_integer_value(json_object_get(body, "rank"));
    world = (int)json_integer_value(json_object_get(body, "world"));
    if (rank >= world) {
        snprintf(err, errlen, "field 'rank' (%d) must be below 'world' (%d)", rank, world);
        return 422;
    }
    pthread_mutex_lock(&m->lock);
    world_before = m->world;
    if ((code = set_world(m, world, err, errlen)) != 0) {
        pthread_mutex_unlock(&m->lock);
        return code;
    }
    t = &m->trainers[rank];
    /* The same registration again is a heartbeat: seen, nothing to save. */
    *changed = world_before != world || !t->registered ||
               !json_equal(t->endpoint, json_object_get(body, "endpoint")) ||
               strcmp(t->host, json_string_value(json_object_get(body, "host"))) != 0;
    if (*changed) {
        json_decref(t->endpoint);
        t->endpoint = json_deep_copy(json_object_get(body, "endpoint"));
        snprintf(t->host, sizeof(t->host), "%s", json_string_value(json_object_get(body, "host")));
        if (!t->registered)
            LOG_INFO("trainer rank %d/%d registered from %s", rank, world, t->host);
        t->registered = 1;
        ctl_journal_locked(m, json_pack("{s:s, s:O}", "op", "trainer", "body", body));
    }
    if (t->gone)
        LOG_INFO("trainer rank %d is back (from %s)", rank, t->host);
    if (*changed || t->gone)
        m->gen++;
    else
        m->seen_dirty = 1;
    t->gone = 0;
    t->last_seen = unix_now();
    pthread_mutex_unlock(&m->lock);
    return 200;
}

ctl_engine_t *ctl_find_engine_locked(ctl_model_t *m, const char *id)
{
    int i;
    for (i = 0; i < m->nengines; i++)
        if (strcmp(m->engines[i].id, id) == 0)
            return &m->engines[i];
    return NULL;
}

/* An engine id lands in a URL path and a Prometheus label: printable ASCII
 * without the characters either would need escaped. */
static int id_ok(const char *id, size_t cap)
{
    size_t i, n = strlen(id);
    if (n == 0 || n >= cap)
        return 0;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)id[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '/' || ch == '"' || ch == '\\' || ch == '%' || ch == '?' || ch == '#')
            return 0;
    }
    return 1;
}

/* The registration of `e`'s id from `host`: 409 when another host's node
 * holds it, live; else 0 (taken over from a node gone). Lock held. */
static int same_id_other_host(ctl_model_t *m, ctl_engine_t *e, const char *host, double now, char *err,
                              size_t errlen, int *changed)
{
    /* One id, one node: a second host with the id of a live node would
     * interleave its reports with the first one's, and status would show one
     * node where two pull. Refused while the holder is live; taken over (as
     * a node that moved) once it is gone. */
    if (strcmp(e->host, host) != 0 && !e->gone && !m->replaying) {
        snprintf(err, errlen,
                 "engine id '%s' is registered from host %s (seen %.0f s ago); %s cannot register it too: give "
                 "each node its own --engine id, or stop the node on %s (its id is free once it exited or was "
                 "not seen for %.0f s)",
                 e->id, e->host, now - e->last_seen, host, e->host, m->lease_s > 0 ? m->lease_s : CTL_LEASE_S);
        return 409;
    }
    if (strcmp(e->host, host) != 0) {
        /* Another machine: what the old one held is not here. */
        LOG_WARN("engine %s: registered from %s, taking over the id from %s (gone)", e->id, host, e->host);
        e->version = e->target = 0;
        snprintf(e->state, sizeof(e->state), "idle");
        e->last_error[0] = e->node[0] = '\0';
        e->last_sync_s = e->last_gbps = 0;
        *changed = 1;
    }
    return 0;
}

int ctl_register_engine(ctl_model_t *m, const json_t *body, char *err, size_t errlen, int *changed)
{
    int code = ctl_check(body, &ctl_req_register_engine, err, errlen);
    const char *id, *host;
    const json_t *holds = json_object_get(body, "holds");
    ctl_engine_t *e;
    double now = unix_now();
    if (code)
        return code;
    id = json_string_value(json_object_get(body, "id"));
    if (!id_ok(id, sizeof(e->id))) {
        snprintf(err, errlen,
                 "field 'id' must be under %zu printable characters without '/', quotes, "
                 "backslashes or spaces (it goes into URLs and metric labels)",
                 sizeof(e->id));
        return 422;
    }
    if (json_integer_value(json_object_get(body, "local_ranks")) < 1) {
        snprintf(err, errlen, "field 'local_ranks' must be at least 1");
        return 422;
    }
    host = json_string_value(json_object_get(body, "host"));
    pthread_mutex_lock(&m->lock);
    e = ctl_find_engine_locked(m, id);
    if (e && (code = same_id_other_host(m, e, host, now, err, errlen, changed)) != 0) {
        pthread_mutex_unlock(&m->lock);
        return code;
    }
    if (e == NULL && m->nengines >= (m->max_engines > 0 ? m->max_engines : CTL_MAX_ENGINES)) {
        int max = m->max_engines > 0 ? m->max_engines : CTL_MAX_ENGINES;
        pthread_mutex_unlock(&m->lock);
        snprintf(err, errlen,
                 "engine node '%s' refused: %d engine nodes are registered, the limit of this "
                 "endpoint (wsync serve --max-engines); nodes already registered may register again",
                 id, max);
        return 403;
    }
    if (e == NULL) {
        if (m->nengines == m->cap_engines) {
            int cap = m->cap_engines ? m->cap_engines * 2 : 16;
            ctl_engine_t *ne = realloc(m->engines, (size_t)cap * sizeof(*ne));
            if (ne == NULL) {
                pthread_mutex_unlock(&m->lock);
                snprintf(err, errlen, "out of memory");
                return 500;
            }
            m->engines = ne;
            m->cap_engines = cap;
        }
        e = &m->engines[m->nengines++];
        memset(e, 0, sizeof(*e));
        snprintf(e->id, sizeof(e->id), "%s", id);
        snprintf(e->state, sizeof(e->state), "idle");
        LOG_INFO("engine %s registered", id);
        *changed = 1;
    }
    if (strcmp(e->host, host) != 0 ||
        e->local_ranks != (int)json_integer_value(json_object_get(body, "local_ranks")) ||
        !json_equal(e->endpoint, json_object_get(body, "endpoint"))) {
        snprintf(e->host, sizeof(e->host), "%s", host);
        e->local_ranks = (int)json_integer_value(json_object_get(body, "local_ranks"));
        json_decref(e->endpoint);
        e->endpoint = json_deep_copy(json_object_get(body, "endpoint"));
        *changed = 1;
    }
    if (*changed) {
        json_t *logged = json_deep_copy(body);
        json_object_del(logged, "holds"); /* a held version is logged as such, below */
        ctl_journal_locked(m, json_pack("{s:s, s:o}", "op", "engine", "body", logged));
        e->updated = now;
    }
    /* A heartbeat says what the node holds now: a node that restarted, or
     * whose in-place pull failed, holds nothing, whatever it reported before. */
    if (holds && (uint64_t)json_integer_value(holds) != e->version &&
        (uint64_t)json_integer_value(holds) <= m->latest && !m->replaying) {
        e->version = (uint64_t)json_integer_value(holds);
        ctl_journal_locked(m, json_pack("{s:s, s:s, s:I}", "op", "held", "id", e->id, "version",
                                        (json_int_t)e->version));
        *changed = 1;
    }
    if (e->gone)
        LOG_INFO("engine %s is back (from %s)", id, e->host);
    if (*changed || e->gone)
        m->gen++;
    else
        m->seen_dirty = 1;
    e->gone = e->exited = 0;
    e->last_seen = now;
    pthread_mutex_unlock(&m->lock);
    return 200;
}

/* Layout fields that must agree across the ranks of one version. */
static int same_layout(const json_t *a, const json_t *b)
{
    static const char *keys[] = {"manifest_digest", "chunk_size", "layout",
                                 "layout_digest",   "image_size", "world"};
    size_t i;
    for (i = 0; i < WSYNC_ARRAY_LEN(keys); i++)
        if (!json_equal(json_object_get(a, keys[i]), json_object_get(b, keys[i])))
            return 0;
    return 1;
}

static int cmp_piece(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "id"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "id"));
    return x < y ? -1 : x > y;
}

/* The trainer ranks' endpoints as the version is published, in the record:
 * an engine learns where to pull from with the record it already fetches
 * (or gets in the long poll's answer), not with a GET /v1/trainers more per
 * version. O(world), whatever the tensor count. Lock held. */
static json_t *record_trainers(const ctl_model_t *m)
{
    json_t *arr = json_array();
    int r;
    for (r = 0; arr && r < m->world; r++)
        if (m->trainers[r].registered && m->trainers[r].endpoint)
            json_array_append_new(arr, json_pack("{s:i, s:O}", "rank", r, "endpoint", m->trainers[r].endpoint));
    return arr;
}

/* Pieces of `pieces` whose digest is still to come (late digests: the
 * trainer rank announced the version before digesting it). */
static size_t late_count(const json_t *pieces)
{
    const json_t *pc;
    size_t i, n = 0;
    json_array_foreach(pieces, i, pc) n += json_object_get(pc, "digest") == NULL;
    return n;
}

/* All ranks reported: the pending version becomes the published one. */
static void complete(ctl_model_t *m, ctl_pending_t *p)
{
    json_t *rec = json_deep_copy(p->layout), *pieces = json_array();
    json_t **all;
    size_t n = 0, i, k;
    int r;
    for (r = 0; r < p->world; r++)
        n += json_array_size(p->pieces[r]);
    all = calloc(n ? n : 1, sizeof(*all));
    for (r = 0, k = 0; all && r < p->world; r++) {
        json_t *pc;
        json_array_foreach(p->pieces[r], i, pc)
        {
            json_object_set_new(pc, "rank", json_integer(r));
            all[k++] = pc;
        }
    }
    if (all)
        qsort(all, n, sizeof(*all), cmp_piece);
    for (i = 0; all && i < n; i++)
        json_array_append(pieces, all[i]);
    free(all);
    /* The record names its manifest by manifest_digest (GET /v1/layouts/<it>):
     * what every engine rank fetches and parses per version is O(pieces). */
    json_object_set_new(rec, "version", json_integer((json_int_t)p->version));
    json_object_set_new(rec, "pieces", pieces);
    json_object_set_new(rec, "trainers", record_trainers(m));
    json_object_set_new(rec, "published_at", json_real(unix_now()));
    if (late_count(pieces) > 0)
        json_object_set_new(rec, "digests_pending", json_integer((json_int_t)late_count(pieces)));
    if (m->nrecords == CTL_RETAIN) {
        json_decref(m->records[0]);
        memmove(m->records, m->records + 1, (CTL_RETAIN - 1) * sizeof(json_t *));
        m->nrecords--;
    }
    m->records[m->nrecords++] = rec;
    m->latest = p->version;
    m->latest_at = unix_now();
    m->snapshot_due = 1;
    ctl_layouts_trim_locked(m);
    LOG_INFO("version %llu published by %d trainer ranks (%zu pieces)", (unsigned long long)p->version, p->world, n);
}

static void drop_pending_upto(ctl_model_t *m, uint64_t v)
{
    int i = 0;
    while (i < m->npending) {
        if (m->pending[i].version <= v) {
            pending_free(&m->pending[i]);
            m->pending[i] = m->pending[--m->npending];
        } else {
            i++;
        }
    }
}

/* Ranks that never finish a version (a crashed trainer) must not grow the
 * pending list without bound: the oldest incomplete version goes first. */
static void drop_oldest_pending(ctl_model_t *m)
{
    int i, oldest = 0;
    for (i = 1; i < m->npending; i++)
        if (m->pending[i].version < m->pending[oldest].version)
            oldest = i;
    LOG_WARN("dropping incomplete version %llu (%d of %d ranks reported): too many pending versions",
             (unsigned long long)m->pending[oldest].version, m->pending[oldest].reported, m->pending[oldest].world);
    pending_free(&m->pending[oldest]);
    m->pending[oldest] = m->pending[--m->npending];
}

static const json_t *record_of(const ctl_model_t *m, uint64_t v)
{
    int i;
    for (i = 0; i < m->nrecords; i++)
        if ((uint64_t)json_integer_value(json_object_get(m->records[i], "version")) == v)
            return m->records[i];
    return NULL;
}

/* Whether rank `rank`'s report (layout, pieces) is the one published record
 * `rec` was made from: a retried publish whose answer was lost, or one sent
 * again after an endpoint restart. */
static int same_report(const json_t *rec, int rank, const json_t *layout, const json_t *pieces)
{
    const json_t *all = json_object_get(rec, "pieces"), *pc, *q;
    size_t i, j, mine = 0;
    if (!same_layout(rec, layout))
        return 0;
    json_array_foreach(all, i, q) if (json_integer_value(json_object_get(q, "rank")) == rank) mine++;
    if (mine != json_array_size(pieces))
        return 0;
    json_array_foreach(pieces, i, pc)
    {
        int found = 0;
        json_array_foreach(all, j, q)
        {
            if (json_integer_value(json_object_get(q, "rank")) == rank &&
                json_equal(json_object_get(q, "id"), json_object_get(pc, "id")) &&
                json_equal(json_object_get(q, "offset"), json_object_get(pc, "offset")) &&
                json_equal(json_object_get(q, "len"), json_object_get(pc, "len")) &&
                json_equal(json_object_get(q, "digest"), json_object_get(pc, "digest"))) {
                found = 1;
                break;
            }
        }
        if (!found)
            return 0;
    }
    return 1;
}

/* The piece `id` of a record's pieces (sorted by id), or NULL. */
static json_t *record_piece(const json_t *all, json_int_t id)
{
    size_t lo = 0, hi = json_array_size(all);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        json_t *q = json_array_get(all, mid);
        json_int_t x = json_integer_value(json_object_get(q, "id"));
        if (x == id)
            return q;
        if (x < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Rank `rank`'s report of the published version at records[idx] with the
 * same pieces (ids, offsets, lengths) as the record: its second report,
 * carrying the digests it announced the version without (late digests).
 * The digests the record lacks are filled in (one already there must be
 * the same), in a new record object: answers cached by record object
 * (routes.c) must not serve the old one. 1: this report's (*filled: some
 * digest was new), 0: another report (a conflict). Lock held. */
static int fill_digests(ctl_model_t *m, int idx, int rank, const json_t *layout, const json_t *pieces, int *filled)
{
    json_t *rec = m->records[idx], *all = json_object_get(rec, "pieces"), *copy, *pc, *q;
    size_t i, mine = 0, pending;
    *filled = 0;
    if (!same_layout(rec, layout))
        return 0;
    json_array_foreach(all, i, q) mine += json_integer_value(json_object_get(q, "rank")) == rank;
    if (mine != json_array_size(pieces))
        return 0;
    json_array_foreach(pieces, i, pc)
    {
        const json_t *d = json_object_get(pc, "digest"), *have;
        q = record_piece(all, json_integer_value(json_object_get(pc, "id")));
        if (q == NULL || json_integer_value(json_object_get(q, "rank")) != rank ||
            !json_equal(json_object_get(q, "offset"), json_object_get(pc, "offset")) ||
            !json_equal(json_object_get(q, "len"), json_object_get(pc, "len")))
            return 0;
        have = json_object_get(q, "digest");
        if (d && have && !json_equal(d, have))
            return 0;
        *filled |= d && !have;
    }
    if (!*filled)
        return 1;
    copy = json_deep_copy(rec);
    if (copy == NULL)
        return 0;
    all = json_object_get(copy, "pieces");
    json_array_foreach(pieces, i, pc) if (json_object_get(pc, "digest"))
    {
        q = record_piece(all, json_integer_value(json_object_get(pc, "id")));
        json_object_set(q, "digest", json_object_get(pc, "digest"));
    }
    pending = late_count(all);
    if (pending)
        json_object_set_new(copy, "digests_pending", json_integer((json_int_t)pending));
    else
        json_object_del(copy, "digests_pending");
    json_decref(rec);
    m->records[idx] = copy;
    LOG_DEBUG("version %llu: trainer rank %d's digests came (%zu pieces still without)",
              (unsigned long long)json_integer_value(json_object_get(copy, "version")), rank, pending);
    return 1;
}

int ctl_digests_done(ctl_model_t *m, uint64_t v)
{
    const json_t *rec;
    int done;
    pthread_mutex_lock(&m->lock);
    rec = record_of(m, v);
    done = rec == NULL || json_object_get(rec, "digests_pending") == NULL;
    pthread_mutex_unlock(&m->lock);
    return done;
}

int ctl_publish(ctl_model_t *m, const json_t *body, json_t **reply, char *err, size_t errlen, int *changed)
{
    const json_t *layout = json_object_get(body, "layout"), *pieces = json_object_get(body, "pieces");
    int code = ctl_check(body, &ctl_req_publish, err, errlen), rank, world, i;
    ctl_pending_t *p = NULL;
    uint64_t v;

    if (code)
        return code;
    rank = (int)json_integer_value(json_object_get(body, "rank"));
    world = (int)json_integer_value(json_object_get(body, "world"));
    v = (uint64_t)json_integer_value(json_object_get(body, "version"));
    if (rank >= world || json_integer_value(json_object_get(layout, "world")) != world) {
        snprintf(err, errlen, "field 'rank' must be below 'world', and layout.world must equal world");
        return 422;
    }
    if (v == 0) {
        snprintf(err, errlen, "field 'version' must be at least 1");
        return 422;
    }
    pthread_mutex_lock(&m->lock);
    if (v <= m->latest) {
        const json_t *rec = record_of(m, v);
        /* Idempotent: the same report of a published version is that
         * publish, answered again (its first answer may have been lost). */
        if (rec && same_report(rec, rank, layout, pieces)) {
            *reply = json_pack("{s:I, s:b, s:I, s:b}", "version", (json_int_t)v, "published", 1, "latest",
                               (json_int_t)m->latest, "duplicate", 1);
            code = 200;
            goto out;
        }
        /* Or its second report: the digests it announced the version
         * without (wakes the engines waiting for them). */
        for (i = 0; rec && i < m->nrecords; i++)
            if (m->records[i] == rec) {
                int filled = 0;
                if (!fill_digests(m, i, rank, layout, pieces, &filled))
                    break;
                *reply = json_pack("{s:I, s:b, s:I, s:b, s:I}", "version", (json_int_t)v, "published", 1, "latest",
                                   (json_int_t)m->latest, "duplicate", !filled, "digests_pending",
                                   json_integer_value(json_object_get(m->records[i], "digests_pending")));
                *changed = filled;
                m->gen += filled;
                m->snapshot_due |= filled;
                code = 200;
                goto out;
            }
        snprintf(err, errlen, "version %llu is not newer than the latest published version %llu%s",
                 (unsigned long long)v, (unsigned long long)m->latest,
                 rec ? " (it was published with other content)" : "");
        code = 409;
        goto out;
    }
    if ((code = set_world(m, world, err, errlen)) != 0)
        goto out;
    for (i = 0; i < m->npending; i++)
        if (m->pending[i].version == v)
            p = &m->pending[i];
    if (p && (p->world != world || !same_layout(p->layout, layout))) {
        snprintf(err, errlen,
                 "version %llu was reported by other ranks with a different layout (manifest, chunk "
                 "size, layout or world)",
                 (unsigned long long)v);
        code = 409;
        goto out;
    }
    /* Rank 0 answers for the manifest: posted once to /v1/layouts/<digest>,
     * or (clients from before layouts) sent along in layout.manifest, which
     * registers it unchecked, as the endpoint took it before. */
    if (rank == 0) {
        const char *mdig = json_string_value(json_object_get(layout, "manifest_digest"));
        json_t *inline_manifest = json_object_get(layout, "manifest");
        if (json_is_object(inline_manifest) && ctl_layout_add_locked(m, mdig, inline_manifest, 0) != 0) {
            snprintf(err, errlen, "out of memory");
            code = 500;
            goto out;
        }
        if (!ctl_layout_known_locked(m, mdig)) {
            snprintf(err, errlen,
                     "layout.manifest_digest %s is not registered here: POST /v1/layouts/%s with "
                     "{\"manifest\": ...} first (trainer rank 0 does, once per layout)",
                     mdig, mdig);
            code = 404;
            goto out;
        }
    }
    if (p == NULL && m->npending >= CTL_MAX_PENDING)
        drop_oldest_pending(m);
    if (p == NULL) {
        ctl_pending_t *np = realloc(m->pending, (size_t)(m->npending + 1) * sizeof(*np));
        if (np == NULL) {
            snprintf(err, errlen, "out of memory");
            code = 500;
            goto out;
        }
        m->pending = np;
        p = &m->pending[m->npending++];
        memset(p, 0, sizeof(*p));
        p->version = v;
        p->world = world;
        p->layout = json_copy((json_t *)layout); /* shallow: its fields are scalars but the manifest */
        json_object_del(p->layout, "manifest");
        p->pieces = calloc((size_t)world, sizeof(json_t *));
    }
    if (p->pieces[rank] == NULL)
        p->reported++;
    json_decref(p->pieces[rank]);
    p->pieces[rank] = json_deep_copy(pieces);
    m->trainers[rank].version = v;
    if (p->reported == world) {
        complete(m, p);
        drop_pending_upto(m, v);
        /* Only a published version is durable: pending reports are cheap to
         * resend, and the record (manifest included) can be megabytes. */
        *changed = 1;
    }
    *reply = json_pack("{s:I, s:b, s:I}", "version", (json_int_t)v, "published", m->latest == v, "latest",
                       (json_int_t)m->latest);
    code = 200;
    m->gen++;
out:
    pthread_mutex_unlock(&m->lock);
    return code;
}

/* The part of a report that is about the node, not a pull: it was seen;
 * a note on its ranks ("node"), or its clean stop ("exited"). 1 when the
 * report was only that. Lock held. */
static int report_presence(ctl_model_t *m, ctl_engine_t *e, const json_t *body, const char *state)
{
    e->last_seen = unix_now();
    if (e->gone && strcmp(state, "exited") != 0) {
        e->gone = e->exited = 0;
        m->gen++;
    }
    if (json_object_get(body, "node")) {
        /* What the node says of its local ranks (one lost, or replaced; ""
         * when all run again): the pull state is unchanged. */
        const char *node = json_string_value(json_object_get(body, "node"));
        if (strcmp(node, e->node) != 0) {
            if (node[0])
                LOG_WARN("engine %s: %s", e->id, node);
            else
                LOG_INFO("engine %s: every local rank runs again", e->id);
            snprintf(e->node, sizeof(e->node), "%s", node);
            m->gen++;
        }
        return 1;
    }
    if (strcmp(state, "exited") == 0) {
        /* A clean stop: listed as gone (with when), no longer live. */
        if (!e->exited)
            LOG_INFO("engine %s exited", e->id);
        e->exited = e->gone = 1;
        m->gen++;
        return 1;
    }
    return 0;
}

int ctl_report(ctl_model_t *m, const char *id, const json_t *body, char *err, size_t errlen, int *changed)
{
    int code = ctl_check(body, &ctl_req_report, err, errlen);
    const char *state;
    ctl_engine_t *e;
    uint64_t v;
    double dur;
    json_int_t bytes;
    int b;

    if (code)
        return code;
    state = json_string_value(json_object_get(body, "state"));
    v = (uint64_t)json_integer_value(json_object_get(body, "version"));
    dur = json_number_value(json_object_get(body, "duration_s"));
    bytes = json_integer_value(json_object_get(body, "bytes"));
    if (strcmp(state, "pulling") != 0 && strcmp(state, "ready") != 0 && strcmp(state, "failed") != 0 &&
        strcmp(state, "exited") != 0) {
        snprintf(err, errlen, "field 'state' must be pulling, ready, failed or exited");
        return 422;
    }
    pthread_mutex_lock(&m->lock);
    e = ctl_find_engine_locked(m, id);
    if (e == NULL) {
        snprintf(err, errlen, "engine '%s' is not registered (POST /v1/engines/register first)", id);
        code = 404;
        goto out;
    }
    if (report_presence(m, e, body, state)) {
        *changed = 0;
        code = 200;
        goto out;
    }
    if (json_object_get(body, "phase")) {
        /* A progress note: annotates the pull in progress, never changes
         * the state (a note sent just before "ready" may arrive after it). */
        const char *phase = json_string_value(json_object_get(body, "phase"));
        if (strcmp(state, "pulling") != 0 || (strcmp(phase, "setup") != 0 && strcmp(phase, "landing") != 0)) {
            snprintf(err, errlen, "a progress note ('phase') is state pulling with phase setup or landing");
            code = 422;
            goto out;
        }
        if (strcmp(e->state, "pulling") == 0 && e->target == v) {
            snprintf(e->phase, sizeof(e->phase), "%s", phase);
            e->progress_bytes = (uint64_t)bytes;
            e->progress_total = (uint64_t)json_integer_value(json_object_get(body, "total"));
            e->updated = unix_now();
            m->gen++;
        }
        *changed = 0;
        code = 200;
        goto out;
    }
    /* Any version up to the latest was published (the state file keeps the
     * latest across restarts), retained or not: an engine that verified one
     * holds it, even when its report comes after a restart. */
    if (strcmp(state, "ready") == 0 && (v > m->latest || v == 0)) {
        snprintf(err, errlen, "version %llu was never published (latest is %llu)", (unsigned long long)v,
                 (unsigned long long)m->latest);
        code = 409;
        goto out;
    }
    if (strcmp(e->state, state) != 0 || e->target != v)
        LOG_INFO("engine %s: %s version %llu%s%s", id, state, (unsigned long long)v,
                 strcmp(state, "failed") == 0 ? ": " : "",
                 strcmp(state, "failed") == 0 ? json_string_value(json_object_get(body, "error")) ?: "" : "");
    snprintf(e->state, sizeof(e->state), "%s", state);
    e->target = v;
    e->phase[0] = '\0';
    e->progress_bytes = e->progress_total = 0;
    e->updated = unix_now();
    if (strcmp(state, "ready") == 0) {
        e->version = v;
        e->last_sync_s = dur;
        /* Below a microsecond the rate means nothing (1e-300 s made it
         * infinite, which no JSON can hold): shown as 0. */
        e->last_gbps = dur >= 1e-6 ? (double)bytes / dur / 1e9 : 0;
        e->last_error[0] = '\0';
        m->bytes_synced += (uint64_t)bytes;
        m->syncs++;
        m->sync_seconds += dur;
        for (b = 0; b < CTL_HIST_BUCKETS && dur > ctl_hist_bounds[b]; b++)
            ;
        m->hist[b]++;
    } else if (strcmp(state, "failed") == 0) {
        const char *msg = json_string_value(json_object_get(body, "error"));
        const json_t *holds = json_object_get(body, "holds");
        snprintf(e->last_error, sizeof(e->last_error), "%s", msg ? msg : "(no message)");
        m->failures++;
        e->failures++;
        /* A failed pull in place overwrote the one image: the node says it
         * holds nothing (or what it still holds), and status says so. */
        if (holds && (uint64_t)json_integer_value(holds) <= e->version)
            e->version = (uint64_t)json_integer_value(holds);
    }
    if (strcmp(state, "pulling") != 0)
        ctl_journal_locked(m, json_pack("{s:s, s:s, s:I}", "op", "held", "id", e->id, "version",
                                        (json_int_t)e->version));
    *changed = strcmp(state, "pulling") != 0;
    code = 200;
    m->gen++;
out:
    pthread_mutex_unlock(&m->lock);
    return code;
}

json_t *ctl_version_json(ctl_model_t *m, uint64_t v)
{
    json_t *r = NULL;
    int i;
    pthread_mutex_lock(&m->lock);
    for (i = 0; i < m->nrecords; i++)
        if ((uint64_t)json_integer_value(json_object_get(m->records[i], "version")) == v)
            r = json_incref(m->records[i]);
    pthread_mutex_unlock(&m->lock);
    return r;
}

uint64_t ctl_generation(ctl_model_t *m)
{
    uint64_t g;
    pthread_mutex_lock(&m->lock);
    g = m->gen;
    pthread_mutex_unlock(&m->lock);
    return g;
}

void ctl_retained(ctl_model_t *m, uint64_t *oldest, uint64_t *newest)
{
    pthread_mutex_lock(&m->lock);
    *oldest = m->nrecords ? (uint64_t)json_integer_value(json_object_get(m->records[0], "version")) : 0;
    *newest = m->nrecords ? (uint64_t)json_integer_value(json_object_get(m->records[m->nrecords - 1], "version"))
                          : 0;
    pthread_mutex_unlock(&m->lock);
}

uint64_t ctl_latest(ctl_model_t *m)
{
    uint64_t v;
    pthread_mutex_lock(&m->lock);
    v = m->latest;
    pthread_mutex_unlock(&m->lock);
    return v;
}
