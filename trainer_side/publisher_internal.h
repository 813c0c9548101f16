/* publisher_internal.h: a publisher as a few objects, each with its own
 * header: the rank's share of the image (share.h), the publish slots
 * (slots.h), serving pulls (serving.h), the engine-layout caches
 * (target_cache.h), reports to the control endpoint (report.h) and the
 * heartbeat (heartbeat.h); snapshot.h digests and copies a version. */
#ifndef WSYNC_TRAINER_PUBLISHER_INTERNAL_H
#define WSYNC_TRAINER_PUBLISHER_INTERNAL_H

#include <pthread.h>

#include "common/control/client.h"
#include "common/control/control_server.h"
#include "common/control/sync_layout.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "trainer_side/heartbeat.h"
#include "trainer_side/report.h"
#include "trainer_side/serving.h"
#include "trainer_side/share.h"
#include "trainer_side/slots.h"
#include "trainer_side/snapshot.h"
#include "trainer_side/target_cache.h"
#include "trainer_side/wsync_publisher.h"

struct wsync_publisher {
    wsync_publisher_config_t cfg;
    char *manifest_json;
    char host_id[128];
    char advertise[128];
    const wsync_mem_ops_t *mem;
    int device;
    int snap_threads; /* threads of a host-memory snapshot */
    wsync_sync_layout_t *sl;
    wsync_auth_t auth; /* the token's keys: every pull and put proves it */
    wsync_control_t *control;
    wsync_control_server_t *control_server; /* with cfg.serve */
    char *control_url;
    pub_heartbeat_t *heartbeat; /* the registration again every 10 s (heartbeat.c) */
    pub_report_t report;        /* publishing thread only */
    pub_share_t share;          /* read-only after create */

    /* slots and serving (and tcache.stages) are under lock; cond wakes
     * waits on them (a piece copied, a pull ended, a slot freed). */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pub_slots_t slots;
    pub_serving_t serving;
    pub_target_cache_t tcache; /* its own lock */
};

/* hold.c (p->lock held): take the single-copy version `version` down
 * (no-op if it is not the one served from the caller's extents): new pulls
 * of it are refused naming `why`, pulls in flight stop before their next
 * put. */
void pub_release_direct(wsync_publisher_t *p, uint64_t version, const char *why);

#endif
