/* tcp_internal.h: what the tcp transport's files share: its objects (the
 * receiver's regions and reader threads, the sender's connections and their
 * links), the socket helpers, and the ops each side implements. */
#ifndef WSYNC_COMMON_TCP_INTERNAL_H
#define WSYNC_COMMON_TCP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "common/net/auth.h"
#include "common/transport/cqueue.h"
#include "common/transport/tcp_wire.h"
#include "common/transport/transport.h"

#define TCP_BOUNCE (4u << 20) /* per slice of a GPU put; two per reader */
#define TCP_SOCKBUF (8 << 20)
#define TCP_MAX_CONNS 16

typedef struct tcp_region {
    wsync_region_t super;
    uint32_t id;
    int dead;
    int inflight;            /* readers writing into it now */
    wsync_redirect_t *spans; /* bytes landing elsewhere (tcp_redirect); changed only while inflight is 0 */
    size_t nspans;
    struct tcp_region *next;
} tcp_region_t;

typedef struct tcp_reader {
    struct tcp_reader *next;
    struct tcp_transport *t;
    int fd;
    pthread_t th;
    int done;
    char peer[64];
} tcp_reader_t;

typedef struct tcp_job {
    struct tcp_job *next;
    const tcp_region_t *src;
    uint64_t src_off;
    tcp_hdr_t hdr;
} tcp_job_t;

typedef struct tcp_link {
    struct tcp_conn *c;
    int fd;
    pthread_t th;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    tcp_job_t *head, *tail;
    uint64_t queued; /* bytes */
    int broken;
} tcp_link_t;

typedef struct tcp_conn {
    wsync_conn_t super;
    struct tcp_conn *next; /* in the transport's list, so close can stop it */
    uint64_t nonce;        /* the receiver instance its keys must name */
    int self_id;
    char peer[96];
    int nlinks;
    int stopping;
    tcp_link_t links[TCP_MAX_CONNS];
} tcp_conn_t;

typedef struct tcp_transport {
    wsync_transport_t super;
    wsync_transport_config_t cfg;
    char bind_host[64];
    wsync_auth_t auth; /* every connection proves the token, when set */
    uint64_t nonce;
    wsync_cqueue_t cq;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    tcp_region_t *regions;
    uint32_t next_region;
    int listen_fd;
    pthread_t acceptor;
    int stopping;
    tcp_reader_t *readers;
    tcp_conn_t *conns;
} tcp_transport_t;

/* Big socket buffers for bulk transfer. */
void tcp_tune(int fd);

/* Receiver side (tcp_recv.c). */
wsync_status_t tcp_listen(wsync_transport_t *tt, wsync_blob_t *addr);
/* Joins reader threads that ended, or all of them (shutting their sockets).
 * Called with t->lock held; drops it while joining. */
void tcp_reap_readers(tcp_transport_t *t, int all);

/* Sender side (tcp_send.c). */
wsync_status_t tcp_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out);
wsync_status_t tcp_put(wsync_conn_t *cc, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                       size_t dst_off, size_t len, uint64_t tag);
void tcp_disconnect(wsync_conn_t *cc);

#endif
