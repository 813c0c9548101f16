/* relay_delta.h: a relay serving a child that names a base (docs/DELTA.md,
 * "Relays serve deltas"): when the relay's node still holds that base
 * verified in its other image slot (a staged node keeps the version it held
 * while it pulls the next: relay.h serves a slot until it is reused), each
 * put goes as its delta wire against the base's bytes of the same put when
 * the wire is smaller, into the child's staging region, laid back to back,
 * and the answer lists them: all of it as a trainer rank does
 * (common/proto/pull_deltas.h). The whole image's puts are its pieces; a
 * node of targets' (TP/EP slices, FP8 codes and scales) are read from the
 * image of the local rank they land on, in both slots, and come with the
 * digest of their new bytes, which the child checks once it applied the
 * wire (its segments are verified against the trainers' digests at the end,
 * as for every pull of targets). The child applies and verifies them
 * exactly as a trainer's (engine_side/delta_land.h). Images in host or GPU
 * memory: on a GPU the wires are encoded there (common/delta/delta_mem.h)
 * into device buffers of the request's own, and copied to the staging
 * buffer in host memory, which tcp puts from. Per request, on the
 * request's own thread: no lock. */
#ifndef WSYNC_ENGINE_RELAY_DELTA_H
#define WSYNC_ENGINE_RELAY_DELTA_H

#include "common/proto/pull_deltas.h"

typedef struct relay_delta relay_delta_t;

/* The request's delta state: the base image (base_version's bytes in the
 * image the request reads, the relay's other slot, pinned by the caller;
 * memory of `kind`, a GPU's on `device`, which becomes the calling
 * thread's), a staging buffer of the request's delta_bytes at most,
 * registered with t. Fails for the device, memory or registration. */
wsync_status_t relay_delta_begin(const wsync_pull_request_t *q, uint64_t base_version, const void *base_image,
                                 wsync_mem_kind_t kind, int device, const wsync_transport_ops_t *ops,
                                 wsync_transport_t *t, relay_delta_t **out);
/* Put `id` (len bytes at off of the image `next`, the base's at the same
 * offset of the base image, elements of `width` bytes) as its wire, with
 * the digest of its new bytes when with_digest (a node of targets): 1 put,
 * 0 it goes full, -1 the put failed (the transport's error is the last
 * error). *wire_len: the bytes put. */
int relay_delta_put(relay_delta_t *d, const wsync_transport_ops_t *ops, wsync_conn_t *conn,
                    const wsync_pull_request_t *q, const void *next, uint64_t off, uint64_t len, uint32_t id,
                    unsigned width, int with_digest, uint64_t *wire_len);
/* The answer's base and its pieces put as wires (borrowed from d; NULL d:
 * the request named a base the relay does not hold, base 0). */
void relay_delta_reply(const relay_delta_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out);
/* No put of d in flight any more: its buffer deregistered (before the
 * transport closes); NULL is fine. */
void relay_delta_release(relay_delta_t *d, const wsync_transport_ops_t *ops);
/* After the answer to q, on the thread that began d: its log line
 * (`engine_id`: the relay's node), then d and its device buffers freed;
 * NULL is fine. */
void relay_delta_end(relay_delta_t *d, const char *engine_id, const wsync_pull_request_t *q);

#endif
