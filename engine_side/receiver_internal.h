/* receiver_internal.h: a receiver's state, shared by receiver.c (set-up, the
 * node-wide agreement on a pull, accessors) and fetch.c (one pull attempt:
 * requests, landing, fan-out copies, verification). */
#ifndef WSYNC_ENGINE_RECEIVER_INTERNAL_H
#define WSYNC_ENGINE_RECEIVER_INTERNAL_H

#include "common/control_client.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/sync_layout.h"
#include "common/transport/transport.h"
#include "common/window/window.h"
#include "engine_side/board.h"
#include "engine_side/reporter.h"
#include "engine_side/wsync_receiver.h"

typedef struct peer_map {
    void *ptr;              /* peer's window mapped here, or NULL */
    uint64_t len;
    uint32_t epoch;         /* the peer's board epoch when mapped */
} peer_map_t;

/* One open data transport, keyed by the name it was asked for ("auto" stays
 * "auto" even after it picked a backend). */
#define RECV_MAX_TRANSPORTS 2
typedef struct recv_transport {
    char want[16];
    const wsync_transport_ops_t *ops;
    wsync_transport_t *t;
    wsync_blob_t addr;
    wsync_region_t *region[BOARD_SLOTS];
    wsync_blob_t key[BOARD_SLOTS];
} recv_transport_t;

struct wsync_receiver {
    wsync_receiver_config_t cfg;
    char *engine_id, *control_url, *token, *transport_name, *bind_host;
    char host_id[128];
    char board_name[256];
    const wsync_mem_ops_t *mem;
    int device;
    const wsync_window_ops_t *win_ops;
    wsync_control_t *control;
    recv_reporter_t *reporter;  /* local rank 0: the node's reports */
    wsync_auth_t auth;      /* the token's keys: pulls, transports and the board prove it */
    board_t *board;

    /* images: slot 0 (in-place and staged), slot 1 (staged) */
    int nslots;
    wsync_window_t win[BOARD_SLOTS];
    int caller_image;       /* slot 0 is the caller's memory */
    size_t image_len;
    peer_map_t peers[BOARD_MAX_RANKS][BOARD_SLOTS];

    /* the data transports (the configured one, and "local" for trainer
     * ranks on this host), opened lazily, each with the image regions */
    recv_transport_t tr[RECV_MAX_TRANSPORTS];
    int ntr;

    /* the held version */
    uint64_t held_version;
    int cur_slot;
    wsync_sync_layout_t *held;
    uint64_t last_gen;
    double last_secs;       /* duration of the last successful pull attempt */
};

/* fetch.c: bring this rank's image slot `slot` to version `v` for attempt
 * `gen`; on success the slot holds v verified. */
wsync_status_t recv_fetch(wsync_receiver_t *r, uint64_t gen, uint64_t v, int slot,
                          const wsync_sync_layout_t *sl, const uint64_t *digests, uint64_t deadline);
/* landing.c, local rank 0: choose the local rank each chunk of `sl` lands
 * on for attempt `gen` and post it on the board (land[], then land_gen). */
wsync_status_t recv_plan_landing(wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t gen);
/* landing.c, any rank: wait until the board holds attempt `gen`'s landing. */
wsync_status_t recv_wait_landing(wsync_receiver_t *r, uint64_t gen, uint64_t deadline);

/* Drop every transport (after a failed attempt, so nothing stale can land). */
void recv_transport_reset(wsync_receiver_t *r);

#endif
