/* relay.h: an engine node's relay (local rank 0 of a node whose plan is
 * relay:F, host or GPU memory): a pull port (common/proto/pull_port.h, the
 * trainers' protocol and handshake) serving other engine nodes the bytes of
 * a version this node holds, over tcp. Per image slot it knows the version
 * the slot holds or receives and what may go, one mode for every node: the
 * puts of its node plan (relay_serve_t): the whole image's (its identity
 * node plan's) out of local rank 0's image once verified there; with
 * engine targets, out of the image of the rank each lands on, once that
 * rank marked its chunk landed, to nodes of the same targets only. So a chain
 * pipelines (a node serves while it still pulls), and a slot's version is
 * served until the slot is reused. A whole-image child naming as its base
 * the version the other slot holds gets its pieces as delta wires where
 * they pay (relay_delta.h; that slot is pinned while the wires are
 * encoded); so does a node of the same targets once this node verified
 * that version on every rank (relay_slot_verified). The receiver verifies
 * every byte against the trainers' digests wherever it came from, so a
 * relay is never trusted with a byte.
 *
 * Threads: relay_slot_* and relay_chunk_verified are called by the pulling
 * thread of local rank 0; requests are served on the pull port's threads;
 * everything shared is under the relay's lock. */
#ifndef WSYNC_ENGINE_RELAY_H
#define WSYNC_ENGINE_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "common/mem/mem.h"
#include "common/model/manifest.h"
#include "common/net/auth.h"
#include "common/targets/target_plan.h"
#include "engine_side/board.h"

typedef struct recv_relay recv_relay_t;

/* Listens on bind_host, a free port; `engine_id` names it in messages. The
 * images it serves are memory of kind `kind` (on GPU `device`): GPU images
 * go out through the tcp transport's bounce buffers. */
wsync_status_t relay_start(const char *bind_host, const wsync_auth_t *auth, const char *engine_id,
                           wsync_mem_kind_t kind, int device, recv_relay_t **out);
/* "host:port": what other nodes connect to (registered with the control endpoint). */
const char *relay_address(const recv_relay_t *rl);
/* Slot `slot` serves nothing from now on (local rank 0, as soon as it opens
 * an attempt, before any rank lands a byte of it); returns once no put
 * reads it (as relay_slot_begin). */
void relay_slot_end(recv_relay_t *rl, int slot);

/* What a slot serves: the node plan's puts. A node of engine targets reads
 * each put out of the image of the rank its chunk lands on, once that rank
 * marked the chunk landed (before verification: the asker verifies all it
 * gets), to nodes of the same targets on the same local ranks only. The
 * whole image (the identity target: targets NULL, L 1) reads every put out
 * of local rank 0's image, once the chunk is verified there
 * (relay_chunk_verified), to any node pulling the whole image. */
typedef struct relay_serve {
    const wsync_node_plan_t *np; /* without a landing hint */
    int L;                       /* local ranks whose images it reads */
    const char (*targets)[33];   /* [L]: local rank k's target digest; NULL: the whole image */
    void *const *win;            /* [L]: local rank k's image of the slot, mapped in this process */
    const size_t *win_len;       /* [L] */
    board_t *board;              /* targets: whose landed marks of attempt `gen` say a chunk may go */
    uint64_t gen;
    const wsync_manifest_t *manifest; /* its tensors' dtypes (and FP8 spaces): delta wires' widths (relay_delta.h) */
} relay_serve_t;

/* Image slot `slot` is about to receive version v under node plan t->np
 * (layout digest ldig): what it held is no longer served, and this returns
 * once no put reads the slot any more (at most a few seconds: a put that
 * takes longer reaches a receiver that verifies it); from then on it serves
 * as t says. Copied. */
void relay_slot_begin(recv_relay_t *rl, int slot, uint64_t v, const char *ldig, const relay_serve_t *t);

/* Chunk `chunk` of the version in `slot` is verified in the image. */
void relay_chunk_verified(recv_relay_t *rl, int slot, uint32_t chunk);
/* The version in `slot` is verified on every local rank (local rank 0, once
 * the node's pull succeeded): a node of targets' slot is a base its relay
 * may encode deltas from from now on (relay_delta.h). */
void relay_slot_verified(recv_relay_t *rl, int slot);
/* Stops serving (requests being served are answered first); NULL is fine. */
void relay_stop(recv_relay_t *rl);

#endif
