/* requests.h: one pull request to a trainer rank or a relay node
 * (recv_request_t, requests.c), sent and answered on a thread of its own
 * over a connection taken from the receiver's kept ones (transports.h), and
 * a rank's pull from its parent node's relay (recv_relay_pull_t,
 * fetch_relay.c). Owned by the attempt that starts them. */
#ifndef WSYNC_ENGINE_REQUESTS_H
#define WSYNC_ENGINE_REQUESTS_H

#include <jansson.h>
#include <pthread.h>

#include "common/net/auth.h"
#include "common/proto/pull_reply.h"
#include "common/proto/pull_request.h"
#include "engine_side/transports.h"
#include "engine_side/wsync_receiver.h"

typedef struct recv_request {
    char pull_addr[160];
    recv_pull_conns_t *conns; /* where its connection comes from and goes back to (NULL: none kept) */
    int keep_fd;              /* answered: the connection to give back, or -1 */
    char who[160];            /* "trainer rank 3", "relay of engine e1": for messages */
    int rank;
    int connect_ms;       /* > 0: the connect's bound, else the deadline's */
    pthread_mutex_t lock; /* fd, aborted and done's signal, between the thread and the attempt */
    pthread_cond_t cond;  /* signalled once done */
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

/* requests.c: the pull address of every trainer rank and the transport its
 * pieces come over; start a request (takes `msg`), did it fail, join it. */
wsync_status_t recv_trainer_addrs(wsync_receiver_t *r, int world, char (*addrs)[160], const char **tnames);
/* The trainer ranks' endpoints ([{"rank","endpoint"}], new reference): the
 * attempt's record's, else GET /v1/trainers. */
wsync_status_t recv_trainers(wsync_receiver_t *r, json_t **out);
wsync_status_t recv_request_start(recv_request_t *q, recv_pull_conns_t *conns, const wsync_auth_t *auth, int rank,
                                  const char *addr, json_t *msg, uint64_t deadline);
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
/* Waits until the answer came or `ms` milliseconds passed, whichever is
 * first (woken by the request's thread, not polled). */
void recv_request_wait(recv_request_t *q, int ms);
/* Gives up on it: its connection is shut, so its thread ends at once (then
 * recv_request_end joins it without waiting for the deadline). */
void recv_request_abort(recv_request_t *q);
void recv_request_end(recv_request_t *q);

#endif
