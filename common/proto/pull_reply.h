/* pull_reply.h: the answer to a pull request (pull_request.h), from a
 * trainer rank (trainer_side/pull_server.c) or another engine node's relay
 * (engine_side/relay.c), parsed by the asking rank (engine_side/requests.c).
 * It is sent once the puts of the request completed or failed: either
 *   {"error": "<what went wrong, naming the trainer rank or relay>"}
 * or
 *   {"ok": true, "segments": {"<id>": "<16 hex digits>", ...}, "puts": {...}, "pieces": n, "bytes": b}
 * where "segments" comes only on a pull with targets: the digests of the
 * asking rank's verification segments (target_verify.h) that the answering
 * trainer rank owns, by segment id; or, when the request asked for put
 * digests (pull_request.h: put_digests), "puts" instead: the digests of every
 * put of the node plan (target_plan.h) the answering trainer rank sends,
 * whichever local rank it lands on, keyed at its landing offset, by put id. A pull that named a base (delta pulls,
 * docs/DELTA.md) is also answered with
 *   "base": b, "deltas": [{"piece": id, "form": "bitmap"|"pairs", "bytes": n, "at": off
 *                          [, "digest": "<16 hex digits>"]}, ...]
 * where "base" is the base the trainer rank encoded against (0: it does not
 * keep the one asked for, every piece went full) and "deltas" lists the
 * pieces (with targets: the node plan's puts) put as delta wires (n bytes at
 * off of the staging region, past the request's delta_at), in put order;
 * every other piece went full. "digest" comes with a put of a node of
 * targets that verifies by segments: the digest of the put's bytes of the
 * new version (wsync_digest at its destination offset), which the engine
 * checks once the wire is applied. The parser trusts nothing and names the
 * field that is wrong. */
#ifndef WSYNC_COMMON_PULL_REPLY_H
#define WSYNC_COMMON_PULL_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/delta/delta.h"
#include "common/wsync.h"

/* One piece put as a delta wire. */
typedef struct wsync_pull_delta {
    uint32_t piece;
    wsync_delta_form_t form; /* bitmap or pairs */
    uint64_t bytes, at;      /* the wire's length and place in the staging region */
    int has_digest;          /* "digest": the put's bytes of the new version */
    uint64_t digest;
} wsync_pull_delta_t;

typedef struct wsync_pull_reply {
    /* Non-empty: the pull failed and this says why (the whole reply). */
    char error[1024];
    uint64_t pieces, bytes; /* what was put for the request */
    /* Segment digests, or NULL: none sent. Building, a borrowed object
     * filled with wsync_pull_reply_add_segment; parsed, an owned reference
     * to the checked object, also unpacked into nsegments ids and digests
     * (in the object's order). */
    json_t *segments;
    size_t nsegments;
    uint32_t *segment_ids;
    uint64_t *segment_digests;
    /* Put digests (the request's put_digests), or NULL: as segments. */
    json_t *puts;
    size_t nputs;
    uint32_t *put_ids;
    uint64_t *put_digests;
    /* Delta pulls: has_base 0: the request named none (no field written);
     * else base and deltas[ndeltas] (building: borrowed; parsed: owned). */
    int has_base;
    uint64_t base;
    size_t ndeltas;
    wsync_pull_delta_t *deltas;
} wsync_pull_reply_t;

/* Fills `out`, an empty object (the pull port hands one to its serve
 * callback), with the reply: keys in the order of the comment above. */
wsync_status_t wsync_pull_reply_write(const wsync_pull_reply_t *r, json_t *out);
/* The same as a new reference, or NULL without memory. */
json_t *wsync_pull_reply_to_json(const wsync_pull_reply_t *r);
/* A failed pull's reply in `out` (empty): {"error": formatted message}. */
void wsync_pull_reply_write_error(json_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds segment `id`'s digest to a segments object (json_object()); 0 on
 * success, -1 without memory. */
int wsync_pull_reply_add_segment(json_t *segments, uint32_t id, uint64_t digest);

/* Parses and checks `j`. WSYNC_OK for a well-formed reply, the failed ones
 * included (out->error non-empty); a malformed one fails with
 * WSYNC_ERR_FORMAT naming the field. On success *out owns its segments and puts:
 * free them with wsync_pull_reply_clear (also safe after a failure). */
wsync_status_t wsync_pull_reply_from_json(const json_t *j, wsync_pull_reply_t *out);
void wsync_pull_reply_clear(wsync_pull_reply_t *r);

#endif
