/* server_internal.h: what the HTTP server and its route handlers share. */
#ifndef WSYNC_CONTROL_SERVER_INTERNAL_H
#define WSYNC_CONTROL_SERVER_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>

#include "common/control/client_limit.h"
#include "common/control/control_server.h"
#include "common/control/model.h"

#define CTL_BODY_CAP (64u << 10)    /* default request body limit */
#define CTL_PUBLISH_CAP (64u << 20) /* a layout's manifest (or a legacy publish with it): 100k tensors fit */
#define CTL_MAX_COUNTS 256
/* MHD's per-connection pool (headers, read buffer; bodies go to our own
 * buffer). MHD zeroes it per request, and the pages a held long poll touches
 * first when it is answered are faulted in then: at 256 KiB, answering
 * 10 000 long polls spent most of its ~1 s in memset and page faults; at
 * 32 KiB the server spent ~15-25 us of CPU per answered poll, at 8 KiB ~9.5
 * (control_bench, 2-core VM). It bounds request headers to ~3 KiB (431
 * past it: docs/API.md); a 46 MB upload took the same time as with 32 KiB. */
#define CTL_CONN_POOL ((size_t)8 * 1024)
#define CTL_MAX_POLL_MS 60000
#define CTL_REQUEST_TIMEOUT_S 30 /* default: a whole request (headers and body) must arrive within it */

typedef struct req_ctx {
    struct MHD_Connection *conn;
    char *body;
    size_t len, cap;
    int too_big;
    int over_limit; /* the client had too many connections open */
    /* long poll */
    int waiting, resumed_answer;
    int with_record; /* ?record=1: the answer carries the version's record */
    uint64_t after, deadline;
    uint64_t digests_of; /* GET /v1/versions/<v>?digests=1: v, waiting for its late digests */
    struct req_ctx *next_waiter;
} req_ctx_t;

typedef struct ctl_count {
    const char *route;
    int code;
    uint64_t n;
} ctl_count_t;

struct wsync_control_server {
    struct MHD_Daemon *d;
    ctl_model_t model;
    char url[128];
    char *state_path;
    char *token;
    int private_status;    /* topology routes need the token */
    int max_client_conns;  /* 0: none */
    ctl_clients_t clients; /* open connections per address (wait_lock) */
    ctl_conns_t conns;     /* every open connection, for the request deadline (wait_lock) */
    uint64_t request_timeout_ns;
    uint64_t refused_accepts, refused_logged_ns; /* connections closed at accept (wait_lock) */
    pthread_mutex_t wait_lock;                   /* waiters and counts */
    pthread_mutex_t save_lock;                   /* one state-file write at a time */
    int state_dirty;                             /* engine reports not yet written (atomic) */
    uint64_t saved_ns;                           /* when the state file was last written */
    /* State-file health: a failed write is counted, shown by /healthz,
     * /v1/status and /metrics, retried once a second, and logged once per
     * change of condition (failing with a new reason, or working again). */
    pthread_mutex_t health_lock; /* the three fields below */
    uint64_t state_failures;     /* failed writes since start */
    uint64_t state_changes;      /* changes of condition (status cache key) */
    char state_error[512];       /* why the last write failed; "" when it worked */
    req_ctx_t *waiters;
    ctl_count_t counts[CTL_MAX_COUNTS];
    int ncounts;
    pthread_t timer;
    int timer_started;
    int stopping;
    /* The answers below are built once and shared by every request that
     * wants the same bytes (MHD counts a response's references); the MHD
     * threads of the pool take cache_lock to look one up, replace it, or
     * queue it (queueing takes the reference that keeps it alive). */
    pthread_mutex_t cache_lock;
    /* GET /v1/status, rebuilt only when the model changed (1000 engines
     * cost ~6 ms of JSON building per request otherwise), sent without a
     * copy of its text per request. */
    struct MHD_Response *status_resp;
    struct MHD_Response *status_gz_resp;                  /* the same document gzipped (gzip.h), or NULL */
    struct ctl_status_text *status_text;                  /* its text (status_route.c) */
    uint64_t status_gen, status_failures, status_changes; /* its key: model, state file */
    double status_until; /* and the clock: a lease that runs out then shows at once */
    /* The long polls' 200 answer for latest_resp_version. */
    struct MHD_Response *latest_resp;
    uint64_t latest_resp_version;
    /* The same with the version's record in it (?record=1), built once per
     * version: the engine's pull needs no GET /v1/versions/<v> after it. */
    struct MHD_Response *latest_rec_resp;
    uint64_t latest_rec_resp_version;
    json_t *latest_rec_obj; /* the record it was built from (held; late digests replace it) */
    /* The answer for the last version record served, by record object (a
     * record never changes once published; holding a reference keeps the
     * object alive, so the same pointer is the same record): every engine
     * rank of every node fetches the same record at once. */
    json_t *rec_obj;
    struct MHD_Response *rec_resp;
    /* The same for the last layout served (GET /v1/layouts/<digest>). */
    json_t *lay_obj;
    struct MHD_Response *lay_resp;
};

typedef struct ctl_route {
    const char *name; /* for metrics */
    const char *method;
    const char *path; /* exact, or a prefix ending in '/' matched with `prefix` */
    int prefix;
    size_t body_cap;
    int mutating;
    int topology; /* shows who runs where: token-only with private_status */
    enum MHD_Result (*run)(wsync_control_server_t *s, req_ctx_t *c, const char *url);
} ctl_route_t;

/* routes.c */
const ctl_route_t *ctl_route_find(const char *url, const char *method, int *path_known);
enum MHD_Result ctl_long_poll_answer(wsync_control_server_t *s, req_ctx_t *c);

/* server.c */
enum MHD_Result ctl_respond(struct MHD_Connection *conn, int code, const char *type, char *body);
enum MHD_Result ctl_respond_json(struct MHD_Connection *conn, int code, json_t *j);
enum MHD_Result ctl_error(struct MHD_Connection *conn, int code, const char *msg);
const char *ctl_status_name(int code); /* "invalid_field" for 422 */
/* 1 when the request carries the server's bearer token (constant time). */
int ctl_token_ok(const wsync_control_server_t *s, struct MHD_Connection *conn);
void ctl_count(wsync_control_server_t *s, const char *route, int code);
void ctl_changed(wsync_control_server_t *s, int published);
void ctl_reported(wsync_control_server_t *s);
/* Holds the long poll c until it can be answered; not WSYNC_OK when it is
 * not held (stopping, or it can be answered now): the caller answers at once. */
wsync_status_t ctl_suspend(wsync_control_server_t *s, req_ctx_t *c);

/* status_route.c: GET /v1/status from the cache (built when the model, the
 * state file's condition or a lease changed), gzip when the client takes
 * it; ctl_status_cache_drop lets go of the cached answers. */
enum MHD_Result ctl_status_answer(wsync_control_server_t *s, struct MHD_Connection *conn);
void ctl_status_cache_drop(wsync_control_server_t *s);

/* The state file's condition: 1 when writes fail (why copied to `why`). */
int ctl_state_failing(wsync_control_server_t *s, char *why, size_t len, uint64_t *failures, uint64_t *changes);

/* admit.c: before the body. The deadline record of a connection (NULL when
 * none); a request is whole (its deadline stops until the next one); a
 * refusal the headers decide, queued before any body byte (1: *ret set);
 * MHD's accept policy and connection notification (both on MHD's thread). */
ctl_conn_track_t *ctl_track_of(struct MHD_Connection *conn);
void ctl_request_received(wsync_control_server_t *s, struct MHD_Connection *conn);
int ctl_refuse_on_headers(wsync_control_server_t *s, req_ctx_t *c, const char *url, const char *method,
                          enum MHD_Result *ret);
enum MHD_Result ctl_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void ctl_on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                       enum MHD_ConnectionNotificationCode code);

/* metrics.c */
char *ctl_metrics_text(wsync_control_server_t *s);

#endif
