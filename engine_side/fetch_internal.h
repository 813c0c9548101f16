/* fetch_internal.h: one pull attempt's data part on an engine rank,
 * the one fetch engine's: a node of targets, or the whole image as the
 * identity target (fetch_whole.c builds its node plan from the version's
 * plan and the landing map). Shared by fetch.c (the phases),
 * fetch_copy.c and fetch_identity.c, fetch_relay_puts.c
 * (the puts from a parent node under relay:F, and serving as one),
 * fetch_whole.c and delta_land.c; the part every attempt shares is
 * pull.h's. */
#ifndef WSYNC_ENGINE_FETCH_INTERNAL_H
#define WSYNC_ENGINE_FETCH_INTERNAL_H

#include "engine_side/chunk_fanout.h"
#include "engine_side/chunk_groups.h"
#include "engine_side/chunk_verify.h"
#include "engine_side/pull.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/release.h"
#include "engine_side/target_puts.h"

typedef struct recv_delta recv_delta_t; /* delta_land.h */

typedef struct fetch {
    recv_pull_t p;      /* the attempt, its chunks, trainer ranks and relay (pull.h) */
    recv_tlayout_t *tl; /* the node's targets, or NULL: the whole image */
    const wsync_node_plan_t *np;
    const wsync_plan_t *plan;    /* the version's (the whole image's pieces) */
    wsync_node_plan_t *whole_np; /* the whole image's node plan, built after the join (fetch_whole.c) */
    char *image;
    const recv_dests_t *dm; /* in place with the caller's destination tensors, or NULL */
    int land_delay_ms;      /* test hook (WSYNC_FAULT_LAND_DELAY_MS) */
    recv_delta_t *delta;    /* asking for deltas (delta_land.h), or NULL */
    recv_fan_t fan;         /* copies out of other ranks' windows in flight (chunk_fanout.h) */

    recv_release_t rl;        /* a sparse image's pages, freed as chunks are written through (release.h) */
    wsync_redirect_t *direct; /* bytes landing straight in the caller's tensors (recv_dests_direct) */
    size_t ndirect;

    /* under relay:F, the puts come from the parent node's relay and the
     * trainer ranks are asked for the digests alone (fetch_relay_puts.c) */
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
} fetch_t;

/* fetch.c: expect trainer rank t's puts landing here (none with
 * digests_only) and send it the request (the whole image: only to a rank
 * with puts landing here, asking for deltas where delta_land.h does). */
wsync_status_t fetch_request_rank(fetch_t *f, int t, int digests_only);
/* Trainer rank t's request over transport rt for the chunks of map
 * `chunks` (borrowed): with targets, the node's targets and landing hint,
 * so it names the node plan this attempt's puts come from. *out: new. */
wsync_status_t fetch_request_msg(fetch_t *f, int t, recv_transport_t *rt, unsigned char *chunks, json_t **out);
/* The request's targets, with their definitions unless trainer rank t
 * (-1: a relay, which never needs them) already has them. */
wsync_status_t fetch_add_targets(fetch_t *f, int t, wsync_pull_request_t *pr);

/* fetch_copy.c: where this rank's image bytes [off, off+len) lie when
 * some land straight in the caller's tensors (f->direct: a sparse GPU
 * image, or in place into the caller's host tensors): in the caller's
 * tensor of the direct span holding off, else in the image (the words
 * across destination edges, the bytes no destination holds). Returns where
 * off lies; *n how many bytes from it on lie there too. */
char *fetch_mine_at(const fetch_t *f, uint64_t off, uint64_t len, uint64_t *n);
/* fetch_copy.c: how many copies of chunk c into this rank come from
 * rank `from`; those copies (with `jobs`, queued on f->fan with the n digest
 * ranges rg, which then lie in the one copy; else done now); a sparse GPU
 * image's bytes of chunk c that other ranks copy, into its fan-out window. */
size_t fetch_copies_from(const fetch_t *f, uint32_t c, int from);
wsync_status_t fetch_copy_chunk(fetch_t *f, uint32_t c, int from, int jobs, const wsync_digest_range_t *rg,
                                size_t nrg);
wsync_status_t fetch_fan_publish(fetch_t *f, uint32_t c);
/* A sparse image's pages (release.h): chunk c's bytes copied into this rank
 * (written through already); chunk c's puts that landed here
 * (recv_release_poll's callback); chunk c landed here and complete: what
 * was copied in goes now, what landed once every reader copied it. */
void fetch_release_copied_in(const fetch_t *f, uint32_t c);
void fetch_release_landed(void *arg, uint32_t c);
void fetch_landed_release(fetch_t *f, uint32_t c);

/* fetch_identity.c: 1 if this node's plan is the whole image's
 * (every target the identity, each put the record's piece of its id, each
 * copy a whole chunk at its own offset) on an image with no holes; then: in
 * place with the caller's tensors, chunk c written through and digested as a
 * group of jobs, from the image (`from` is this rank: it landed here) or from
 * rank `from`'s window; chunk c copied in at once, digested and compared. */
int fetch_identity_node(const fetch_t *f);
wsync_status_t fetch_identity_group(fetch_t *f, uint32_t c, int from);
wsync_status_t fetch_identity_copied(fetch_t *f, uint32_t c);

/* fetch_relay_puts.c: under relay:F with a parent for this version, ask
 * its relay for every put landing here (*asked 1; a node of targets then
 * asks the trainer ranks for digests alone, the whole image and a node of
 * identity targets ask them nothing: the record holds their digests; the
 * whole image names its delta base, delta_land.h), else nothing;
 * recv_pull_relay_watch gives a failed or stalled one up. */
wsync_status_t fetch_relay_request(fetch_t *f, int *asked);
/* fetch_relay_puts.c: local rank 0 of a relaying node: its relay serves
 * this attempt's puts out of the ranks' images from now on (the whole
 * image: out of this rank's image, chunk by chunk as each is verified,
 * fetch_relay_verified). */
wsync_status_t fetch_relay_serve(fetch_t *f);
void fetch_relay_verified(fetch_t *f, uint32_t c);

/* fetch_whole.c: the whole image as the identity target: its node plan
 * under the landing map p.land (target_plan.h's identity case: put i is
 * piece i, chunk c lands on the map's rank, every other rank copies it
 * whole, but a rank that shares the landing rank's GPU where the map says
 * every rank there lands it, BOARD_LAND_GPU), into f->np (the ops'
 * check_landing); 1 if chunk c lands on this rank. */
wsync_status_t fetch_whole_plan(fetch_t *f);
int fetch_lands_here(const fetch_t *f, uint32_t c);

#endif
