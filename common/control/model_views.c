/* model_views.c: the model as others read it, as JSON trees: GET /v1/status
 * (the reference model_status.c's text is checked against) and /v1/trainers,
 * and the state file's JSON (written by state_store.c, read back at start). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/control/model.h"

/* Gone: marked by the sweep, or not seen for the lease by `now` (shown at
 * once, not at the next sweep). */
static int is_gone(const ctl_model_t *m, int gone, double last_seen, double now)
{
    return gone || now - last_seen >= (m->lease_s > 0 ? m->lease_s : CTL_LEASE_S);
}

static json_t *engine_json(const ctl_model_t *m, const ctl_engine_t *e, double now)
{
    json_t *j = json_pack("{s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:f, s:f, s:s, s:f, s:O*}", "id", e->id, "host",
                          e->host, "local_ranks", e->local_ranks, "state", e->state, "version",
                          (json_int_t)e->version, "target", (json_int_t)e->target, "behind",
                          (json_int_t)(m->latest - (e->version < m->latest ? e->version : m->latest)),
                          "last_sync_s", e->last_sync_s, "last_gbps", e->last_gbps, "last_error", e->last_error,
                          "updated", e->updated, "endpoint", e->endpoint);
    if (j) {
        json_object_set_new(j, "presence", json_string(is_gone(m, e->gone, e->last_seen, now) ? "gone" : "live"));
        json_object_set_new(j, "last_seen", json_real(e->last_seen));
        json_object_set_new(j, "exited", json_boolean(e->exited));
        json_object_set_new(j, "failures", json_integer((json_int_t)e->failures));
        if (e->node[0])
            json_object_set_new(j, "node", json_string(e->node));
        if (e->delta_total.pieces + e->delta_total.refetched > 0) /* it pulled deltas */
            json_object_set_new(j, "delta",
                                json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "pieces",
                                          (json_int_t)e->last_delta.pieces, "wire_bytes",
                                          (json_int_t)e->last_delta.wire_bytes, "saved_bytes",
                                          (json_int_t)(e->last_delta.piece_bytes - e->last_delta.wire_bytes),
                                          "refetched", (json_int_t)e->last_delta.refetched, "saved_bytes_total",
                                          (json_int_t)(e->delta_total.piece_bytes - e->delta_total.wire_bytes),
                                          "refetched_total", (json_int_t)e->delta_total.refetched));
    }
    if (j && e->phase[0])
        json_object_set_new(j, "progress",
                            json_pack("{s:s, s:I, s:I}", "phase", e->phase, "bytes", (json_int_t)e->progress_bytes,
                                      "total", (json_int_t)e->progress_total));
    return j;
}

static json_t *trainers_json_locked(const ctl_model_t *m, double now)
{
    json_t *arr = json_array();
    int r;
    for (r = 0; r < m->world; r++) {
        const ctl_trainer_t *t = &m->trainers[r];
        json_array_append_new(arr, json_pack("{s:i, s:b, s:s, s:O*, s:I, s:s, s:f}", "rank", r, "registered",
                                             t->registered, "host", t->host, "endpoint", t->endpoint, "version",
                                             (json_int_t)t->version, "presence",
                                             !t->registered                           ? "unregistered"
                                             : is_gone(m, t->gone, t->last_seen, now) ? "gone"
                                                                                      : "live",
                                             "last_seen", t->last_seen));
    }
    return arr;
}

json_t *ctl_trainers_json(ctl_model_t *m)
{
    json_t *arr;
    pthread_mutex_lock(&m->lock);
    arr = trainers_json_locked(m, ctl_unix_now());
    pthread_mutex_unlock(&m->lock);
    return arr;
}

/* An entry that cannot be built (a field no JSON can hold) is never left
 * out silently: logged, and shown with what is known and why. */
static json_t *engine_json_or_error(const ctl_model_t *m, const ctl_engine_t *e, double now)
{
    json_t *j = engine_json(m, e, now);
    if (j != NULL)
        return j;
    LOG_ERROR("engine %s: its status entry cannot be built (a field is not valid JSON: host, last_error, "
              "or a non-finite figure); shown with an error field",
              e->id);
    return json_pack("{s:s, s:s, s:I, s:s}", "id", e->id, "state", e->state, "version", (json_int_t)e->version,
                     "error", "this engine's status entry could not be built (see the endpoint's log)");
}

json_t *ctl_status_json(ctl_model_t *m)
{
    return ctl_status_json_at(m, 0);
}

json_t *ctl_status_json_at(ctl_model_t *m, double now)
{
    json_t *trainers, *engines = json_array(), *j;
    int i;
    if (now <= 0)
        now = ctl_unix_now();
    pthread_mutex_lock(&m->lock);
    trainers = trainers_json_locked(m, now);
    for (i = 0; i < m->nengines; i++)
        json_array_append_new(engines, engine_json_or_error(m, &m->engines[i], now));
    j = json_pack("{s:I, s:f, s:i, s:o, s:o, s:i, s:o, s:f}", "latest_version", (json_int_t)m->latest,
                  "published_at", m->latest_at, "world", m->world, "trainers", trainers, "engines", engines,
                  "pending", m->npending, "pending_versions", ctl_pending_json_locked(m), "lease_s",
                  m->lease_s > 0 ? m->lease_s : CTL_LEASE_S);
    pthread_mutex_unlock(&m->lock);
    return j;
}

const json_t *ctl_state_layouts(const json_t *state)
{
    const json_t *l = json_object_get(state, "layouts");
    return json_is_array(l) ? l : NULL;
}

json_t *ctl_state_json(ctl_model_t *m)
{
    json_t *records = json_array(), *engines = json_array(), *trainers, *j;
    int i;
    pthread_mutex_lock(&m->lock);
    trainers = trainers_json_locked(m, ctl_unix_now());
    for (i = 0; i < m->nrecords; i++) {
        if (m->records[i].json == NULL)
            m->records[i].json = wsync_version_record_to_json(&m->records[i].rec);
        json_array_append(records, m->records[i].json);
    }
    for (i = 0; i < m->nengines; i++) {
        const ctl_engine_t *e = &m->engines[i];
        json_array_append_new(engines, json_pack("{s:s, s:s, s:i, s:I, s:O*}", "id", e->id, "host", e->host,
                                                 "local_ranks", e->local_ranks, "version", (json_int_t)e->version,
                                                 "endpoint", e->endpoint));
    }
    j = json_pack("{s:i, s:I, s:f, s:o, s:o, s:o, s:o, s:I}", "format", 1, "latest_version", (json_int_t)m->latest,
                  "published_at", m->latest_at, "versions", records, "trainers", trainers, "engines", engines,
                  "layouts", ctl_layouts_state_locked(m), "log_seq", (json_int_t)m->journal_seq);
    pthread_mutex_unlock(&m->lock);
    return j;
}

wsync_status_t ctl_state_load(ctl_model_t *m, const json_t *s, const char *path)
{
    const json_t *records = json_object_get(s, "versions"), *engines = json_object_get(s, "engines");
    const json_t *trainers = json_object_get(s, "trainers"), *e;
    char err[256] = "";
    size_t i;
    int changed = 0;

    if (!json_is_object(s) || json_integer_value(json_object_get(s, "format")) != 1 ||
        !json_is_integer(json_object_get(s, "latest_version")) || !json_is_array(records) ||
        !json_is_array(engines) || !json_is_array(trainers))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "state file %s: not a wsync state file (format 1 with latest_version, "
                           "versions, trainers, engines); fix or move it away",
                           path);
    if (json_integer_value(json_object_get(s, "latest_version")) < 0)
        return wsync_error(WSYNC_ERR_FORMAT, "state file %s: latest_version is negative; fix or move it away", path);
    m->latest = (uint64_t)json_integer_value(json_object_get(s, "latest_version"));
    m->latest_at = json_number_value(json_object_get(s, "published_at"));
    m->journal_seq = (uint64_t)json_integer_value(json_object_get(s, "log_seq"));
    json_array_foreach(records, i, e)
    {
        wsync_version_record_t rec;
        if (m->nrecords == CTL_RETAIN)
            return wsync_error(WSYNC_ERR_FORMAT, "state file %s: more than %d versions; fix or move it away", path,
                               CTL_RETAIN);
        if (wsync_version_record_from_json(e, &rec) != WSYNC_OK)
            return wsync_error(WSYNC_ERR_FORMAT, "state file %s: versions[%zu]: %s; fix or move it away", path, i,
                               wsync_last_error());
        /* A file from before layouts kept each record's manifest in it: it
         * becomes the layout (written on its own at the next save). */
        if (rec.manifest && ctl_layout_digest_ok(rec.manifest_digest)) {
            if (ctl_layout_add_locked(m, rec.manifest_digest, rec.manifest, 0) != 0) {
                wsync_version_record_clear(&rec);
                return wsync_error(WSYNC_ERR_NOMEM, "state file %s: out of memory", path);
            }
            json_decref(rec.manifest);
            rec.manifest = NULL;
        }
        ctl_record_push_locked(m, &rec);
    }
    json_array_foreach(trainers, i, e)
    {
        json_t *reg = json_pack("{s:O, s:I, s:O, s:O}", "rank", json_object_get(e, "rank"), "world",
                                (json_int_t)json_array_size(trainers), "host", json_object_get(e, "host"),
                                "endpoint", json_object_get(e, "endpoint"));
        int code;
        if (!json_is_true(json_object_get(e, "registered"))) {
            json_decref(reg);
            continue;
        }
        if (reg == NULL)
            snprintf(err, sizeof(err), "rank, host or endpoint missing or of the wrong type");
        code = reg ? ctl_register_trainer(m, reg, err, sizeof(err), &changed) : 422;
        json_decref(reg);
        if (code != 200)
            return wsync_error(WSYNC_ERR_FORMAT, "state file %s: trainers[%zu]: %s", path, i, err);
        /* A report of a version that was not published yet is not durable:
         * the rank sends it again (wsync_publisher_wait_published sees it is
         * missing), so what the rank holds here is at most the latest. */
        m->trainers[i].version = (uint64_t)json_integer_value(json_object_get(e, "version"));
        if (m->trainers[i].version > m->latest)
            m->trainers[i].version = m->latest;
    }
    json_array_foreach(engines, i, e)
    {
        json_t *reg = json_pack("{s:O, s:O, s:O}", "id", json_object_get(e, "id"), "host",
                                json_object_get(e, "host"), "local_ranks", json_object_get(e, "local_ranks"));
        int code;
        if (reg == NULL)
            snprintf(err, sizeof(err), "id, host or local_ranks missing or of the wrong type");
        code = reg ? ctl_register_engine(m, reg, err, sizeof(err), &changed) : 422;
        json_decref(reg);
        if (code != 200)
            return wsync_error(WSYNC_ERR_FORMAT, "state file %s: engines[%zu]: %s", path, i, err);
        m->engines[m->nengines - 1].version = (uint64_t)json_integer_value(json_object_get(e, "version"));
        if (json_is_object(json_object_get(e, "endpoint")))
            m->engines[m->nengines - 1].endpoint = json_deep_copy(json_object_get(e, "endpoint"));
    }
    return WSYNC_OK;
}
