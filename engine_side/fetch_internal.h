/* fetch_internal.h: one pull attempt's data part on a whole-image engine
 * rank, shared by fetch.c (landing, fan-out, verification, the trainer
 * requests) and fetch_relay.c (pieces from a parent node under relay:F);
 * the part every fetch shares is pull.h's. */
#ifndef WSYNC_ENGINE_FETCH_INTERNAL_H
#define WSYNC_ENGINE_FETCH_INTERNAL_H

#include "engine_side/chunk_fanout.h"
#include "engine_side/chunk_groups.h"
#include "engine_side/chunk_verify.h"
#include "engine_side/pull.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/release.h"

typedef struct recv_delta recv_delta_t; /* delta_land.h */

typedef struct fetch {
    recv_pull_t p; /* the attempt, its chunks, trainer ranks and relay (pull.h) */
    const wsync_plan_t *plan;
    const uint64_t *digests; /* the record's, by piece id (late: not all in yet) */
    int late;
    char *image;
    int land_delay_ms; /* test hook */

    uint32_t ncopied; /* chunks copied in from other ranks' windows */

    recv_fan_t fan; /* fan-out copies (and their digests) in flight (chunk_fanout.h) */

    /* each chunk verified against its pieces' digests, the sums their puts
     * brought along, late digests (chunk_verify.h) */
    recv_verify_t ver;

    /* in place with the caller's destination tensors: chunks written
     * through as job groups, at most one per chunk (chunk_groups.h) */
    const recv_dests_t *dm;
    recv_groups_t grp;
    recv_release_t rl;        /* and with a sparse image, its pages freed chunk by chunk (release.h) */
    wsync_redirect_t *direct; /* a lone rank's: bytes landing straight in the caller's tensors */
    size_t ndirect;
    recv_delta_t *delta; /* a pull asking for deltas (delta_land.h), or NULL */
} fetch_t;

/* fetch.c: the pull request for the chunks in f->mine, pieces put over rt
 * (new reference, NULL without memory). */
json_t *fetch_pull_json(const fetch_t *f, const recv_transport_t *rt);
/* fetch.c: ask trainer rank t for its pieces of the chunks in f->p.mine
 * (the ops' request_rank). */
wsync_status_t fetch_request_rank(recv_pull_t *p, int t);

/* fetch_relay.c: under relay:F, ask the parent node for every piece landing
 * here (*asked 0: this node has none, or none answers: ask the trainers);
 * recv_pull_relay_watch gives a failed or stalled one up. */
wsync_status_t fetch_relay_request(fetch_t *f, int *asked);

#endif
