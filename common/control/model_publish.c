/* model_publish.c: the control model's versions: trainer ranks' reports
 * gathered per version until all W ranks with one layout made it (versions
 * only move forward), the published records (typed, common/proto/
 * version_record.h; JSON only when asked), their late digests, and the
 * answers to a report of a version already published. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "common/base/checks.h"
#include "common/control/model.h"
#include "common/control/validate.h"

/* A trainer rank's POST /v1/publish, checked and typed. */
typedef struct publish_in {
    int rank, world;
    uint64_t version;
    wsync_version_record_t head;  /* the layout fields */
    wsync_record_piece_t *pieces; /* owned; rank set */
    size_t npieces;
    const json_t *inline_manifest; /* borrowed: layout.manifest (clients from before layouts) */
} publish_in_t;

double ctl_unix_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void pending_free(ctl_pending_t *p)
{
    int r;
    for (r = 0; p->pieces && r < p->world; r++)
        free(p->pieces[r]);
    free(p->pieces);
    free(p->npieces);
    wsync_version_record_clear(&p->head);
}

static void record_free(ctl_record_t *r)
{
    wsync_version_record_clear(&r->rec);
    json_decref(r->json);
    r->json = NULL;
}

void ctl_publish_free_locked(ctl_model_t *m)
{
    int i;
    for (i = 0; i < m->nrecords; i++)
        record_free(&m->records[i]);
    m->nrecords = 0;
    for (i = 0; i < m->npending; i++)
        pending_free(&m->pending[i]);
    free(m->pending);
    m->pending = NULL;
    m->npending = 0;
}

void ctl_record_push_locked(ctl_model_t *m, wsync_version_record_t *rec)
{
    if (m->nrecords == CTL_RETAIN) {
        record_free(&m->records[0]);
        memmove(m->records, m->records + 1, (CTL_RETAIN - 1) * sizeof(m->records[0]));
        m->nrecords--;
    }
    m->records[m->nrecords].rec = *rec;
    m->records[m->nrecords++].json = NULL;
    memset(rec, 0, sizeof(*rec));
}

/* The body's fields, typed. ctl_check has checked types and ranges; what is
 * left are the rules between fields. 0, or the HTTP code with `err`. */
static int parse_publish(const json_t *body, publish_in_t *in, char *err, size_t errlen)
{
    const json_t *layout = json_object_get(body, "layout"), *pieces = json_object_get(body, "pieces"), *pc;
    size_t i;
    int code = ctl_check(body, &ctl_req_publish, err, errlen);
    if (code)
        return code;
    memset(in, 0, sizeof(*in));
    in->rank = (int)json_integer_value(json_object_get(body, "rank"));
    in->world = (int)json_integer_value(json_object_get(body, "world"));
    in->version = (uint64_t)json_integer_value(json_object_get(body, "version"));
    if (in->rank >= in->world || json_integer_value(json_object_get(layout, "world")) != in->world) {
        snprintf(err, errlen, "field 'rank' must be below 'world', and layout.world must equal world");
        return 422;
    }
    snprintf(in->head.manifest_digest, sizeof(in->head.manifest_digest), "%s",
             json_string_value(json_object_get(layout, "manifest_digest")));
    snprintf(in->head.layout, sizeof(in->head.layout), "%s", json_string_value(json_object_get(layout, "layout")));
    snprintf(in->head.layout_digest, sizeof(in->head.layout_digest), "%s",
             json_string_value(json_object_get(layout, "layout_digest")));
    in->head.chunk_size = (uint64_t)json_integer_value(json_object_get(layout, "chunk_size"));
    in->head.image_size = (uint64_t)json_integer_value(json_object_get(layout, "image_size"));
    in->head.world = in->world;
    in->inline_manifest = json_object_get(layout, "manifest");
    in->npieces = json_array_size(pieces);
    in->pieces = calloc(in->npieces ? in->npieces : 1, sizeof(*in->pieces));
    if (in->pieces == NULL) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    json_array_foreach(pieces, i, pc)
    {
        wsync_record_piece_t *p = &in->pieces[i];
        const char *d = json_string_value(json_object_get(pc, "digest"));
        if (d && strlen(d) >= sizeof(p->digest)) {
            snprintf(err, errlen,
                     "field 'pieces[%zu].digest' must be a string of 1 to %zu characters (16 hex digits)", i,
                     sizeof(p->digest) - 1);
            free(in->pieces);
            return 422;
        }
        p->id = (uint32_t)json_integer_value(json_object_get(pc, "id"));
        p->offset = (uint64_t)json_integer_value(json_object_get(pc, "offset"));
        p->len = (uint64_t)json_integer_value(json_object_get(pc, "len"));
        p->rank = in->rank;
        snprintf(p->digest, sizeof(p->digest), "%s", d ? d : "");
    }
    return 0;
}

/* Layout fields that must agree across the ranks of one version. */
static int same_layout(const wsync_version_record_t *a, const wsync_version_record_t *b)
{
    return strcmp(a->manifest_digest, b->manifest_digest) == 0 && a->chunk_size == b->chunk_size &&
           strcmp(a->layout, b->layout) == 0 && strcmp(a->layout_digest, b->layout_digest) == 0 &&
           a->image_size == b->image_size && a->world == b->world;
}

static int cmp_piece(const void *a, const void *b)
{
    const wsync_record_piece_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The trainer ranks' endpoints as the version is published, in the record:
 * an engine learns where to pull from with the record it already fetches
 * (or gets in the long poll's answer), not with a GET /v1/trainers more per
 * version. O(world), whatever the tensor count. */
static int record_trainers(const ctl_model_t *m, wsync_version_record_t *rec)
{
    int r;
    rec->trainers = calloc((size_t)m->world + 1, sizeof(*rec->trainers));
    if (rec->trainers == NULL)
        return -1;
    for (r = 0; r < m->world; r++)
        if (m->trainers[r].registered && m->trainers[r].endpoint) {
            rec->trainers[rec->ntrainers].rank = r;
            rec->trainers[rec->ntrainers++].endpoint = json_incref(m->trainers[r].endpoint);
        }
    return 0;
}

/* All ranks reported: the pending version becomes the published one. */
static int complete(ctl_model_t *m, ctl_pending_t *p)
{
    wsync_version_record_t rec = p->head;
    size_t n = 0, k = 0;
    int r;
    for (r = 0; r < p->world; r++)
        n += p->npieces[r];
    rec.pieces = malloc((n ? n : 1) * sizeof(*rec.pieces));
    rec.trainers = NULL;
    rec.ntrainers = 0;
    rec.manifest = NULL;
    if (rec.pieces == NULL || record_trainers(m, &rec) != 0) {
        free(rec.pieces);
        return -1;
    }
    for (r = 0; r < p->world; r++) {
        memcpy(rec.pieces + k, p->pieces[r], p->npieces[r] * sizeof(*rec.pieces));
        k += p->npieces[r];
    }
    qsort(rec.pieces, n, sizeof(*rec.pieces), cmp_piece);
    /* The record names its manifest by manifest_digest (GET /v1/layouts/<it>):
     * what every engine rank fetches and parses per version is O(pieces). */
    rec.npieces = n;
    rec.version = p->version;
    rec.published_at = ctl_unix_now();
    rec.digests_pending = wsync_version_record_count_late(&rec);
    ctl_record_push_locked(m, &rec);
    m->latest = p->version;
    m->latest_at = ctl_unix_now();
    m->snapshot_due = 1;
    ctl_layouts_trim_locked(m);
    LOG_INFO("version %llu published by %d trainer ranks (%zu pieces)", (unsigned long long)p->version, p->world, n);
    return 0;
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

static int record_index(const ctl_model_t *m, uint64_t v)
{
    int i;
    for (i = 0; i < m->nrecords; i++)
        if (m->records[i].rec.version == v)
            return i;
    return -1;
}

/* Whether report `in` speaks of record `rec`'s layout and of as many
 * pieces of its rank as the record holds: what same_report and
 * fill_digests both check before comparing the pieces. */
static int same_share(const wsync_version_record_t *rec, const publish_in_t *in)
{
    size_t i, mine = 0;
    if (!same_layout(rec, &in->head))
        return 0;
    for (i = 0; i < rec->npieces; i++)
        mine += rec->pieces[i].rank == in->rank;
    return mine == in->npieces;
}

/* Whether the report `in` is the one published record `rec` was made from:
 * a retried publish whose answer was lost, or one sent again after an
 * endpoint restart. */
static int same_report(const wsync_version_record_t *rec, const publish_in_t *in)
{
    size_t i, j;
    if (!same_share(rec, in))
        return 0;
    for (i = 0; i < in->npieces; i++) {
        const wsync_record_piece_t *pc = &in->pieces[i];
        int found = 0;
        for (j = 0; j < rec->npieces && !found; j++) {
            const wsync_record_piece_t *q = &rec->pieces[j];
            /* A piece without its digest is never the same report: a late
             * report goes to fill_digests, whose answer counts what is missing. */
            found = q->rank == in->rank && q->id == pc->id && q->offset == pc->offset && q->len == pc->len &&
                    pc->digest[0] && strcmp(q->digest, pc->digest) == 0;
        }
        if (!found)
            return 0;
    }
    return 1;
}

/* The report `in` of the published version at records[idx] with the same
 * pieces (ids, offsets, lengths) as the record: its second report, carrying
 * the digests it announced the version without (late digests). The digests
 * the record lacks are filled in (one already there must be the same), in a
 * new record whose JSON is built again: answers cached by JSON object
 * (routes.c) must not serve the old one. 1: this report's (*filled: some
 * digest was new), 0: another report (a conflict). */
static int fill_digests(ctl_model_t *m, int idx, const publish_in_t *in, int *filled)
{
    wsync_version_record_t *rec = &m->records[idx].rec, copy;
    size_t i;
    *filled = 0;
    if (!same_share(rec, in))
        return 0;
    for (i = 0; i < in->npieces; i++) {
        const wsync_record_piece_t *pc = &in->pieces[i];
        const wsync_record_piece_t *q = wsync_version_record_piece(rec, pc->id);
        if (q == NULL || q->rank != in->rank || q->offset != pc->offset || q->len != pc->len)
            return 0;
        if (pc->digest[0] && q->digest[0] && strcmp(pc->digest, q->digest) != 0)
            return 0;
        *filled |= pc->digest[0] && !q->digest[0];
    }
    if (!*filled)
        return 1;
    if (wsync_version_record_copy(rec, &copy) != 0)
        return 0;
    for (i = 0; i < in->npieces; i++)
        if (in->pieces[i].digest[0])
            memcpy(wsync_version_record_piece(&copy, in->pieces[i].id)->digest, in->pieces[i].digest,
                   sizeof(copy.pieces[0].digest));
    copy.digests_pending = wsync_version_record_count_late(&copy);
    record_free(&m->records[idx]);
    m->records[idx].rec = copy;
    LOG_DEBUG("version %llu: trainer rank %d's digests came (%zu pieces still without)",
              (unsigned long long)copy.version, in->rank, copy.digests_pending);
    return 1;
}

int ctl_digests_done(ctl_model_t *m, uint64_t v)
{
    int i, done;
    pthread_mutex_lock(&m->lock);
    i = record_index(m, v);
    done = i < 0 || m->records[i].rec.digests_pending == 0;
    pthread_mutex_unlock(&m->lock);
    return done;
}

/* A report of a version not newer than the latest: the same report again
 * (idempotent: its first answer may have been lost), its late digests, or a
 * conflict (409). */
static int report_published(ctl_model_t *m, const publish_in_t *in, json_t **reply, char *err, size_t errlen,
                            int *changed)
{
    int i = record_index(m, in->version), filled = 0;
    const uint64_t v = in->version;
    if (i >= 0 && same_report(&m->records[i].rec, in)) {
        *reply = json_pack("{s:I, s:b, s:I, s:b}", "version", (json_int_t)v, "published", 1, "latest",
                           (json_int_t)m->latest, "duplicate", 1);
        return 200;
    }
    /* Or its second report: the digests it announced the version without
     * (wakes the engines waiting for them). */
    if (i >= 0 && fill_digests(m, i, in, &filled)) {
        *reply = json_pack("{s:I, s:b, s:I, s:b, s:I}", "version", (json_int_t)v, "published", 1, "latest",
                           (json_int_t)m->latest, "duplicate", !filled, "digests_pending",
                           (json_int_t)m->records[i].rec.digests_pending);
        *changed = filled;
        m->gen += filled;
        m->snapshot_due |= filled;
        return 200;
    }
    snprintf(err, errlen, "version %llu is not newer than the latest published version %llu%s",
             (unsigned long long)v, (unsigned long long)m->latest,
             i >= 0 ? " (it was published with other content)" : "");
    return 409;
}

/* Rank 0 answers for the manifest: posted once to /v1/layouts/<digest>, or
 * (clients from before layouts) sent along in layout.manifest, which
 * registers it unchecked, as the endpoint took it before. */
static int manifest_known(ctl_model_t *m, const publish_in_t *in, char *err, size_t errlen)
{
    const char *mdig = in->head.manifest_digest;
    if (json_is_object(in->inline_manifest) &&
        ctl_layout_add_locked(m, mdig, (json_t *)in->inline_manifest, 0) != 0) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    if (!ctl_layout_known_locked(m, mdig)) {
        snprintf(err, errlen,
                 "layout.manifest_digest %s is not registered here: POST /v1/layouts/%s with "
                 "{\"manifest\": ...} first (trainer rank 0 does, once per layout)",
                 mdig, mdig);
        return 404;
    }
    return 0;
}

/* The pending version `in` reports, made when new; NULL out of memory. */
static ctl_pending_t *pending_for(ctl_model_t *m, const publish_in_t *in)
{
    ctl_pending_t *np, *p;
    if (m->npending >= CTL_MAX_PENDING)
        drop_oldest_pending(m);
    np = realloc(m->pending, (size_t)(m->npending + 1) * sizeof(*np));
    if (np == NULL)
        return NULL;
    m->pending = np;
    p = &m->pending[m->npending];
    memset(p, 0, sizeof(*p));
    p->version = in->version;
    p->world = in->world;
    p->head = in->head;
    p->pieces = calloc((size_t)in->world, sizeof(*p->pieces));
    p->npieces = calloc((size_t)in->world, sizeof(*p->npieces));
    if (p->pieces == NULL || p->npieces == NULL) {
        free(p->pieces);
        free(p->npieces);
        return NULL;
    }
    m->npending++;
    return p;
}

/* A report of a version newer than the latest: kept until every rank's is
 * in, then published. */
static int report_new(ctl_model_t *m, publish_in_t *in, json_t **reply, char *err, size_t errlen, int *changed)
{
    ctl_pending_t *p = NULL;
    int i, code;
    if ((code = ctl_set_world_locked(m, in->world, err, errlen)) != 0)
        return code;
    for (i = 0; i < m->npending; i++)
        if (m->pending[i].version == in->version)
            p = &m->pending[i];
    if (p && (p->world != in->world || !same_layout(&p->head, &in->head))) {
        snprintf(err, errlen,
                 "version %llu was reported by other ranks with a different layout (manifest, chunk "
                 "size, layout or world)",
                 (unsigned long long)in->version);
        return 409;
    }
    if (in->rank == 0 && (code = manifest_known(m, in, err, errlen)) != 0)
        return code;
    if (p == NULL && (p = pending_for(m, in)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    if (p->pieces[in->rank] == NULL)
        p->reported++;
    free(p->pieces[in->rank]);
    p->pieces[in->rank] = in->pieces; /* taken */
    p->npieces[in->rank] = in->npieces;
    in->pieces = NULL;
    m->trainers[in->rank].version = in->version;
    if (p->reported == in->world) {
        if (complete(m, p) != 0) {
            snprintf(err, errlen, "out of memory");
            return 500;
        }
        drop_pending_upto(m, in->version);
        /* Only a published version is durable: pending reports are cheap to
         * resend, and the record can be megabytes. */
        *changed = 1;
    }
    *reply = json_pack("{s:I, s:b, s:I}", "version", (json_int_t)in->version, "published",
                       m->latest == in->version, "latest", (json_int_t)m->latest);
    m->gen++;
    return 200;
}

int ctl_publish(ctl_model_t *m, const json_t *body, json_t **reply, char *err, size_t errlen, int *changed)
{
    publish_in_t in;
    int code = parse_publish(body, &in, err, errlen);
    if (code)
        return code;
    pthread_mutex_lock(&m->lock);
    if (in.version <= m->latest)
        code = report_published(m, &in, reply, err, errlen, changed);
    else
        code = report_new(m, &in, reply, err, errlen, changed);
    pthread_mutex_unlock(&m->lock);
    free(in.pieces);
    return code;
}

json_t *ctl_version_json(ctl_model_t *m, uint64_t v)
{
    json_t *r = NULL;
    int i;
    pthread_mutex_lock(&m->lock);
    i = record_index(m, v);
    if (i >= 0 && m->records[i].json == NULL)
        m->records[i].json = wsync_version_record_to_json(&m->records[i].rec);
    if (i >= 0)
        r = json_incref(m->records[i].json);
    pthread_mutex_unlock(&m->lock);
    return r;
}

void ctl_retained(ctl_model_t *m, uint64_t *oldest, uint64_t *newest)
{
    pthread_mutex_lock(&m->lock);
    *oldest = m->nrecords ? m->records[0].rec.version : 0;
    *newest = m->nrecords ? m->records[m->nrecords - 1].rec.version : 0;
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

uint64_t ctl_generation(ctl_model_t *m)
{
    uint64_t g;
    pthread_mutex_lock(&m->lock);
    g = m->gen;
    pthread_mutex_unlock(&m->lock);
    return g;
}
