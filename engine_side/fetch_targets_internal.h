/* fetch_targets_internal.h: one pull attempt's data part on an engine rank
 * whose node holds targets, shared by fetch_targets.c (the phases) and
 * fetch_targets_relay.c (the puts from a parent node under relay:F, and the
 * fall back to the trainer ranks). */
#ifndef WSYNC_ENGINE_FETCH_TARGETS_INTERNAL_H
#define WSYNC_ENGINE_FETCH_TARGETS_INTERNAL_H

#include "engine_side/receiver_internal.h"
#include "engine_side/release.h"

#define POLL_BATCH 64

typedef struct tfetch {
    wsync_receiver_t *r;
    const wsync_sync_layout_t *sl;
    recv_tlayout_t *tl;
    const wsync_node_plan_t *np;
    uint64_t gen, v, deadline;
    int slot, me, world;
    char *image;
    uint32_t reqid;

    uint32_t *remaining; /* puts still to land, per chunk landing here */
    unsigned char *mine; /* bitmap of the chunks landing here */
    uint32_t *pending;   /* chunks landing elsewhere that this rank copies from */
    uint32_t npending, nland, nlanded, ndone, nwant;

    recv_release_t rl;        /* a sparse image's pages, freed as chunks are written through (release.h) */
    wsync_redirect_t *direct; /* bytes landing straight in the caller's tensors (recv_dests_direct) */
    size_t ndirect;

    recv_request_t *reqs;
    char (*addrs)[160];
    const char **tnames;
    uint64_t last_check;

    /* under relay:F, the puts come from the parent node's relay and the
     * trainer ranks are asked for the digests alone (fetch_targets_relay.c) */
    recv_relay_pull_t relay;
    unsigned char *none; /* an empty chunk map: a request for digests alone */
    uint64_t last_landed;
    uint64_t last_reg_check; /* when the trainer registrations were last compared (recv_trainer_replaced) */

    uint64_t *digests;   /* [segments]: the trainers' */
    unsigned char *have; /* [segments] */
} tfetch_t;

/* Chunk c lands here and is still asked for. */
static inline int tf_is_mine(const tfetch_t *f, uint32_t c)
{
    return f->mine[c / 8] >> (c % 8) & 1;
}

/* fetch_targets.c: expect trainer rank t's puts landing here (none with
 * digests_only) and send it the request. */
wsync_status_t tf_request_rank(tfetch_t *f, int t, int digests_only);
/* The request's targets, with their definitions unless trainer rank t
 * (-1: a relay, which never needs them) already has them. */
wsync_status_t tf_add_targets(tfetch_t *f, int t, wsync_pull_request_t *pr);

/* fetch_targets_relay.c: under relay:F with a parent for this version, ask
 * its relay for every put landing here (*asked 1; the trainer ranks are
 * then asked for digests alone), else nothing. */
wsync_status_t tf_relay_request(tfetch_t *f, int *asked);
/* A relay that failed, or landed nothing here for relay_stall_ms while puts
 * are missing, is given up (named in the log): the trainer ranks are asked
 * for the chunks still missing, under a new request id. */
wsync_status_t tf_relay_watch(tfetch_t *f);
void tf_relay_end(tfetch_t *f);

#endif
