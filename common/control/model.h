/* model.h: the control endpoint's state: trainer ranks, engine nodes,
 * published versions and the reports towards the next one, with the rules
 * that change it. Pure (no HTTP); every function takes the model's lock. */
#ifndef WSYNC_CONTROL_MODEL_H
#define WSYNC_CONTROL_MODEL_H

#include <jansson.h>
#include <pthread.h>

#include "common/proto/engine_report.h"
#include "common/proto/version_record.h"
#include "common/wsync.h"

#define CTL_RETAIN 8 /* published versions kept with their records */
#define CTL_MAX_WORLD 4096
#define CTL_MAX_PENDING 16 /* incomplete versions held at once */
#define CTL_HIST_BUCKETS 12
#define CTL_MAX_ENGINES 100000 /* default limit of registered engine nodes */
#define CTL_LAYOUTS_SPARE 4    /* layouts no retained or pending version names, kept */
#define CTL_MAX_DROPPED 64

#define CTL_LEASE_S 30.0 /* default: not seen for this long shows as "gone" (serve --lease) */

typedef struct ctl_trainer {
    int registered;
    char host[128];
    json_t *endpoint;
    uint64_t version; /* last version this rank reported */
    double last_seen; /* unix time of its last request (registration, heartbeat, publish) */
    int gone;         /* not seen for the lease */
} ctl_trainer_t;

typedef struct ctl_engine {
    char id[128];
    char host[128];
    int local_ranks;
    json_t *endpoint;
    char state[16];   /* idle | pulling | ready | failed */
    uint64_t version; /* held (last ready) */
    uint64_t target;  /* being pulled / failed */
    double last_sync_s, last_gbps;
    char last_error[512];
    double updated; /* unix time */
    char phase[16]; /* while pulling: "setup" | "landing" | "" (no note yet) */
    uint64_t progress_bytes, progress_total;
    double last_seen;  /* unix time of its last request (registration, heartbeat, report) */
    int gone;          /* not seen for the lease, or said it exited */
    int exited;        /* reported "exited" (a clean stop) */
    char node[256];    /* what the node says of its ranks ("" when all run): a rank lost or replaced */
    uint64_t failures; /* pulls reported failed */
    /* Delta pulls (docs/DELTA.md): the last ready version's counts, and
     * the totals over its ready reports. */
    wsync_report_delta_t last_delta, delta_total;
} ctl_engine_t;

/* A version some trainer ranks reported and others not yet. */
typedef struct ctl_pending {
    uint64_t version;
    int world;
    wsync_version_record_t head;   /* its layout fields only (no pieces, no trainers) */
    wsync_record_piece_t **pieces; /* [world]: each rank's report, NULL until it came */
    size_t *npieces;               /* [world] */
    int reported;
} ctl_pending_t;

/* A published version: the record, and its JSON built at the edge
 * (ctl_version_json) once, dropped when the record changes (late digests),
 * so answers cached by JSON object (routes.c) follow the record. */
typedef struct ctl_record {
    wsync_version_record_t rec;
    json_t *json; /* NULL until asked */
} ctl_record_t;

/* A layout (layouts.c): a manifest under its digest, posted once. */
typedef struct ctl_layout {
    char digest[33];
    json_t *doc;  /* {"digest","manifest"}: GET /v1/layouts/<digest> */
    uint64_t seq; /* registration order */
    int saved;    /* written beside the state file */
} ctl_layout_t;

typedef struct ctl_model {
    pthread_mutex_t lock;
    uint64_t gen; /* bumped by every change: caches key on it */
    uint64_t latest;
    double latest_at;
    ctl_record_t records[CTL_RETAIN]; /* newest last; GET /v1/versions/<v> */
    int nrecords;
    int world;
    ctl_trainer_t *trainers; /* [world] */
    ctl_engine_t *engines;
    int nengines, cap_engines;
    int max_engines; /* 0: CTL_MAX_ENGINES */
    ctl_pending_t *pending;
    int npending;
    ctl_layout_t *layouts;
    int nlayouts, cap_layouts;
    uint64_t layout_seq;
    char dropped[CTL_MAX_DROPPED][33]; /* layouts dropped whose files are still to be removed */
    int ndropped;
    /* Presence: lease_s (0: CTL_LEASE_S) and forget_after_s (0: never)
     * are read by ctl_sweep; seen_dirty marks a last_seen moved since the
     * last sweep (status shows it within a second, without a rebuild per
     * heartbeat). */
    double lease_s, forget_after_s;
    int seen_dirty;
    /* What the state file has not got yet (state_store.c): registrations and
     * held versions as log entries (`journal`, a JSON array), or, after a
     * publish or a new layout, the whole state (`snapshot_due`). */
    json_t *journal;
    int snapshot_due, replaying;
    uint64_t journal_seq; /* the last entry's sequence number (the state file records it) */
    uint64_t log_bytes, snapshot_bytes, store_bytes_written;
    /* metrics */
    uint64_t bytes_synced, failures, syncs;
    wsync_report_delta_t delta_total; /* over every engine's ready reports */
    double sync_seconds;
    uint64_t hist[CTL_HIST_BUCKETS + 1];
} ctl_model_t;

extern const double ctl_hist_bounds[CTL_HIST_BUCKETS];

void ctl_model_init(ctl_model_t *m);
void ctl_model_free(ctl_model_t *m);

/* Each returns an HTTP status and, for errors, a message in `err`. A 2xx
 * sets *changed when durable state changed (the caller saves it). */
int ctl_register_trainer(ctl_model_t *m, const json_t *body, char *err, size_t errlen, int *changed);
int ctl_register_engine(ctl_model_t *m, const json_t *body, char *err, size_t errlen, int *changed);
int ctl_publish(ctl_model_t *m, const json_t *body, json_t **reply, char *err, size_t errlen, int *changed);
int ctl_report(ctl_model_t *m, const char *engine, const json_t *body, char *err, size_t errlen, int *changed);

/* model_publish.c, lock held: free the published records and the pending
 * versions (ctl_model_free); keep `rec` (taken) as the newest record, the
 * oldest going past CTL_RETAIN. */
void ctl_publish_free_locked(ctl_model_t *m);
void ctl_record_push_locked(ctl_model_t *m, wsync_version_record_t *rec);
double ctl_unix_now(void);
/* Lock held: grow (or set) the trainer table to `world` ranks; 0, or the
 * HTTP code with `err`. */
int ctl_set_world_locked(ctl_model_t *m, int world, char *err, size_t errlen);

/* Every second: marks as gone what was not seen for the lease (and a
 * trainer rank, an engine seen again as live), forgets what was not seen for
 * forget_after_s. 1 when something was forgotten (durable: save). */
int ctl_sweep(ctl_model_t *m, double now); /* now <= 0: the clock */
/* Lock held: queue a state-file log entry (new reference taken). */
void ctl_journal_locked(ctl_model_t *m, json_t *entry);
/* Applies a state-file log entry (state_store.c replays the log at start);
 * 0, or -1 with the reason in err. */
int ctl_journal_apply(ctl_model_t *m, const json_t *entry, char *err, size_t errlen);

/* GET /v1/status as a JSON tree, presence as of `now` (<= 0: the clock). */
json_t *ctl_status_json(ctl_model_t *m);
json_t *ctl_status_json_at(ctl_model_t *m, double now);
/* The same document as text (model_status.c: written from the records, no
 * tree), with `extra` (NULL, or members as JSON text: "\"k\":v,...")
 * before its closing brace. malloc'ed, its length in *len; NULL out of
 * memory. *valid_until: when the first live entry's lease runs out (the
 * text is true until then, or until the generation moves). */
char *ctl_status_text(ctl_model_t *m, double now, const char *extra, size_t *len, double *valid_until);
/* Lock held (presence.c, model.c): the engine `id` or NULL; the versions
 * some trainer ranks reported and others not yet, oldest first:
 * [{"version", "reported": [ranks], "missing": [ranks]}]. */
ctl_engine_t *ctl_find_engine_locked(ctl_model_t *m, const char *id);
json_t *ctl_pending_json_locked(const ctl_model_t *m);
json_t *ctl_trainers_json(ctl_model_t *m);
json_t *ctl_version_json(ctl_model_t *m, uint64_t version); /* new ref or NULL */
/* 1 when version's record has every piece's digest (or is not retained:
 * nothing to wait for), 0 while some trainer rank's digests are to follow. */
int ctl_digests_done(ctl_model_t *m, uint64_t version);
uint64_t ctl_latest(ctl_model_t *m);
/* The oldest and newest retained records' versions (0, 0: none). */
void ctl_retained(ctl_model_t *m, uint64_t *oldest, uint64_t *newest);
uint64_t ctl_generation(ctl_model_t *m);

/* Layouts (layouts.c). POST /v1/layouts/<digest>: body {"manifest": {..}},
 * validated, its digest must be `digest`; 201 when new, 200 when known
 * (idempotent). */
int ctl_put_layout(ctl_model_t *m, const char *digest, const json_t *body, json_t **reply, char *err,
                   size_t errlen, int *changed);
json_t *ctl_layout_json(ctl_model_t *m, const char *digest); /* new ref or NULL */
int ctl_layout_digest_ok(const char *digest);                /* 32 lowercase hex digits */
/* With the lock held: is it registered; register (manifest borrowed; 0 or
 * -1 out of memory; no-op when known); drop spare layouts past the cap; the
 * digests as the state file lists them; free all (ctl_model_free). */
int ctl_layout_known_locked(const ctl_model_t *m, const char *digest);
int ctl_layout_add_locked(ctl_model_t *m, const char *digest, json_t *manifest, int saved);
void ctl_layouts_trim_locked(ctl_model_t *m);
json_t *ctl_layouts_state_locked(const ctl_model_t *m);
void ctl_layouts_free_locked(ctl_model_t *m);
/* For the state file's writer: layouts not written yet (each doc a new
 * reference; *out malloc'ed; -1 out of memory), marking one written, and
 * the digests of layouts dropped since the last call (not registered again). */
typedef struct ctl_layout_file {
    char digest[33];
    json_t *doc;
} ctl_layout_file_t;
int ctl_layouts_unsaved(ctl_model_t *m, ctl_layout_file_t **out);
void ctl_layout_mark_saved(ctl_model_t *m, const char *digest);
int ctl_layouts_take_dropped(ctl_model_t *m, char (*out)[33], int max);

/* Durable state: everything a restart needs. The state JSON lists the
 * layouts by digest; their manifests are files of their own (server.c), so
 * a version's save does not rewrite them. */
json_t *ctl_state_json(ctl_model_t *m);
wsync_status_t ctl_state_load(ctl_model_t *m, const json_t *state, const char *path);
/* Layout digests a state file lists (borrowed; NULL for files from before
 * layouts): the server reads each one's file and ctl_layout_add_locked()s it. */
const json_t *ctl_state_layouts(const json_t *state);

#endif
