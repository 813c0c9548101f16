/* receiver_internal.h: a receiver's state, shared by receiver.c (set-up, the
 * accessors), attempt.c (one pull attempt of the node, as phases),
 * fetch.c (its data part, the one fetch engine: landing, fan-out
 * copies, verification), landing.c,
 * requests.c and transports.c. */
#ifndef WSYNC_ENGINE_RECEIVER_INTERNAL_H
#define WSYNC_ENGINE_RECEIVER_INTERNAL_H

#include "common/control/client.h"
#include "common/base/interrupt.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/control/sync_layout.h"
#include "common/transport/transport.h"
#include "common/window/window.h"
#include "common/targets/target_verify.h"
#include "engine_side/board.h"
#include "engine_side/dests.h"
#include "engine_side/reporter.h"
#include "engine_side/progress.h"
#include "common/proto/pull_reply.h"
#include "common/proto/pull_request.h"
#include "engine_side/relay.h"
#include "common/base/plan_spec.h"
#include "engine_side/wsync_receiver.h"

typedef struct peer_map {
    void *ptr; /* peer's window mapped here, or NULL */
    uint64_t len;
    uint32_t epoch; /* the peer's board epoch when mapped */
    int fan;        /* the peer's image is a sparse GPU one: this is its fan-out window (recv_fanmap_t) */
} peer_map_t;

/* The bytes of local rank p's image that the node's other ranks copy out of
 * it (node plan copies from p to another rank), sorted and merged. When p's
 * image is a sparse GPU one (gpu_sparse.c), p packs them back to back into
 * a fan-out window of their own, which is what p exports, and the other
 * ranks read them there. */
typedef struct recv_fanmap {
    size_t n;
    wsync_redirect_t *r; /* image ranges, sorted, disjoint (ptr unused) */
    uint64_t *at;        /* [n]: where each starts in the fan-out window */
    uint64_t len;        /* the fan-out window's bytes */
} recv_fanmap_t;

/* One open data transport, keyed by the name it was asked for ("auto" stays
 * "auto" even after it picked a backend). */
#define RECV_MAX_TRANSPORTS 2
typedef struct recv_transport {
    char want[16];
    const wsync_transport_ops_t *ops;
    wsync_transport_t *t;
    wsync_blob_t addr;
    wsync_region_t *region[BOARD_SLOTS];
    wsync_blob_t key[BOARD_SLOTS];
} recv_transport_t;

/* The engine layout of one trainer layout (targets.c): every local rank's
 * target, the node plan over them, and this rank's verification segments. */
typedef struct recv_tlayout {
    int L;
    wsync_target_t **tg; /* [L] */
    wsync_node_plan_t *np;
    wsync_node_plan_t *seg;   /* segments of tg[local_rank] (target_verify.h) */
    uint64_t image_len;       /* this rank's destination image */
    unsigned char *defs_sent; /* [world]: that trainer rank answered a request that carried our targets */
    int hint_world;           /* > 0: the colocated landing hint the plan was built with (sent along) */
    int *colo, *ncolo;        /* [world * L], [world] */
    recv_fanmap_t *fan;       /* [L] */
    wsync_fp8_aux_t *aux;     /* FP8 bands this rank quantizes itself (fp8_land.c), after its destinations */
    size_t naux;
} recv_tlayout_t;

/* fp8_land.c: quantizes tl's aux bands (their source rows verified in
 * image) into their FP8 codes and scales, in image and the caller's
 * tensors. A NaN or infinity fails naming the destination and the source
 * tensor. Blocking. */
wsync_status_t recv_fp8_land(wsync_receiver_t *r, const recv_tlayout_t *tl, const wsync_manifest_t *m, char *image,
                             uint64_t v);
/* What image offset off past the destinations holds, for a message: "the
 * BF16 rows of FP8 tensor X, rows a..b (quantized here)", or "(padding)". */
const char *recv_fp8_aux_name(const wsync_target_t *t, const recv_tlayout_t *tl, uint64_t off, char *buf,
                              size_t len);

/* Pull connections kept open between versions, by address: a request
 * takes its peer's (proving the token only when it opens a new one) and
 * gives it back once answered. */
#define RECV_PULL_CONNS 256
typedef struct recv_pull_conns {
    pthread_mutex_t lock;
    int n;
    struct {
        char addr[160];
        int fd;
    } c[RECV_PULL_CONNS];
} recv_pull_conns_t;

struct wsync_receiver {
    wsync_receiver_config_t cfg;
    int cancelled; /* atomic: wsync_receiver_cancel; every wait looks (recv_cancelled) */
    /* Local rank 0 (atomic, set by rank_changed on the board's thread):
     * degraded while a rank went and the node has not held a version on
     * every rank since; rejoined once a new process took the rank, so the
     * next pull brings the held version to it (attempt.c, wait_or_repair). */
    int degraded, rejoined;
    char *engine_id, *control_url, *token, *transport_name, *bind_host;
    char host_id[128];
    char board_name[256];
    const wsync_mem_ops_t *mem;
    int device;
    const wsync_window_ops_t *win_ops;
    wsync_control_t *control;
    recv_reporter_t *reporter; /* local rank 0: the node's reports */
    wsync_auth_t auth;         /* the token's keys: pulls, transports and the board prove it */
    board_t *board;
    recv_pull_conns_t pull_conns; /* to trainer ranks and relays, kept between versions */

    /* images: slot 0 (in-place and staged), slot 1 (staged) */
    int nslots;
    wsync_window_t win[BOARD_SLOTS];
    int caller_image; /* slot 0 is the caller's memory */
    int sparse;       /* the slots are sparse host windows (in place, the caller's tensors hold every tensor) */
    size_t image_len;
    /* a sparse GPU image (gpu_sparse.c): the bytes that land straight in the
     * caller's tensors, and the rest, which the image backs */
    int gpu_sparse;
    wsync_redirect_t *gpu_direct;
    size_t ngpu_direct;
    wsync_window_range_t *gpu_backed;
    size_t ngpu_backed;
    uint64_t gpu_fan_len;                /* this rank's fan-out bytes (recv_fanmap_t) */
    wsync_window_t gpu_fan[BOARD_SLOTS]; /* the fan-out window of each slot, exported instead of the image */
    peer_map_t peers[BOARD_MAX_RANKS][BOARD_SLOTS];

    /* the data transports (the configured one, and "local" for trainer
     * ranks on this host), opened lazily, each with the image regions */
    recv_transport_t tr[RECV_MAX_TRANSPORTS];
    int ntr;

    /* the held version */
    uint64_t held_version;
    int cur_slot;
    wsync_sync_layout_t *held;
    uint64_t layout_generation; /* changes whenever the held tensor list may have (wsync_receiver_layout_generation) */
    uint64_t last_gen;
    uint64_t failed_version;         /* local rank 0: the version of the last attempt that failed (attempt.c) */
    double last_secs;                /* duration of the last successful pull attempt (set-up excluded) */
    wsync_report_delta_t delta_last; /* what this rank's last attempt moved as deltas (delta_land.c) */
    double delta_wire_seen;          /* the wire's fraction of the bytes of this rank's last delta pull (0: none
                                        yet): what delta=auto costs the next at (delta_land.c) */
    recv_progress_t *progress;       /* phase and bytes of the pull in progress */

    /* engine layouts: this rank's spec on the board (NULL: the whole image,
     * today's path), and the engine layout of the held version */
    char *spec;
    recv_tlayout_t *held_tl;

    /* the caller's destination tensors (config.dests) for the held layout,
     * and for the attempt running (set only during its fetch: the fetches
     * and recv_tlayout_verify write through and digest them in place) */
    recv_dests_t *held_dm;
    const recv_dests_t *cur_dm;

    /* the plan setting as given, the plan this node pulls by (plan_choice.c;
     * under auto with a links file, chosen again for each version), the
     * machine's links (plan or delta auto with the links setting, else
     * NULL), and, when
     * the node may relay, on local rank 0 the relay serving other nodes
     * (relay.h), else NULL */
    wsync_plan_spec_t asked, plan;
    struct cost_links *links;
    int relay_capable;
    recv_relay_t *relay;
    /* Local rank 0: the record the long poll's answer carried (for
     * next_record's "version"), taken by the attempt's fetch_record instead
     * of a GET; every rank: the trainer ranks' endpoints of the record the
     * attempt uses (NULL: a record from an endpoint without them), so where
     * to pull from costs no GET /v1/trainers per version. Both owned. */
    json_t *next_record;
    json_t *cur_trainers;
};

/* One request to a trainer rank (or to a relay node), sent and answered on
 * a thread of its own. */
typedef struct recv_request {
    char pull_addr[160];
    recv_pull_conns_t *conns; /* where its connection comes from and goes back to (NULL: none kept) */
    int keep_fd;              /* answered: the connection to give back, or -1 */
    char who[160];            /* "trainer rank 3", "relay of engine e1": for messages */
    int rank;
    int connect_ms;       /* > 0: the connect's bound, else the deadline's */
    pthread_mutex_t lock; /* fd and aborted, between the thread and recv_request_abort */
    int fd, aborted;
    const wsync_auth_t *auth; /* the receiver's: the request proves the token */
    json_t *msg;              /* owned: freed by recv_request_end */
    wsync_pull_reply_t reply; /* the answer, when it succeeded (cleared likewise) */
    uint64_t deadline;
    pthread_t th;
    int started;
    int done; /* atomic */
    wsync_status_t status;
    char error[400];
} recv_request_t;

/* pull_join.c: a fresh request id (the high half of every put's tag), not `old`. */
uint32_t recv_new_reqid(uint32_t old);

/* One rank's pull from its parent node's relay (fetch_relay.c): while
 * `on`, the puts landing here come from that relay. */
typedef struct recv_relay_pull {
    int on;
    recv_request_t req;
    char id[128], addr[160]; /* the parent's engine id and relay address */
} recv_relay_pull_t;

/* fetch_relay.c: send the parent's relay (rp->id and rp->addr, set by
 * recv_relay_parent) the pull request `msg` (taken); rp is on from here. */
wsync_status_t recv_relay_pull_send(recv_relay_pull_t *rp, wsync_receiver_t *r, json_t *msg, uint64_t deadline);
/* 1 when the relay must be given up, with why: its request failed, or
 * nothing landed since last_landed for relay_stall_ms while `missing`. */
int recv_relay_pull_gone(const recv_relay_pull_t *rp, uint64_t last_landed, int missing, char *why, size_t len);
void recv_relay_pull_end(recv_relay_pull_t *rp);

/* requests.c: the fields every pull request of attempt (v, reqid) from this
 * rank carries, for puts over rt into image slot `slot` (engine, transport,
 * address, key, layout digest, the time left); the chunk map and targets
 * are the caller's. */
void recv_pull_request_init(wsync_pull_request_t *pr, const wsync_receiver_t *r, uint64_t v, uint32_t reqid,
                            const recv_transport_t *rt, int slot, const char *layout_digest, uint64_t deadline);

/* fetch_relay.c: under relay:F (or auto choosing it, costed for a version
 * of `image` bytes in `chunk`-byte chunks from `world` trainer ranks) the
 * relay of this node's parent for version v: 1 with its engine id and
 * address set, 0 when this node pulls from the trainer ranks. Every rank of
 * a node derives the same. */
int recv_relay_parent(wsync_receiver_t *r, uint64_t v, int world, uint64_t image, uint64_t chunk, char *id,
                      size_t idlen, char *addr, size_t addrlen);
/* 1 if this node may relay (its local rank 0 runs a relay): every rank then
 * keeps its whole image (nothing lands direct, no page is freed), since the
 * relay serves out of the ranks' images. */
int recv_node_relays(const wsync_receiver_t *r);

/* targets.c: post this rank's spec (with a target configured); the engine
 * layout of `sl`; check this rank's destination image against the
 * segment digests (digests[i] for segment i), naming the tensor that fails. */
wsync_status_t recv_targets_init(wsync_receiver_t *r);
wsync_status_t recv_tlayout_build(wsync_receiver_t *r, const wsync_sync_layout_t *sl, recv_tlayout_t **out);
void recv_tlayout_free(recv_tlayout_t *tl);
/* This rank's destination image size and tensor count for `sl` (its own
 * target alone: the first pull sizes its image slots with it before the
 * attempt opens). */
wsync_status_t recv_target_size(const wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t *len,
                                size_t *ntensors);
wsync_status_t recv_tlayout_verify(wsync_receiver_t *r, const recv_tlayout_t *tl, const char *image,
                                   const uint64_t *digests, uint64_t v);

/* landing.c: per trainer rank t, the local ranks on its GPU (colo[t * L ..],
 * ncolo[t] of them; none unless this rank holds GPU memory). */
wsync_status_t recv_colocated_ranks(wsync_receiver_t *r, int world, int *colo, int *ncolo);
/* landing.c, local rank 0: post the node plan's landing map. */
wsync_status_t recv_post_tlanding(wsync_receiver_t *r, const recv_tlayout_t *tl, uint64_t gen);
/* pull_join.c: map every peer's window of `slot` (again, if the peer
 * restarted); with `tl`, a peer's window must hold its own target. */
wsync_status_t recv_map_peers(wsync_receiver_t *r, int slot, uint64_t deadline, const recv_tlayout_t *tl);
wsync_status_t recv_wait_landing(wsync_receiver_t *r, uint64_t gen, uint64_t deadline, const uint8_t **out);
wsync_status_t recv_check_peers(wsync_receiver_t *r, uint64_t gen);

/* 1 when plan=auto has a links file to choose by (it may choose a relay
 * plan, chosen again for each version): r->links is also read by
 * delta=auto alone. */
static inline int recv_plan_auto(const wsync_receiver_t *r)
{
    return r->links != NULL && r->asked.kind == WSYNC_PLAN_AUTO && r->relay_capable;
}

/* 1 once wsync_receiver_cancel(r) or wsync_interrupt() was called: a wait
 * of the pull returns wsync_cancel_error then. */
static inline int recv_cancelled(const wsync_receiver_t *r)
{
    return wsync_cancelled(&r->cancelled);
}

/* receiver.c: image slots sized for `need` bytes, exported on the board;
 * ranks > 0: rejoin the board when local rank 0 restarted. */
wsync_status_t recv_ensure_images(wsync_receiver_t *r, uint64_t need);
wsync_status_t recv_rejoin_if_needed(wsync_receiver_t *r);
/* attempt_open.c: milliseconds left until `deadline` (wsync_now_ns
 * clock), 0 once past; and the open phase of an attempt: local rank 0
 * chooses the version and opens the attempt on the board (*a), the other
 * ranks wait for it. */
int recv_left_ms(uint64_t deadline);
wsync_status_t recv_attempt_open(wsync_receiver_t *r, uint64_t version, uint64_t deadline, board_attempt_t *a);
/* The versions the first pull sets up for (attempt_setup): the next one
 * newer than the held version (*v, 0 if none came in time), or `version`
 * itself once it is published. */
wsync_status_t recv_wait_newer(wsync_receiver_t *r, uint64_t deadline, uint64_t *v);
wsync_status_t recv_wait_named(wsync_receiver_t *r, uint64_t version, uint64_t deadline);

/* fetch.c, the one fetch engine: bring this rank's image slot
 * a->slot to version a->version in attempt a->gen, for the node's targets
 * `tl`, or, tl NULL, the whole image (the identity target: fetch_whole.c);
 * on success the slot holds it verified. `digests`: the record's (the whole
 * image and a node of identity targets verify each chunk by them); `late`:
 * the record came without (some) of them; they are waited for while
 * landing. */
wsync_status_t recv_fetch(wsync_receiver_t *r, const board_attempt_t *a, const wsync_sync_layout_t *sl,
                          recv_tlayout_t *tl, const uint64_t *digests, int late, uint64_t deadline);
/* landing.c, local rank 0: choose the local rank each chunk of `sl` lands
 * on for attempt `gen` and post it on the board. */
wsync_status_t recv_plan_landing(wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t gen);

/* requests.c: the pull address of every trainer rank and the transport its
 * pieces come over; start a request (takes `msg`), did it fail, join it. */
wsync_status_t recv_trainer_addrs(wsync_receiver_t *r, int world, char (*addrs)[160], const char **tnames);
/* The trainer ranks' endpoints ([{"rank","endpoint"}], new reference): the
 * attempt's record's, else GET /v1/trainers. */
wsync_status_t recv_trainers(wsync_receiver_t *r, json_t **out);
wsync_status_t recv_request_start(recv_request_t *q, recv_pull_conns_t *conns, const wsync_auth_t *auth, int rank,
                                  const char *addr, json_t *msg, uint64_t deadline);
void recv_pull_conns_init(recv_pull_conns_t *pc);
/* Close every kept connection (a trainer may have restarted; destroy). */
void recv_pull_conns_drop(recv_pull_conns_t *pc);
int recv_request_failed(const recv_request_t *q);
/* 1 when a trainer rank whose request in reqs[world] is unanswered is now
 * registered at another pull address than the one asked (it was replaced:
 * restarted elsewhere; the one asked went silent, and will not answer), with
 * why; quiet_ns: how long nothing landed, for the message. One GET
 * /v1/trainers. An attempt asks this once a second while nothing lands
 * (RECV_REPLACED_CHECK_NS), so a silent peer's replacement ends it. */
#define RECV_REPLACED_CHECK_NS 1000000000ULL
int recv_trainer_replaced(wsync_receiver_t *r, const recv_request_t *reqs, int world, uint64_t quiet_ns, char *why,
                          size_t len);
/* 1 once the answer came (or the request was never started). */
int recv_request_done(const recv_request_t *q);
/* Gives up on it: its connection is shut, so its thread ends at once (then
 * recv_request_end joins it without waiting for the deadline). */
void recv_request_abort(recv_request_t *q);
void recv_request_end(recv_request_t *q);

/* transports.c: the transport asked for as `name`, opened, listening, with
 * every image slot registered; which one serves a trainer rank on host
 * `host_id` with memory `device` ("local" for same-host GPU trainer ranks
 * when this rank holds GPU memory, else the configured one; the
 * local_transport setting, WSYNC_LOCAL_TRANSPORT=0, turns that off); drop every transport (after a
 * failed attempt, so nothing stale can land). */
wsync_status_t recv_transport_ensure(wsync_receiver_t *r, const char *name, recv_transport_t **out);
const char *recv_transport_for(wsync_receiver_t *r, const char *host_id, const char *device);
/* 1 if an open transport pins the image's pages (verbs memory regions):
 * freeing them would leave the adapter writing pages the image no longer has. */
int recv_transport_pins(const wsync_receiver_t *r);
/* In place into the caller's tensors in host memory or a sparse GPU image
 * (allowed: the fetch agrees), when every transport the trainer ranks (names[0..n)) put over
 * can redirect: the bytes no other rank reads (recv_dests_direct over node
 * plan np, NULL: the whole image, read by no other rank) land straight in
 * the caller's tensors, skipping the image and the write-through. Every
 * open transport's region of `slot` gets those spans (*spans, the
 * caller's to free), or none. */
wsync_status_t recv_transport_direct(wsync_receiver_t *r, int slot, const char **names, int n, int allowed,
                                     const wsync_node_plan_t *np, wsync_redirect_t **spans, size_t *nspans);
void recv_transport_reset(wsync_receiver_t *r);

/* gpu_sparse.c: at setup, in place into the caller's GPU tensors with a
 * target over transports that redirect, on a node that does not relay:
 * r->gpu_sparse, the bytes landing straight in the caller's tensors and
 * the ranges the image backs (recv_ensure_images allocates it sparse);
 * nothing otherwise. */
wsync_status_t recv_gpu_sparse_setup(wsync_receiver_t *r, const wsync_sync_layout_t *sl, size_t ntensors);
/* An attempt on a sparse GPU image: its direct spans (can_direct 0 when it
 * cannot land any) must be those of the setup, else a conflict that says
 * to restart the engine. */
wsync_status_t recv_gpu_sparse_check(const wsync_receiver_t *r, int can_direct, const wsync_redirect_t *spans,
                                     size_t n);
void recv_gpu_sparse_free(wsync_receiver_t *r);
/* Rank p's fan-out bytes under node plan np. */
wsync_status_t recv_fanmap_build(const wsync_node_plan_t *np, int p, recv_fanmap_t *out);
void recv_fanmap_free(recv_fanmap_t *m);
/* Where image offset `off` (inside one of m's ranges) lies in the fan-out window. */
uint64_t recv_fanmap_at(const recv_fanmap_t *m, uint64_t off);

#endif
