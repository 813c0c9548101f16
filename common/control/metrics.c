/* metrics.c: GET /metrics in Prometheus' text format (version 0.0.4). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/control/server_internal.h"

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf_t;

static void add(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            return;
    }
}

/* A label value as the text format wants it: backslash, double quote and
 * newline escaped (engine ids cannot hold them today; the format is kept
 * whatever an id may hold later). */
static const char *label(const char *v, char *buf, size_t len)
{
    size_t o = 0;
    for (; *v && o + 3 < len; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n')
            buf[o++] = '\\';
        buf[o++] = *v == '\n' ? 'n' : *v;
    }
    buf[o] = '\0';
    return buf;
}

/* Gone as GET /v1/status says it (model_status.c): marked by the sweep, or
 * not seen for the lease by now, so both answers agree between sweeps. */
static int up(int gone, double last_seen, const ctl_model_t *m, double now)
{
    const double lease = m->lease_s > 0 ? m->lease_s : CTL_LEASE_S;
    return !gone && now - last_seen < lease;
}

/* Per engine node: live or gone, the state it is in, its last sync's
 * duration, its failed pulls, when it was last seen. Lock held. */
static void engine_metrics(sbuf_t *b, const ctl_model_t *m, double now)
{
    static const char *states[] = {"idle", "pulling", "ready", "failed"};
    char id[300];
    int i, k;
    add(b, "# HELP wsync_engine_up 1 while the engine node is live, 0 once gone (not seen for the lease, or "
           "exited).\n# TYPE wsync_engine_up gauge\n");
    for (i = 0; i < m->nengines; i++)
        add(b, "wsync_engine_up{engine=\"%s\"} %d\n", label(m->engines[i].id, id, sizeof(id)),
            up(m->engines[i].gone, m->engines[i].last_seen, m, now));
    add(b, "# HELP wsync_engine_state The state each engine node last reported (1 for the one it is in).\n"
           "# TYPE wsync_engine_state gauge\n");
    for (i = 0; i < m->nengines; i++)
        for (k = 0; k < 4; k++)
            add(b, "wsync_engine_state{engine=\"%s\",state=\"%s\"} %d\n", label(m->engines[i].id, id, sizeof(id)),
                states[k], strcmp(m->engines[i].state, states[k]) == 0);
    add(b, "# HELP wsync_engine_last_sync_seconds Duration of each engine node's last sync.\n"
           "# TYPE wsync_engine_last_sync_seconds gauge\n");
    for (i = 0; i < m->nengines; i++)
        add(b, "wsync_engine_last_sync_seconds{engine=\"%s\"} %g\n", label(m->engines[i].id, id, sizeof(id)),
            m->engines[i].last_sync_s);
    add(b, "# HELP wsync_engine_failures_total Pulls each engine node reported failed.\n"
           "# TYPE wsync_engine_failures_total counter\n");
    for (i = 0; i < m->nengines; i++)
        add(b, "wsync_engine_failures_total{engine=\"%s\"} %llu\n", label(m->engines[i].id, id, sizeof(id)),
            (unsigned long long)m->engines[i].failures);
    add(b, "# HELP wsync_engine_last_seen_timestamp_seconds When each engine node was last seen (unix time).\n"
           "# TYPE wsync_engine_last_seen_timestamp_seconds gauge\n");
    for (i = 0; i < m->nengines; i++)
        add(b, "wsync_engine_last_seen_timestamp_seconds{engine=\"%s\"} %.3f\n",
            label(m->engines[i].id, id, sizeof(id)), m->engines[i].last_seen);
    add(b, "# HELP wsync_trainer_rank_up 1 while the trainer rank is live, 0 when gone or not registered.\n"
           "# TYPE wsync_trainer_rank_up gauge\n");
    for (i = 0; i < m->world; i++)
        add(b, "wsync_trainer_rank_up{rank=\"%d\"} %d\n", i,
            m->trainers[i].registered && up(m->trainers[i].gone, m->trainers[i].last_seen, m, now));
    add(b,
        "# HELP wsync_versions_pending Versions some trainer ranks reported and others not yet.\n"
        "# TYPE wsync_versions_pending gauge\nwsync_versions_pending %d\n",
        m->npending);
}

char *ctl_metrics_text(wsync_control_server_t *s)
{
    ctl_model_t *m = &s->model;
    sbuf_t b = {0};
    uint64_t cum = 0;
    char idb[300];
    const double now = ctl_unix_now();
    int i;

    pthread_mutex_lock(&m->lock);
    add(&b, "# HELP wsync_latest_version Newest published version.\n# TYPE wsync_latest_version gauge\n");
    add(&b, "wsync_latest_version %llu\n", (unsigned long long)m->latest);
    add(&b, "# HELP wsync_engine_version Version each engine node holds verified.\n"
            "# TYPE wsync_engine_version gauge\n");
    for (i = 0; i < m->nengines; i++)
        add(&b, "wsync_engine_version{engine=\"%s\"} %llu\n", label(m->engines[i].id, idb, sizeof(idb)),
            (unsigned long long)m->engines[i].version);
    engine_metrics(&b, m, now);
    add(&b, "# HELP wsync_engine_lag Versions each engine node is behind the latest.\n"
            "# TYPE wsync_engine_lag gauge\n");
    for (i = 0; i < m->nengines; i++)
        add(&b, "wsync_engine_lag{engine=\"%s\"} %llu\n", label(m->engines[i].id, idb, sizeof(idb)),
            (unsigned long long)(m->latest > m->engines[i].version ? m->latest - m->engines[i].version : 0));
    add(&b, "# HELP wsync_sync_duration_seconds Time from pull start to ready, per engine sync.\n"
            "# TYPE wsync_sync_duration_seconds histogram\n");
    for (i = 0; i < CTL_HIST_BUCKETS; i++) {
        cum += m->hist[i];
        add(&b, "wsync_sync_duration_seconds_bucket{le=\"%g\"} %llu\n", ctl_hist_bounds[i], (unsigned long long)cum);
    }
    cum += m->hist[CTL_HIST_BUCKETS];
    add(&b, "wsync_sync_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    add(&b, "wsync_sync_duration_seconds_sum %g\nwsync_sync_duration_seconds_count %llu\n", m->sync_seconds,
        (unsigned long long)m->syncs);
    add(&b,
        "# HELP wsync_bytes_synced_total Image bytes made ready on engine nodes.\n"
        "# TYPE wsync_bytes_synced_total counter\nwsync_bytes_synced_total %llu\n",
        (unsigned long long)m->bytes_synced);
    add(&b,
        "# HELP wsync_delta_pieces_total Pieces engine nodes received as delta wires (docs/DELTA.md).\n"
        "# TYPE wsync_delta_pieces_total counter\nwsync_delta_pieces_total %llu\n"
        "# HELP wsync_delta_bytes_saved_total Bytes delta wires kept off the wire (piece bytes less wire bytes).\n"
        "# TYPE wsync_delta_bytes_saved_total counter\nwsync_delta_bytes_saved_total %llu\n"
        "# HELP wsync_delta_refetches_total Delta pieces that failed their check and were fetched again in full.\n"
        "# TYPE wsync_delta_refetches_total counter\nwsync_delta_refetches_total %llu\n",
        (unsigned long long)m->delta_total.pieces,
        (unsigned long long)(m->delta_total.piece_bytes - m->delta_total.wire_bytes),
        (unsigned long long)m->delta_total.refetched);
    add(&b,
        "# HELP wsync_sync_failures_total Engine syncs reported failed.\n"
        "# TYPE wsync_sync_failures_total counter\nwsync_sync_failures_total %llu\n",
        (unsigned long long)m->failures);
    pthread_mutex_unlock(&m->lock);
    if (s->state_path) {
        uint64_t failures = 0;
        int failing = ctl_state_failing(s, NULL, 0, &failures, NULL);
        add(&b,
            "# HELP wsync_state_write_failures_total State-file writes that failed.\n"
            "# TYPE wsync_state_write_failures_total counter\nwsync_state_write_failures_total %llu\n",
            (unsigned long long)failures);
        pthread_mutex_lock(&m->lock);
        add(&b,
            "# HELP wsync_state_bytes_written_total Bytes written to the state file and its log.\n"
            "# TYPE wsync_state_bytes_written_total counter\nwsync_state_bytes_written_total %llu\n",
            (unsigned long long)m->store_bytes_written);
        pthread_mutex_unlock(&m->lock);
        add(&b,
            "# HELP wsync_state_file_ok 1 while the last state-file write worked, else 0.\n"
            "# TYPE wsync_state_file_ok gauge\nwsync_state_file_ok %d\n",
            !failing);
    }
    pthread_mutex_lock(&s->wait_lock);
    {
        const req_ctx_t *w;
        unsigned long long nwait = 0;
        for (w = s->waiters; w; w = w->next_waiter)
            nwait++;
        add(&b,
            "# HELP wsync_long_polls_waiting Long polls held open (suspended) right now.\n"
            "# TYPE wsync_long_polls_waiting gauge\nwsync_long_polls_waiting %llu\n",
            nwait);
    }
    add(&b, "# HELP wsync_http_requests_total HTTP requests by route and status code.\n"
            "# TYPE wsync_http_requests_total counter\n");
    for (i = 0; i < s->ncounts; i++)
        add(&b, "wsync_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n", s->counts[i].route,
            s->counts[i].code, (unsigned long long)s->counts[i].n);
    pthread_mutex_unlock(&s->wait_lock);
    return b.p ? b.p : strdup("");
}
