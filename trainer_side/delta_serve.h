/* delta_serve.h: a trainer rank serving a pull that names a base (docs/DELTA.md):
 * each piece the asker gets is encoded against the base's bytes (the other
 * publish slot holds the previous version), once per (piece, base) while the
 * version is served, and put as its delta wire into the asker's staging
 * region when the wire is smaller than the piece and fits; every other piece
 * goes full, as without a base. A node plan's put (targets) is encoded the
 * same way from its bytes packed out of both versions, and its wire comes
 * with the digest of its new bytes. Pulls over tcp from host or GPU memory;
 * anything else answers full. */
#ifndef WSYNC_TRAINER_DELTA_SERVE_H
#define WSYNC_TRAINER_DELTA_SERVE_H

#include "common/proto/pull_reply.h"
#include "trainer_side/publisher_internal.h"
#include "trainer_side/put_list.h"

typedef struct pub_delta_req pub_delta_req_t;

/* p->lock held, after admit: for a request with a base that this rank can
 * serve deltas from, *out gets the request's delta state (the base's slot
 * pinned, a staging buffer registered with transport ti); else NULL (every
 * piece full). Fails only for memory or registration. */
wsync_status_t pub_delta_begin(wsync_publisher_t *p, const wsync_pull_request_t *q, const pub_slot_t *s, int ti,
                               pub_delta_req_t **out);
/* p->lock held (dropped while encoding; s pinned): put e of list l (a
 * piece of the whole image, or a put of a node plan: its bytes packed from
 * both versions' slots) as its delta wire. 1: put and counted in r; 0: put
 * it full. A failed put is recorded in r (1). */
int pub_delta_put(wsync_publisher_t *p, const pub_slot_t *s, pub_delta_req_t *d, const wsync_pull_request_t *q,
                  pub_request_t *r, int ti, pub_conn_t *conn, const pub_put_list_t *l, const pub_put_t *e,
                  uint64_t deadline);
/* The reply's base and the pieces put as deltas (borrowed from d). */
void pub_delta_reply(const pub_delta_req_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out);
/* p->lock held, every put issued: the wires are in d's buffer, the base
 * is not read any more (its slot unpinned: a publish need not wait for
 * this request's puts to be sent). */
void pub_delta_unpin(wsync_publisher_t *p, pub_delta_req_t *d);
/* p->lock held, no put of d in flight any more: the base slot unpinned,
 * the staging buffer deregistered. */
void pub_delta_release(wsync_publisher_t *p, pub_delta_req_t *d, int ti);
/* After the answer: frees d (NULL is fine). */
void pub_delta_free(pub_delta_req_t *d);
/* At stop: the cache of encoded wires. */
void pub_delta_cache_free(wsync_publisher_t *p);

#endif
