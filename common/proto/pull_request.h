/* pull_request.h: the message an engine rank sends a trainer rank to pull a
 * version (over the trainer's pull port, framed by common/proto/msg.h): which
 * version, where to put the pieces (transport, address, region key), which
 * chunks land on the asking rank, and how long the engine waits. Built by
 * engine_side/fetch.c (the one fetch engine; the whole image's
 * request names no targets), parsed by trainer_side/pull_server.c; the parser
 * trusts nothing and names the field that is wrong. */
#ifndef WSYNC_COMMON_PULL_REQUEST_H
#define WSYNC_COMMON_PULL_REQUEST_H

#include <jansson.h>
#include <stdint.h>

#include "common/base/blob.h"
#include "common/wsync.h"

typedef struct wsync_pull_request {
    uint64_t version;            /* >= 1 */
    char engine[128];            /* engine id, for messages */
    int local_rank, local_ranks; /* 0 <= local_rank < local_ranks */
    uint32_t req;                /* 1 .. 2^31-1: the high half of every put's tag */
    char transport[16];          /* backend name the engine listens with */
    wsync_blob_t addr, key;      /* its address and image region key */
    char layout_digest[17];      /* must equal the trainer's */
    int64_t timeout_ms;          /* how long the engine waits; <= 0: the trainer's default */
    /* NULL: chunk c lands on local rank c mod local_ranks. Else a bitmap of
     * the plan's chunks (bit c of byte c/8): the chunks landing on this rank. */
    unsigned char *chunks;
    size_t chunk_bytes;
    /* Engine layouts (docs/ENGINE_LAYOUTS.md); absent (0, NULL): every rank
     * holds the whole image. targets[k]: the digest (32 hex digits) of local
     * rank k's target, one per local rank; the chunk map then counts the
     * chunks of the node plan over those targets. target_defs: {digest:
     * target JSON} for targets the trainer may not have yet (the engine
     * sends each once per trainer rank and layout), or NULL. */
    int ntargets;
    char (*targets)[33];
    json_t *target_defs;
    /* With targets: the node plan's landing preference (target_plan.h), or
     * hint_world 0: none. For trainer rank t, the local ranks on its GPU are
     * colo[t * local_ranks ..], ncolo[t] of them. */
    int hint_world;
    int *colo, *ncolo;
    /* With targets: put in the order of the node plan's chunks (the asking
     * rank frees each chunk's memory once it is complete: an in-place pull
     * into the engine's own tensors), not in source order. */
    int in_order;
    /* With targets: answer with the digests of the node plan's puts this
     * trainer rank sends (pull_reply.h "puts"), not the asking rank's
     * segment digests: the engine verifies each put by the sum its landing
     * brought along (engine_side/target_puts.c). A trainer that does not
     * know the field answers with segments, which the engine still takes. */
    int put_digests;
    /* With targets: the asking node verifies each chunk against the
     * version record's piece digests (a node of identity targets,
     * engine_side/fetch_identity.c): the reply carries no segment digests,
     * and the trainer rank computes none. */
    int no_segment_digests;
    /* Delta pulls (docs/DELTA.md). base: the version the asking rank holds
     * verified (0: a full pull, as without the field). With a base the
     * trainer rank may put a piece as its delta wire (common/delta/delta.h)
     * instead, into the staging region delta_key at delta_at + the wire's
     * place, delta_bytes at most in all, tagged with WSYNC_PULL_DELTA_TAG
     * in the id; the reply lists those pieces (pull_reply.h). */
    uint64_t base;
    wsync_blob_t delta_key;
    uint64_t delta_at, delta_bytes;
} wsync_pull_request_t;

/* In a put's tag's low half: the put carries piece (id & ~this)'s delta
 * wire, into the staging region. */
#define WSYNC_PULL_DELTA_TAG 0x80000000u

/* The request as JSON (new reference), or NULL without memory. */
json_t *wsync_pull_request_to_json(const wsync_pull_request_t *r);
/* Adds r's delta fields (base, delta_key, delta_at, delta_bytes) to the
 * request `j`; nothing when r->base is 0. 0, or -1 without memory. */
int wsync_pull_request_delta_to_json(const wsync_pull_request_t *r, json_t *j);
/* Parses and checks `j` against a plan of `nchunks` chunks (the map, when
 * present, must have exactly that many bits; with targets the node plan's
 * chunk count is not known yet: check it with wsync_pull_request_check_chunks).
 * On success *out owns its chunk map, targets, target_defs and hint: free
 * them with wsync_pull_request_clear. */
wsync_status_t wsync_pull_request_from_json(const json_t *j, uint32_t nchunks, wsync_pull_request_t *out);
void wsync_pull_request_clear(wsync_pull_request_t *r);
/* The chunk map, when present, has exactly the bits of `nchunks` chunks. */
wsync_status_t wsync_pull_request_check_chunks(const wsync_pull_request_t *r, uint32_t nchunks);
/* 1 if chunk c lands on the asking rank. */
int wsync_pull_request_lands(const wsync_pull_request_t *r, uint32_t chunk);

#endif
