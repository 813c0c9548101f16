/* fetch_internal.h: one pull attempt's data part on a whole-image engine
 * rank, shared by fetch.c (landing, fan-out, verification, the trainer
 * requests) and fetch_relay.c (pieces from a parent node under relay:F,
 * and the fall back to the trainer ranks). */
#ifndef WSYNC_ENGINE_FETCH_INTERNAL_H
#define WSYNC_ENGINE_FETCH_INTERNAL_H

#include "engine_side/late_digests.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/release.h"

#define FANOUT_INFLIGHT 4 /* fan-out copy jobs queued at once */
#define POLL_BATCH 64     /* completions taken per transport poll */

typedef struct fan_job {
    wsync_mem_job_t *job;
    uint32_t chunk;
} fan_job_t;

typedef struct fetch {
    /* the attempt */
    wsync_receiver_t *r;
    const wsync_sync_layout_t *sl;
    const wsync_plan_t *plan;
    const uint64_t *digests;
    uint64_t gen, v, deadline;
    int slot, me;
    char *image;
    const uint8_t *land; /* the board's landing map */
    uint32_t reqid;      /* tags this attempt's puts */
    int land_delay_ms;   /* test hook */

    /* chunks */
    uint32_t *remaining; /* pieces still to land, per chunk landing here */
    unsigned char *mine; /* bitmap of the chunks landing here */
    uint32_t *pending;   /* chunks landing elsewhere, not yet copied here */
    uint32_t npending, nland, nlanded, ncopied, ndone;

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

    /* trainer ranks */
    recv_request_t *reqs;
    char (*addrs)[160];
    const char **tnames;
    uint64_t last_check;

    /* the parent node under relay:F (fetch_relay.c): while relay.on, every
     * piece landing here comes from its relay, asked once */
    recv_relay_pull_t relay;
    uint64_t last_landed;    /* when the last piece of this attempt landed */
    uint64_t last_reg_check; /* when the trainer registrations were last compared (recv_trainer_replaced) */
} fetch_t;

/* Chunk c is one this rank asks for (lands here and, after a relay was
 * given up, is still missing). */
static inline int is_mine(const fetch_t *f, uint32_t c)
{
    return (f->mine[c / 8] >> (c % 8)) & 1;
}

/* fetch.c: the pull request for the chunks in f->mine, pieces put over rt
 * (new reference, NULL without memory). */
json_t *fetch_pull_json(const fetch_t *f, const recv_transport_t *rt);
/* fetch.c: ask trainer rank t for its pieces of the chunks in f->mine. */
wsync_status_t fetch_request_rank(fetch_t *f, int t);

/* fetch_relay.c: under relay:F, ask the parent node for every piece landing
 * here (*asked 0: this node has none, or none answers: ask the trainers);
 * each poll, a relay that failed or landed nothing for relay_stall_ms is
 * given up, named, and what is missing is asked of the trainer ranks. */
wsync_status_t fetch_relay_request(fetch_t *f, int *asked);
wsync_status_t fetch_relay_watch(fetch_t *f);
void fetch_relay_end(fetch_t *f);

#endif
