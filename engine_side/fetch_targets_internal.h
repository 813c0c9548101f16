/* fetch_targets_internal.h: one pull attempt's data part on an engine rank
 * whose node holds targets, shared by fetch_targets.c (the phases) and
 * fetch_targets_relay.c (the puts from a parent node under relay:F); the
 * part every fetch shares is pull.h's. */
#ifndef WSYNC_ENGINE_FETCH_TARGETS_INTERNAL_H
#define WSYNC_ENGINE_FETCH_TARGETS_INTERNAL_H

#include "engine_side/chunk_fanout.h"
#include "engine_side/chunk_groups.h"
#include "engine_side/chunk_verify.h"
#include "engine_side/pull.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/release.h"
#include "engine_side/target_puts.h"

typedef struct tfetch {
    recv_pull_t p; /* the attempt, its chunks, trainer ranks and relay (pull.h) */
    recv_tlayout_t *tl;
    const wsync_node_plan_t *np;
    char *image;
    recv_fan_t fan; /* copies out of other ranks' windows in flight (chunk_fanout.h) */

    recv_release_t rl;        /* a sparse image's pages, freed as chunks are written through (release.h) */
    wsync_redirect_t *direct; /* bytes landing straight in the caller's tensors (recv_dests_direct) */
    size_t ndirect;

    /* under relay:F, the puts come from the parent node's relay and the
     * trainer ranks are asked for the digests alone (fetch_targets_relay.c) */
    unsigned char *none; /* an empty chunk map: a request for digests alone */

    uint64_t *digests;   /* [segments]: the trainers' */
    unsigned char *have; /* [segments] */

    /* A node of identity targets (the whole image as targets: the node
     * plan's puts are the record's pieces, target_plan.h), on an image
     * with no holes: each
     * chunk is verified as it lands or is copied in, against the record's
     * piece digests (chunk_verify.h: the puts' fused sums, late digests,
     * the fan-out copies' digests), as the whole image's fetch does, not
     * segment by segment at the end; marked landed once verified. */
    int identity;
    const uint64_t *record; /* the record's digests by piece id */
    int late;               /* some still to come */
    recv_verify_t ver;
    recv_groups_t grp; /* in place with the caller's tensors: chunks written through as job groups */

    /* Any other node: verified put by put where its plan allows it
     * (target_puts.h: the puts' sums against the trainers' put digests,
     * with ver's put sums), else segment by segment at the end. */
    recv_tputs_t tp;
} tfetch_t;

/* fetch_targets.c: expect trainer rank t's puts landing here (none with
 * digests_only) and send it the request. */
wsync_status_t tf_request_rank(tfetch_t *f, int t, int digests_only);
/* The request's targets, with their definitions unless trainer rank t
 * (-1: a relay, which never needs them) already has them. */
wsync_status_t tf_add_targets(tfetch_t *f, int t, wsync_pull_request_t *pr);

/* fetch_targets_copy.c: how many copies of chunk c into this rank come from
 * rank `from`; those copies (with `jobs`, queued on f->fan with the n digest
 * ranges rg, which then lie in the one copy; else done now); a sparse GPU
 * image's bytes of chunk c that other ranks copy, into its fan-out window. */
size_t tf_copies_from(const tfetch_t *f, uint32_t c, int from);
wsync_status_t tf_copy_chunk(tfetch_t *f, uint32_t c, int from, int jobs, const wsync_digest_range_t *rg,
                             size_t nrg);
wsync_status_t tf_fan_publish(tfetch_t *f, uint32_t c);

/* fetch_targets_identity.c: 1 if this node's plan is the whole image's
 * (every target the identity, each put the record's piece of its id, each
 * copy a whole chunk at its own offset) on an image with no holes; then: in
 * place with the caller's tensors, chunk c written through and digested as a
 * group of jobs, from the image (`from` is this rank: it landed here) or from
 * rank `from`'s window; chunk c copied in at once, digested and compared. */
int tf_identity_node(const tfetch_t *f);
wsync_status_t tf_identity_group(tfetch_t *f, uint32_t c, int from);
wsync_status_t tf_identity_copied(tfetch_t *f, uint32_t c);

/* fetch_targets_relay.c: under relay:F with a parent for this version, ask
 * its relay for every put landing here (*asked 1; the trainer ranks are
 * then asked for digests alone), else nothing; recv_pull_relay_watch gives
 * a failed or stalled one up. */
wsync_status_t tf_relay_request(tfetch_t *f, int *asked);
/* fetch_targets_relay.c: local rank 0 of a relaying node: its relay serves
 * this attempt's puts out of the ranks' images from now on. */
wsync_status_t tf_relay_serve(tfetch_t *f);

#endif
