/* held.h: the version a receiver rank holds (recv_holding_t): its number and
 * image slot, its layout (and the generation the caller sees change), this
 * rank's spec and engine layout, the caller's tensors for it, and what the
 * last attempt did (failed version, duration, deltas). Owned by the receiver
 * (r->held): kept by the attempt that brought the version, or cleared by
 * one that failed (attempt.c: attempt_keep, attempt_drop), the delta
 * figures by delta_land.c, the spec posted once by targets.c; read by the
 * accessors (receiver.c); freed at destroy. */
#ifndef WSYNC_ENGINE_HELD_H
#define WSYNC_ENGINE_HELD_H

#include <stdint.h>

#include "common/control/sync_layout.h"
#include "common/proto/engine_report.h"
#include "engine_side/dests.h"
#include "engine_side/tlayout.h"

typedef struct recv_holding {
    uint64_t version; /* 0: none yet */
    int slot;         /* the image slot holding it */
    wsync_sync_layout_t *layout;
    uint64_t layout_generation; /* changes whenever the held tensor list may have (wsync_receiver_layout_generation) */
    uint64_t failed_version;         /* local rank 0: the version of the last attempt that failed (attempt.c) */
    double last_secs;                /* duration of the last successful pull attempt (set-up excluded) */
    wsync_report_delta_t delta_last; /* what this rank's last attempt moved as deltas (delta_land.c) */
    double delta_wire_seen;          /* the wire's fraction of the bytes of this rank's last delta pull (0: none
                                        yet): what delta=auto costs the next at (delta_land.c) */
    /* engine layouts: this rank's spec on the board (NULL: the whole image,
     * today's path), and the engine layout of the held version */
    char *spec;
    recv_tlayout_t *tl;
    /* the caller's destination tensors (config.dests) for the held layout */
    recv_dests_t *dm;
} recv_holding_t;

#endif
