/* fetch_internal.h: one pull attempt's data part on a whole-image engine
 * rank, shared by fetch.c (landing, fan-out, verification, the trainer
 * requests) and fetch_relay.c (pieces from a parent node under relay:F);
 * the part every fetch shares is pull.h's. */
#ifndef WSYNC_ENGINE_FETCH_INTERNAL_H
#define WSYNC_ENGINE_FETCH_INTERNAL_H

#include "engine_side/late_digests.h"
#include "engine_side/pull.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/release.h"

#define FANOUT_INFLIGHT 4 /* fan-out copy jobs queued at once */

typedef struct fan_job {
    wsync_mem_job_t *job;
    uint32_t chunk;
} fan_job_t;

typedef struct recv_delta recv_delta_t; /* delta_land.h */

typedef struct fetch {
    recv_pull_t p; /* the attempt, its chunks, trainer ranks and relay (pull.h) */
    const wsync_plan_t *plan;
    const uint64_t *digests;
    char *image;
    int land_delay_ms; /* test hook */

    uint32_t ncopied; /* chunks copied in from other ranks' windows */

    /* fan-out copies in flight, a ring */
    fan_job_t fan[FANOUT_INFLIGHT];
    int fh, fn;

    /* one chunk's pieces, for digests */
    wsync_digest_range_t *rg;
    uint64_t *sums;
    /* per piece: the word sum its put brought along, if it did */
    uint64_t *put_sum;
    unsigned char *has_put_sum;

    /* late digests (late_digests.h): until they are in (digests NULL),
     * chunks summed here wait with their pieces' sums */
    recv_late_t *late;
    uint64_t *late_sum;     /* [npieces] */
    uint32_t *waiting;      /* chunks summed, not compared yet */
    unsigned char *wlanded; /* [nchunks]: landed here (else copied in) */
    uint32_t nwaiting;

    /* in place with the caller's destination tensors: chunks written
     * through as job groups, at most one per chunk */
    const recv_dests_t *dm;
    recv_dgroup_t *groups; /* [nchunks] */
    uint32_t *inflight;    /* chunks whose group runs */
    uint32_t ninflight, nfan;
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

/* fetch.c: chunk c's pieces summed to `sums` (landed here, or copied in):
 * compared with the digests now, or kept until the late digests are in. */
wsync_status_t fetch_chunk_summed(fetch_t *f, uint32_t c, int landed, const uint64_t *sums);

/* fetch_late.c: late digests: start the thread that waits for them (with
 * room for the sums of the chunks that come first); once they are in,
 * compare every chunk waiting for them; what a failure says while they are
 * not in (the ops' waiting_more); the end. */
wsync_status_t fetch_late_begin(fetch_t *f);
wsync_status_t fetch_late_poll(fetch_t *f, int *progressed);
void fetch_late_waiting(const recv_pull_t *p, char *out, size_t len);
void fetch_late_end(fetch_t *f);

/* fetch_relay.c: under relay:F, ask the parent node for every piece landing
 * here (*asked 0: this node has none, or none answers: ask the trainers);
 * recv_pull_relay_watch gives a failed or stalled one up. */
wsync_status_t fetch_relay_request(fetch_t *f, int *asked);

#endif
