/* publisher_internal.h: the publisher's state, shared by publisher.c (slots,
 * reports), snapshot.c (digests, snapshot copies) and pull_server.c (serving
 * engine pulls, through the one put loop of put_list.c). */
#ifndef WSYNC_TRAINER_PUBLISHER_INTERNAL_H
#define WSYNC_TRAINER_PUBLISHER_INTERNAL_H

#include <pthread.h>

#include "common/control/client.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/proto/pull_request.h"
#include "common/control/sync_layout.h"
#include "common/targets/target_plan.h"
#include "common/transport/transport.h"
#include "common/control/control_server.h"
#include "trainer_side/heartbeat.h"
#include "trainer_side/wsync_publisher.h"

#define PUB_SLOTS 2          /* publish slots the bytes are copied into */
#define PUB_DIRECT PUB_SLOTS /* the caller's own extents: single-copy versions */
#define PUB_NSLOTS (PUB_SLOTS + 1)
#define PUB_MAX_TRANSPORTS 4

/* One owned extent as it sits in a slot: image range -> registered memory. */
typedef struct pub_span {
    uint64_t offset, len;
    void *ptr;         /* where the bytes are in this slot */
    int area;          /* index of the registered area holding them */
    uint64_t area_off; /* offset of ptr inside that area */
} pub_span_t;

typedef struct pub_slot {
    uint64_t version; /* 0: empty */
    int pins;         /* pulls in flight */
    /* The copy into the slot runs after `version` is announced, so a pull
     * puts a piece only once it is copied. Both under the publisher's lock. */
    unsigned char *copied;      /* [nmy]: my piece i is in the slot (all 1 with zero-copy) */
    wsync_status_t copy_status; /* the copy failed: pulls waiting on it fail */
    void *buf;                  /* packed owned bytes (copy mode), else NULL */
    int nareas;                 /* memory areas to register: buf, or each extent */
    void **area_ptr;
    uint64_t *area_len;
    pub_span_t *spans;                            /* [nspans], offset order */
    wsync_region_t **regions[PUB_MAX_TRANSPORTS]; /* [transport][area], lazily */
} pub_slot_t;

typedef struct pub_conn {
    struct pub_conn *next;
    char key[2 * WSYNC_BLOB_MAX + 1]; /* hex of the receiver's address */
    char owner[160];                  /* "<engine id>/<local rank>": one live conn each */
    wsync_conn_t *conn;
    int users; /* pulls using it now (p->lock) */
    int stale; /* dropped when the last user is done */
} pub_conn_t;

/* A pull being served: puts in flight are counted down by the poller. */
typedef struct pub_request {
    struct pub_request *next;
    uint32_t req; /* the engine's request id: high half of every tag */
    int outstanding;
    size_t nput;   /* puts handed to the transport (put_list.c) */
    uint64_t bput; /* and their bytes */
    wsync_status_t status;
    char error[512];
    struct pub_stage *stage; /* engine layouts: the packed puts' stage it reads (target_stage.c) */
    json_t *segments;        /* {"segments": {...}}: the digests for the answer */
} pub_request_t;

/* Engine layouts (pull_targets.c): targets seen, node plans over lists of
 * them, segment digests per (version, target); kept under p->tlock. */
typedef struct pub_target pub_target_t;
typedef struct pub_nplan pub_nplan_t;
typedef struct pub_segdig pub_segdig_t;
typedef struct pub_tdig pub_tdig_t;
typedef struct pub_stage pub_stage_t;
typedef struct pub_treq {
    pub_nplan_t *plan;           /* the node plan over the request's targets (cached) */
    const wsync_node_plan_t *np; /* and the plan itself */
    pub_target_t *asker;         /* the asking rank's target (its digest cache is filled in) */
} pub_treq_t;

typedef struct pub_transport {
    const wsync_transport_ops_t *ops;
    wsync_transport_t *t;
    pthread_t poller;
    int poller_started;
    pub_conn_t *conns;
} pub_transport_t;

struct wsync_publisher {
    wsync_publisher_config_t cfg;
    char *manifest_json;
    char host_id[128];
    char advertise[128];
    const wsync_mem_ops_t *mem;
    int device;
    wsync_control_t *control;
    pub_heartbeat_t *heartbeat;             /* the registration again every 10 s (heartbeat.c) */
    wsync_auth_t auth;                      /* the token's keys: every pull and put proves it */
    wsync_control_server_t *control_server; /* with cfg.serve */
    char *control_url;
    wsync_sync_layout_t *sl;
    json_t *layout_json;       /* what every publish reports (the manifest by digest); built once */
    uint64_t reported_version; /* the last version reported, and its pieces: */
    json_t *reported_pieces;   /* sent again when the endpoint lost them */
    uint64_t resend_check_ns;  /* when wait_published next checks that */
    size_t nspans;
    wsync_owned_t *owned; /* this rank's extents and the caller's pointers */
    uint64_t owned_bytes;
    uint32_t *my_pieces; /* ids of pieces this rank sends */
    size_t nmy;
    uint64_t *piece_slot_off; /* per plan piece of mine: span index */
    int pieces_tile;          /* my pieces cover my extents exactly */
    int snap_threads;         /* threads of a host-memory snapshot */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    pub_slot_t slots[PUB_NSLOTS]; /* zero_copy: slots[PUB_DIRECT] alone is set up */
    int latest;                   /* slot of the newest version, -1 none */
    /* Single copy (hold.c): the version served straight from the caller's
     * extents (slots[PUB_DIRECT]) until wait_held or the next publish
     * releases it; 0 none. Under p->lock. */
    uint64_t held_version;
    int held_released;
    uint64_t pulls_ended; /* pull requests answered (or failed) here, under p->lock: wait_held wakes on it */
    pub_transport_t transports[PUB_MAX_TRANSPORTS];
    int ntransports;
    pub_request_t *requests;
    uint64_t withdrawn;      /* the last version taken down after announcing it */
    char withdrawn_why[512]; /* and why (named in the failed pulls) */

    pthread_mutex_t tlock; /* the engine-layout caches below */
    pub_target_t *targets;
    pub_nplan_t *nplans;
    pub_segdig_t *segdigs;
    pub_stage_t *stages; /* target_stage.c, under p->lock */

    struct wsync_pull_port *port; /* the pull port (common/proto/pull_port.h) */
    int listen_port;
    int stopping;
};

/* snapshot.c: sums[i] = the digest sum of my_pieces[i], read from the
 * caller's extents (threaded for host memory). */
wsync_status_t pub_digest(wsync_publisher_t *p, uint64_t *sums);
/* The same in two steps (late digests): start queues it on a GPU (*job;
 * NULL on the host, where finish does it all), finish waits for the sums
 * and frees the job; both on the publishing thread. */
wsync_status_t pub_digest_start(wsync_publisher_t *p, wsync_mem_job_t **job);
wsync_status_t pub_digest_finish(wsync_publisher_t *p, wsync_mem_job_t *job, uint64_t *sums);
/* Copies the caller's extents into slot s in my_pieces order, on threads for
 * host memory, each piece marked in s->copied (under p->lock, waking the pull
 * server) once it is there. pub_copy_finish does what is left on the caller's
 * thread (GPU memory) or stops what is not started yet (abandon), waits for
 * the threads, frees the job and returns the first failure. */
typedef struct pub_work pub_work_t;
wsync_status_t pub_copy_start(wsync_publisher_t *p, pub_slot_t *s, pub_work_t **out);
wsync_status_t pub_copy_finish(pub_work_t *w, int abandon);
/* Threads a digest or copy uses: `asked` if > 0, else env
 * WSYNC_PUBLISH_THREADS, else one per online CPU; at most 8. */
int pub_snapshot_threads(int asked);

/* pull_targets.c: a pull of a node with targets. resolve (no lock held):
 * the request's targets and node plan, cached (its puts: put_list.h);
 * digests (no p->lock, s pinned): "segments" of the asking rank's target
 * that I own into reply; free: the caches, at destroy. */
wsync_status_t pub_targets_resolve(wsync_publisher_t *p, const wsync_pull_request_t *q, pub_treq_t *tr);
/* pull_server.c (p->lock held): wait until every piece of mine overlapping
 * image bytes [off, off + len) is copied into slot s (the copy runs after
 * the version is announced); fails naming why (withdrawn, timeout, stop). */
wsync_status_t pub_wait_range(wsync_publisher_t *p, pub_slot_t *s, uint64_t off, uint64_t len, uint64_t deadline);
wsync_status_t pub_targets_digests(wsync_publisher_t *p, const pub_slot_t *s, const pub_treq_t *tr,
                                   uint64_t version, json_t *reply);
void pub_targets_free(wsync_publisher_t *p);
/* pull_targets.c: the span of slot s holding image offset off (NULL: none of
 * mine); gather runs of slot s into dst (memory of the publisher's kind). */
const pub_span_t *pub_span_at(const wsync_publisher_t *p, const pub_slot_t *s, uint64_t off);
wsync_status_t pub_gather(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_run2d_t *runs, size_t n,
                          void *dst);
/* The runs of put `pu` of np with src_off relative to the memory area of
 * slot s holding them, into out (pu->nruns of them), *area set; 0 when they
 * do not all lie in one span. */
int pub_area_runs(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np,
                  const wsync_tput_t *pu, wsync_run2d_t *out, int *area);
/* target_digests.c: the digests of the segments of `seg` this rank owns, in
 * the version of slot s, into out ({"<segment id>": "hex"}); *dig caches how
 * (built on the first call, for the target; under p->tlock). */
wsync_status_t pub_tdig_compute(wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                pub_tdig_t **dig, json_t *out);
void pub_tdig_free(pub_tdig_t *d);
/* target_stage.c (p->lock held): the stage of the `n` packed puts `puts` of
 * node plan np (keyed `key`) landing on local rank `asker`, holding the
 * version of slot s (packed now, the lock dropped meanwhile, unless another
 * request did) and registered with transport ti; released when no put
 * reads it any more. Its region and each put's offset in it (k-th packed
 * put). pub_stages_free: all of them, before the transports close. */
wsync_status_t pub_stage_acquire(wsync_publisher_t *p, pub_slot_t *s, const void *key, const wsync_node_plan_t *np,
                                 int asker, const uint32_t *puts, size_t n, int ti, pub_stage_t **out);
void pub_stage_release(wsync_publisher_t *p, pub_stage_t *st);
wsync_region_t *pub_stage_region(const pub_stage_t *st, int ti);
uint64_t pub_stage_offset(const pub_stage_t *st, size_t k);
void pub_stages_free(wsync_publisher_t *p);

/* hold.c (p->lock held): take the single-copy version `version` down
 * (no-op if it is not the one served from the caller's extents): new pulls
 * of it are refused naming `why`, pulls in flight stop before their next
 * put. */
void pub_release_direct(wsync_publisher_t *p, uint64_t version, const char *why);

/* pull_server.c */
wsync_status_t pub_server_start(wsync_publisher_t *p);
void pub_server_stop(wsync_publisher_t *p);

#endif
