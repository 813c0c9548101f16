/* model.c: the control endpoint's rules for trainer ranks and engine nodes:
 * registration (common/proto/relay_registration.h for nodes) and engine
 * reports (common/proto/engine_report.h). Versions are model_publish.c's,
 * the views model_views.c's and model_status.c's. */
#include "common/control/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/control/validate.h"
#include "common/proto/engine_report.h"
#include "common/proto/relay_registration.h"

const double ctl_hist_bounds[CTL_HIST_BUCKETS] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

void ctl_model_init(ctl_model_t *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
}

void ctl_model_free(ctl_model_t *m)
{
    int i;
    ctl_publish_free_locked(m);
    for (i = 0; i < m->world; i++)
        json_decref(m->trainers[i].endpoint);
    free(m->trainers);
    for (i = 0; i < m->nengines; i++)
        json_decref(m->engines[i].endpoint);
    free(m->engines);
    ctl_layouts_free_locked(m);
    json_decref(m->journal);
    pthread_mutex_destroy(&m->lock);
}

int ctl_set_world_locked(ctl_model_t *m, int world, char *err, size_t errlen)
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

/* Not seen for the lease by `now`: status shows it gone (model_status.c)
 * even before the sweep marks it, so being seen again is a change. */
static int lease_over(const ctl_model_t *m, double last_seen, double now)
{
    return now - last_seen >= (m->lease_s > 0 ? m->lease_s : CTL_LEASE_S);
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
    if ((code = ctl_set_world_locked(m, world, err, errlen)) != 0) {
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
    if (*changed || t->gone || lease_over(m, t->last_seen, ctl_unix_now()))
        m->gen++;
    else
        m->seen_dirty = 1;
    t->gone = 0;
    t->last_seen = ctl_unix_now();
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

/* The new engine `id`, added (up to the limit); NULL with the HTTP
 * code in *code and `err`. Lock held. */
static ctl_engine_t *engine_slot_locked(ctl_model_t *m, const char *id, int *code, char *err, size_t errlen,
                                        int *changed)
{
    int max = m->max_engines > 0 ? m->max_engines : CTL_MAX_ENGINES;
    ctl_engine_t *e;
    if (m->nengines >= max) {
        snprintf(err, errlen,
                 "engine node '%s' refused: %d engine nodes are registered, the limit of this "
                 "endpoint (wsync serve --max-engines); nodes already registered may register again",
                 id, max);
        *code = 403;
        return NULL;
    }
    if (m->nengines == m->cap_engines) {
        int cap = m->cap_engines ? m->cap_engines * 2 : 16;
        ctl_engine_t *ne = realloc(m->engines, (size_t)cap * sizeof(*ne));
        if (ne == NULL) {
            snprintf(err, errlen, "out of memory");
            *code = 500;
            return NULL;
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
    return e;
}

/* The registration's fields into `e`; journaled when they changed. */
static void engine_update_locked(ctl_model_t *m, ctl_engine_t *e, wsync_relay_registration_t *reg, double now,
                                 int *changed)
{
    if (strcmp(e->host, reg->host) != 0 || e->local_ranks != reg->local_ranks ||
        !json_equal(e->endpoint, reg->endpoint)) {
        snprintf(e->host, sizeof(e->host), "%s", reg->host);
        e->local_ranks = reg->local_ranks;
        json_decref(e->endpoint);
        e->endpoint = json_incref(reg->endpoint); /* never changed in place */
        *changed = 1;
    }
    if (*changed) {
        int64_t holds = reg->holds;
        reg->holds = -1; /* a held version is logged as such, below */
        ctl_journal_locked(m,
                           json_pack("{s:s, s:o}", "op", "engine", "body", wsync_relay_registration_to_json(reg)));
        reg->holds = holds;
        e->updated = now;
    }
    /* A heartbeat says what the node holds now: a node that restarted, or
     * whose in-place pull failed, holds nothing, whatever it reported before. */
    if (reg->holds >= 0 && (uint64_t)reg->holds != e->version && (uint64_t)reg->holds <= m->latest && !m->replaying) {
        e->version = (uint64_t)reg->holds;
        ctl_journal_locked(m, json_pack("{s:s, s:s, s:I}", "op", "held", "id", e->id, "version",
                                        (json_int_t)e->version));
        *changed = 1;
    }
}

int ctl_register_engine(ctl_model_t *m, const json_t *body, char *err, size_t errlen, int *changed)
{
    int code = ctl_check(body, &ctl_req_register_engine, err, errlen);
    wsync_relay_registration_t reg;
    ctl_engine_t *e;
    double now = ctl_unix_now();
    if (code)
        return code;
    if (wsync_relay_registration_from_json(body, &reg) != WSYNC_OK) {
        snprintf(err, errlen, "%s", wsync_last_error());
        return 422;
    }
    pthread_mutex_lock(&m->lock);
    e = ctl_find_engine_locked(m, reg.id);
    if (e && (code = same_id_other_host(m, e, reg.host, now, err, errlen, changed)) != 0)
        e = NULL;
    else if (e == NULL)
        e = engine_slot_locked(m, reg.id, &code, err, errlen, changed);
    if (e == NULL) {
        pthread_mutex_unlock(&m->lock);
        wsync_relay_registration_clear(&reg);
        return code;
    }
    engine_update_locked(m, e, &reg, now, changed);
    if (e->gone)
        LOG_INFO("engine %s is back (from %s)", reg.id, e->host);
    if (*changed || e->gone || lease_over(m, e->last_seen, now))
        m->gen++;
    else
        m->seen_dirty = 1;
    e->gone = e->exited = 0;
    e->last_seen = now;
    pthread_mutex_unlock(&m->lock);
    wsync_relay_registration_clear(&reg);
    return 200;
}

/* The part of a report that is about the node, not a pull: it was seen;
 * a note on its ranks ("node"), or its clean stop ("exited"). 1 when the
 * report was only that. Lock held. */
static int report_presence(ctl_model_t *m, ctl_engine_t *e, const wsync_engine_report_t *r)
{
    double now = ctl_unix_now();
    if ((e->gone || lease_over(m, e->last_seen, now)) && r->state != WSYNC_REPORT_EXITED) {
        e->gone = e->exited = 0;
        m->gen++;
    }
    e->last_seen = now;
    if (r->has_node) {
        /* What the node says of its local ranks (one lost, or replaced; ""
         * when all run again): the pull state is unchanged. */
        if (strcmp(r->node, e->node) != 0) {
            if (r->node[0])
                LOG_WARN("engine %s: %s", e->id, r->node);
            else
                LOG_INFO("engine %s: every local rank runs again", e->id);
            snprintf(e->node, sizeof(e->node), "%.*s", (int)sizeof(e->node) - 1, r->node); /* cut as before */
            m->gen++;
        }
        return 1;
    }
    if (r->state == WSYNC_REPORT_EXITED) {
        /* A clean stop: listed as gone (with when), no longer live. */
        if (!e->exited)
            LOG_INFO("engine %s exited", e->id);
        e->exited = e->gone = 1;
        m->gen++;
        return 1;
    }
    return 0;
}

static void add_delta(wsync_report_delta_t *to, const wsync_report_delta_t *d)
{
    to->pieces += d->pieces;
    to->wire_bytes += d->wire_bytes;
    to->piece_bytes += d->piece_bytes;
    to->refetched += d->refetched;
}

/* A pull ready or failed: the figures, the metrics, what the node holds. */
static void report_done(ctl_model_t *m, ctl_engine_t *e, const wsync_engine_report_t *r)
{
    int b;
    if (r->state == WSYNC_REPORT_READY) {
        e->version = r->version;
        e->last_sync_s = r->duration_s;
        /* Below a microsecond the rate means nothing (1e-300 s made it
         * infinite, which no JSON can hold): shown as 0. */
        e->last_gbps = r->duration_s >= 1e-6 ? (double)r->bytes / r->duration_s / 1e9 : 0;
        e->last_error[0] = '\0';
        m->bytes_synced += r->bytes;
        m->syncs++;
        e->last_delta = r->delta; /* zero when the report says none */
        add_delta(&e->delta_total, &r->delta);
        add_delta(&m->delta_total, &r->delta);
        m->sync_seconds += r->duration_s;
        for (b = 0; b < CTL_HIST_BUCKETS && r->duration_s > ctl_hist_bounds[b]; b++)
            ;
        m->hist[b]++;
    } else if (r->state == WSYNC_REPORT_FAILED) {
        snprintf(e->last_error, sizeof(e->last_error), "%s", r->has_error ? r->error : "(no message)");
        m->failures++;
        e->failures++;
        /* A failed pull in place overwrote the one image: the node says it
         * holds nothing (or what it still holds), and status says so. */
        if (r->holds >= 0 && (uint64_t)r->holds <= e->version)
            e->version = (uint64_t)r->holds;
    }
}

/* Lock held: the report `r` of engine `e`; an HTTP code. */
static int report_locked(ctl_model_t *m, ctl_engine_t *e, const wsync_engine_report_t *r, char *err, size_t errlen,
                         int *changed)
{
    const char *state = wsync_report_state_name(r->state);
    *changed = 0;
    if (report_presence(m, e, r))
        return 200;
    if (r->phase != WSYNC_PHASE_NONE) {
        /* A progress note: annotates the pull in progress, never changes
         * the state (a note sent just before "ready" may arrive after it). */
        if (strcmp(e->state, "pulling") == 0 && e->target == r->version) {
            snprintf(e->phase, sizeof(e->phase), "%s", wsync_report_phase_name(r->phase));
            e->progress_bytes = r->bytes;
            e->progress_total = r->total;
            e->updated = ctl_unix_now();
            m->gen++;
        }
        return 200;
    }
    /* Any version up to the latest was published (the state file keeps the
     * latest across restarts), retained or not: an engine that verified one
     * holds it, even when its report comes after a restart. */
    if (r->state == WSYNC_REPORT_READY && (r->version > m->latest || r->version == 0)) {
        snprintf(err, errlen, "version %llu was never published (latest is %llu)", (unsigned long long)r->version,
                 (unsigned long long)m->latest);
        return 409;
    }
    if (strcmp(e->state, state) != 0 || e->target != r->version)
        LOG_INFO("engine %s: %s version %llu%s%s", e->id, state, (unsigned long long)r->version,
                 r->state == WSYNC_REPORT_FAILED ? ": " : "", r->state == WSYNC_REPORT_FAILED ? r->error : "");
    snprintf(e->state, sizeof(e->state), "%s", state);
    e->target = r->version;
    e->phase[0] = '\0';
    e->progress_bytes = e->progress_total = 0;
    e->updated = ctl_unix_now();
    report_done(m, e, r);
    if (r->state != WSYNC_REPORT_PULLING)
        ctl_journal_locked(m, json_pack("{s:s, s:s, s:I}", "op", "held", "id", e->id, "version",
                                        (json_int_t)e->version));
    *changed = r->state != WSYNC_REPORT_PULLING;
    m->gen++;
    return 200;
}

int ctl_report(ctl_model_t *m, const char *id, const json_t *body, char *err, size_t errlen, int *changed)
{
    int code = ctl_check(body, &ctl_req_report, err, errlen);
    wsync_engine_report_t r;
    ctl_engine_t *e;
    if (code)
        return code;
    if (wsync_engine_report_from_json(body, &r) != WSYNC_OK) {
        snprintf(err, errlen, "%s", wsync_last_error());
        return 422;
    }
    pthread_mutex_lock(&m->lock);
    e = ctl_find_engine_locked(m, id);
    if (e == NULL) {
        snprintf(err, errlen, "engine '%s' is not registered (POST /v1/engines/register first)", id);
        code = 404;
    } else {
        code = report_locked(m, e, &r, err, errlen, changed);
    }
    pthread_mutex_unlock(&m->lock);
    return code;
}
