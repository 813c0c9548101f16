/* transports.h: a receiver's ways in (recv_transports_t): the data
 * transports the trainer ranks put over (the configured one, and "local" for
 * trainer ranks on this host), opened lazily, each with the image slots
 * registered, and the pull connections kept open between versions. Owned by
 * the receiver (r->transports): transports.c opens, redirects and drops the
 * transports; requests.c takes and gives back the connections. */
#ifndef WSYNC_ENGINE_TRANSPORTS_H
#define WSYNC_ENGINE_TRANSPORTS_H

#include <pthread.h>

#include "common/targets/target_plan.h"
#include "common/transport/transport.h"
#include "engine_side/board.h"
#include "engine_side/wsync_receiver.h"

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

typedef struct recv_transports {
    recv_transport_t tr[RECV_MAX_TRANSPORTS];
    int ntr;
    recv_pull_conns_t pull_conns; /* to trainer ranks and relays, kept between versions */
    int direct_refused;           /* a transport refused the caller's tensors (said once) */
} recv_transports_t;

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
int recv_transport_pins(const recv_transports_t *ts);
/* In place into the caller's tensors (allowed: the fetch agrees), when
 * every transport the trainer ranks (names[0..n)) put over can redirect
 * (tcp, host or GPU memory; local, GPU memory): the bytes no other rank
 * reads (recv_dests_direct over node plan np, NULL: the whole image, read
 * by no other rank) land straight in the caller's tensors, skipping the
 * image and the write-through. Every open transport's region of `slot`
 * gets those spans (*spans, the caller's to free), or none: where one
 * refuses them (local: tensors in memory CUDA cannot export over IPC) the
 * bytes land in the image and are copied on, as without redirect (a sparse
 * GPU image, which has no memory under them, fails then). */
wsync_status_t recv_transport_direct(wsync_receiver_t *r, int slot, const char **names, int n, int allowed,
                                     const wsync_node_plan_t *np, wsync_redirect_t **spans, size_t *nspans);
void recv_transport_reset(wsync_receiver_t *r);

/* requests.c: the connections' set-up, and closing every kept connection
 * (a trainer may have restarted; destroy). */
void recv_pull_conns_init(recv_pull_conns_t *pc);
void recv_pull_conns_drop(recv_pull_conns_t *pc);

#endif
