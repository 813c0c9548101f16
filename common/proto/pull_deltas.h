/* pull_deltas.h: the delta wires one sender puts for one pull request that
 * names a base (docs/DELTA.md), the same for every sender: a trainer rank
 * out of its publish slots (trainer_side/delta_serve.c) and a relay out of
 * its node's image slots (engine_side/relay_delta.c). Per put: its element
 * width (the bytes' dtype, FP8 codes 1 and scales 4), its wire and the
 * digest of its new bytes (common/delta/delta_piece.h decides whether a
 * wire pays), the wire's place in the asker's staging region (back to
 * back, 8-byte aligned, within the request's delta_bytes), its put there
 * tagged WSYNC_PULL_DELTA_TAG, and its entry in the answer's `deltas`
 * (pull_reply.h). One sender's state per request, used by one thread at a
 * time: no lock. */
#ifndef WSYNC_COMMON_PULL_DELTAS_H
#define WSYNC_COMMON_PULL_DELTAS_H

#include "common/delta/delta_mem.h"
#include "common/model/manifest.h"
#include "common/proto/pull_reply.h"
#include "common/proto/pull_request.h"
#include "common/targets/target_plan.h"
#include "common/transport/transport.h"

typedef struct wsync_pull_deltas {
    uint64_t base;      /* the version the wires are encoded against */
    unsigned char *buf; /* the wires put, back to back (touched only where they go) */
    uint64_t cap, used;
    wsync_region_t *region; /* buf, registered with the sender's transport */
    wsync_pull_delta_t *entries;
    size_t n, room;
    uint64_t wire_bytes, put_bytes; /* the wires put, and their puts' bytes */
} wsync_pull_deltas_t;

/* A buffer of cap bytes (at most the request's delta_bytes) registered with
 * t as host memory. Fails for memory or registration (d then holds nothing). */
wsync_status_t wsync_pull_deltas_open(wsync_pull_deltas_t *d, uint64_t base, uint64_t cap,
                                      const wsync_transport_ops_t *ops, wsync_transport_t *t);
/* The element width a put's wire uses: with a node plan np, put `put`'s,
 * from its runs' sources; without (the whole image), image bytes [off, off
 * + len)'s. In a quantized space, the FP8 codes' (1) or scales' (4); 1
 * when mixed or when it does not divide the length. */
unsigned wsync_pull_deltas_width(const wsync_manifest_t *m, const wsync_node_plan_t *np, uint32_t put,
                                 uint64_t off, uint64_t len);
/* A put's wire: next against base (len bytes of mem's memory, elements of
 * `width`), as wsync_delta_piece_encode decides it (*wire NULL: it goes
 * full), and with dig non-NULL the digest of next at image offset dst_off
 * when a wire is made (a node verifying by segments checks it). */
wsync_status_t wsync_pull_deltas_encode(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, const void *base,
                                        const void *next, uint64_t len, unsigned width, uint64_t dst_off,
                                        unsigned char **wire, uint64_t *wire_len, uint64_t *dig);
/* Copies a wire of wl bytes to its place in d's buffer: 1 with *at, or 0
 * when it does not fit (or no memory for its entry): the put goes full. */
int wsync_pull_deltas_place(wsync_pull_deltas_t *d, const unsigned char *wire, uint64_t wl, uint64_t *at);
/* Puts the wire placed at `at` (wl bytes) as put `id`'s (put_len bytes)
 * wire into q's staging region over conn, and lists it (with *dig when
 * non-NULL). The test hook WSYNC_TEST_CORRUPT_WIRE=id breaks it first.
 * Fails with the transport's error, the wire not listed. */
wsync_status_t wsync_pull_deltas_put(wsync_pull_deltas_t *d, const wsync_transport_ops_t *ops, wsync_conn_t *conn,
                                     const wsync_pull_request_t *q, uint32_t id, uint64_t at, uint64_t wl,
                                     uint64_t put_len, const uint64_t *dig);
/* The answer's base and its wires (borrowed from d; NULL d: the sender
 * keeps no such base, base 0, every put went full). */
void wsync_pull_deltas_reply(const wsync_pull_deltas_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out);
/* No put of d in flight any more: the buffer deregistered; NULL is fine. */
void wsync_pull_deltas_release(wsync_pull_deltas_t *d, const wsync_transport_ops_t *ops);
/* After the answer: what d holds freed; NULL is fine. */
void wsync_pull_deltas_clear(wsync_pull_deltas_t *d);

#endif
