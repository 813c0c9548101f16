/* receiver_internal.h: a receiver's state (struct wsync_receiver), shared by
 * the files of engine_side/ that run a pull: its identity and connections
 * here, and a few owned sub-objects, each with its header:
 *   r->images      images.h      the image slots, sparse maps, fan-out windows, peers' windows
 *   r->transports  transports.h  the data transports and the pull connections kept between versions
 *   r->held        held.h        the version this rank holds, its layouts and the last attempt's figures
 *   r->node        node.h        the plan this node pulls by, the links, its relay
 *   r->run         running.h     the attempt in progress: its generation, phase, dests, records
 * and what the attempt's phases call across files: receiver.c (set-up, the
 * image slots), attempt_open.c, pull_join.c, landing.c and fetch.c (the one
 * fetch engine). Requests (requests.h) and engine layouts (tlayout.h) have
 * their own headers. */
#ifndef WSYNC_ENGINE_RECEIVER_INTERNAL_H
#define WSYNC_ENGINE_RECEIVER_INTERNAL_H

#include <jansson.h>

#include "common/base/interrupt.h"
#include "common/control/client.h"
#include "common/control/sync_layout.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/window/window.h"
#include "engine_side/board.h"
#include "engine_side/dests.h"
#include "engine_side/held.h"
#include "engine_side/images.h"
#include "engine_side/node.h"
#include "engine_side/progress.h"
#include "engine_side/reporter.h"
#include "engine_side/requests.h"
#include "engine_side/running.h"
#include "engine_side/tlayout.h"
#include "engine_side/transports.h"
#include "engine_side/wsync_receiver.h"

struct wsync_receiver {
    wsync_receiver_config_t cfg;
    int cancelled; /* atomic: wsync_receiver_cancel; every wait looks (recv_cancelled) */
    /* Local rank 0 (atomic, set by rank_changed on the board's thread):
     * degraded while a rank went and the node has not held a version on
     * every rank since; rejoined once a new process took the rank, so the
     * next pull brings the held version to it (attempt.c, wait_or_repair). */
    int degraded, rejoined;
    char *engine_id, *control_url, *token, *transport_name, *bind_host;
    char host_id[128];
    char board_name[256];
    const wsync_mem_ops_t *mem;
    int device;
    const wsync_window_ops_t *win_ops;
    wsync_control_t *control;
    recv_reporter_t *reporter; /* local rank 0: the node's reports */
    wsync_auth_t auth;         /* the token's keys: pulls, transports and the board prove it */
    board_t *board;

    recv_images_t images;         /* images.h */
    recv_transports_t transports; /* transports.h */
    recv_holding_t held;          /* held.h */
    recv_node_t node;             /* node.h */

    recv_running_t run; /* running.h */
};

/* 1 once wsync_receiver_cancel(r) or wsync_interrupt() was called: a wait
 * of the pull returns wsync_cancel_error then. */
static inline int recv_cancelled(const wsync_receiver_t *r)
{
    return wsync_cancelled(&r->cancelled);
}

/* landing.c: per trainer rank t, the local ranks on its GPU (colo[t * L ..],
 * ncolo[t] of them; none unless this rank holds GPU memory). */
wsync_status_t recv_colocated_ranks(wsync_receiver_t *r, int world, int *colo, int *ncolo);
/* landing.c, local rank 0: post the node plan's landing map. */
wsync_status_t recv_post_tlanding(wsync_receiver_t *r, const recv_tlayout_t *tl, uint64_t gen);
/* pull_join.c: map every peer's window of `slot` (again, if the peer
 * restarted); with `tl`, a peer's window must hold its own target. */
wsync_status_t recv_map_peers(wsync_receiver_t *r, int slot, uint64_t deadline, const recv_tlayout_t *tl);
wsync_status_t recv_wait_landing(wsync_receiver_t *r, uint64_t gen, uint64_t deadline, const uint8_t **out);
wsync_status_t recv_check_peers(wsync_receiver_t *r, uint64_t gen);

/* receiver.c: image slots sized for `need` bytes, exported on the board;
 * ranks > 0: rejoin the board when local rank 0 restarted. */
wsync_status_t recv_ensure_images(wsync_receiver_t *r, uint64_t need);
wsync_status_t recv_rejoin_if_needed(wsync_receiver_t *r);
/* attempt_open.c: milliseconds left until `deadline` (wsync_now_ns
 * clock), 0 once past; and the open phase of an attempt: local rank 0
 * chooses the version and opens the attempt on the board (*a), the other
 * ranks wait for it. */
int recv_left_ms(uint64_t deadline);
wsync_status_t recv_attempt_open(wsync_receiver_t *r, uint64_t version, uint64_t deadline, board_attempt_t *a);
/* The versions the first pull sets up for (attempt_setup): the next one
 * newer than the held version (*v, 0 if none came in time), or `version`
 * itself once it is published. */
wsync_status_t recv_wait_newer(wsync_receiver_t *r, uint64_t deadline, uint64_t *v);
wsync_status_t recv_wait_named(wsync_receiver_t *r, uint64_t version, uint64_t deadline);

/* fetch.c, the one fetch engine: bring this rank's image slot
 * a->slot to version a->version in attempt a->gen, for the node's targets
 * `tl`, or, tl NULL, the whole image (the identity target: fetch_whole.c);
 * on success the slot holds it verified. `digests`: the record's (the whole
 * image and a node of identity targets verify each chunk by them); `late`:
 * the record came without (some) of them; they are waited for while
 * landing. */
wsync_status_t recv_fetch(wsync_receiver_t *r, const board_attempt_t *a, const wsync_sync_layout_t *sl,
                          recv_tlayout_t *tl, const uint64_t *digests, int late, uint64_t deadline);
/* landing.c, local rank 0: choose the local rank each chunk of `sl` lands
 * on for attempt `gen` and post it on the board. */
wsync_status_t recv_plan_landing(wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t gen);

#endif
