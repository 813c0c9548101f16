/* model.h: the control endpoint's state: trainer ranks, engine nodes,
 * published versions and the reports towards the next one, with the rules
 * that change it. Pure (no HTTP); every function takes the model's lock. */
#ifndef WSYNC_CONTROL_MODEL_H
#define WSYNC_CONTROL_MODEL_H

#include <jansson.h>
#include <pthread.h>

#include "common/wsync.h"

#define CTL_RETAIN 8                /* published versions kept with their records */
#define CTL_MAX_WORLD 4096
#define CTL_MAX_PENDING 16          /* incomplete versions held at once */
#define CTL_HIST_BUCKETS 12
#define CTL_MAX_ENGINES 100000      /* default limit of registered engine nodes */

typedef struct ctl_trainer {
    int registered;
    char host[128];
    json_t *endpoint;
    uint64_t version;               /* last version this rank reported */
} ctl_trainer_t;

typedef struct ctl_engine {
    char id[128];
    char host[128];
    int local_ranks;
    json_t *endpoint;
    char state[16];                 /* idle | pulling | ready | failed */
    uint64_t version;               /* held (last ready) */
    uint64_t target;                /* being pulled / failed */
    double last_sync_s, last_gbps;
    char last_error[512];
    double updated;                 /* unix time */
} ctl_engine_t;

typedef struct ctl_pending {
    uint64_t version;
    int world;
    json_t *layout;                 /* manifest_digest, chunk_size, layout, layout_digest, image_size, world */
    json_t *manifest;               /* from rank 0 */
    json_t **pieces;                /* [world] */
    int reported;
} ctl_pending_t;

typedef struct ctl_model {
    pthread_mutex_t lock;
    uint64_t gen;                   /* bumped by every change: caches key on it */
    uint64_t latest;
    double latest_at;
    json_t *records[CTL_RETAIN];    /* newest last; GET /v1/versions/<v> */
    int nrecords;
    int world;
    ctl_trainer_t *trainers;        /* [world] */
    ctl_engine_t *engines;
    int nengines, cap_engines;
    int max_engines;                /* 0: CTL_MAX_ENGINES */
    ctl_pending_t *pending;
    int npending;
    /* metrics */
    uint64_t bytes_synced, failures, syncs;
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

json_t *ctl_status_json(ctl_model_t *m);
json_t *ctl_trainers_json(ctl_model_t *m);
json_t *ctl_version_json(ctl_model_t *m, uint64_t version);    /* new ref or NULL */
uint64_t ctl_latest(ctl_model_t *m);
uint64_t ctl_generation(ctl_model_t *m);

/* Durable state: everything a restart needs. */
json_t *ctl_state_json(ctl_model_t *m);
wsync_status_t ctl_state_load(ctl_model_t *m, const json_t *state, const char *path);

#endif
