/* verbs_internal.h: the verbs transport's objects, shared by its files:
 * verbs_dev.c (devices, memory registration, completion pollers),
 * verbs_conn.c (queue pairs, handshake, connect/accept) and verbs.c (ops
 * table and data path). Built only with libibverbs. */
#ifndef WSYNC_COMMON_VERBS_INTERNAL_H
#define WSYNC_COMMON_VERBS_INTERNAL_H

#include <infiniband/verbs.h>
#include <pthread.h>

#include "common/net/auth.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"
#include "common/transport/verbs_wire.h"

#define VERBS_SEND_DEPTH 512 /* work requests in flight per queue pair */
#define VERBS_RECV_DEPTH 512 /* receives kept posted per queue pair */
#define VERBS_CQ_DEPTH 4096
#define VERBS_EXP_BUCKETS 4096

/* wr_id low bits: receives carry their peer, sends their job; both are
 * malloc'd (16-byte aligned), so two low bits are free. */
#define VERBS_WR_RECV 1u
#define VERBS_WR_LAST 2u

struct verbs_transport;

/* One opened NIC port: PD, completion channel and CQ, and its poller. */
typedef struct verbs_dev {
    struct verbs_transport *t;
    int index;
    char name[64];
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    uint8_t port;
    int is_roce;
    int gid_index;
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu mtu;
    uint32_t max_msg;
    int send_depth;
    pthread_t poller;
    int poller_started;
} verbs_dev_t;

/* A registration cache entry: memory registered on every device once, then
 * shared by every reg() of a range inside it (refcounted). */
typedef struct verbs_mr {
    struct verbs_mr *next;
    char *ptr;
    size_t len;
    wsync_mem_kind_t kind;
    int refs;
    int dmabuf_fd; /* -1 unless registered through dma-buf */
    struct ibv_mr *mr[VERBS_MAX_DEVS];
} verbs_mr_t;

typedef struct verbs_region {
    wsync_region_t super;
    verbs_mr_t *mr;
} verbs_region_t;

/* One put, from queueing to its last segment's completion. */
typedef struct verbs_job {
    struct verbs_job *next;
    struct verbs_link *l;
    uint64_t tag, len;
    uint64_t src_addr, dst_addr;
    uint32_t lkey, rkey;
    uint32_t nseg;
    int failed; /* an ERROR was already reported */
} verbs_job_t;

/* Sender side: one queue pair of a connection, on one local device. */
typedef struct verbs_link {
    struct verbs_conn *c;
    verbs_dev_t *dev;
    struct ibv_qp *qp;
    int remote_dev;           /* index into the key's rkeys */
    verbs_job_t *head, *tail; /* queued, not yet posted */
    int inflight_wr;
    int broken;
} verbs_link_t;

typedef struct verbs_conn {
    wsync_conn_t super;
    struct verbs_conn *next;
    uint64_t nonce;
    int self_id;
    char peer[VERBS_HOSTPORT_MAX];
    int fd; /* handshake socket, kept so the receiver sees us leave */
    int stopping;
    unsigned rr;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int nlinks;
    verbs_link_t links[VERBS_MAX_DEVS];
} verbs_conn_t;

/* Receiver side: one sender's queue pairs. */
typedef struct verbs_peer {
    struct verbs_peer *next;
    struct verbs_transport *t;
    int sender;
    char addr[64];
    int fd;
    int dead;
    int nqp;
    struct ibv_qp *qp[VERBS_MAX_DEVS];
    verbs_dev_t *dev[VERBS_MAX_DEVS];
} verbs_peer_t;

/* What the receiver expects: restores a landed piece's full tag and length. */
typedef struct verbs_expect {
    struct verbs_expect *next;
    int sender;
    uint32_t low;
    uint64_t tag, len;
} verbs_expect_t;

typedef struct verbs_transport {
    wsync_transport_t super;
    wsync_transport_config_t cfg;
    char bind_host[64];
    wsync_auth_t auth; /* handshakes prove the token, when set */
    uint64_t nonce;
    wsync_cqueue_t cq;
    pthread_mutex_t lock; /* mrs, peers, conns, expectations */
    int stopping;
    int ndev;
    verbs_dev_t devs[VERBS_MAX_DEVS];
    verbs_mr_t *mrs;
    int listen_fd;
    pthread_t acceptor;
    int acceptor_started;
    verbs_peer_t *peers;
    verbs_conn_t *conns;
    verbs_expect_t *exp[VERBS_EXP_BUCKETS];
} verbs_transport_t;

/* verbs_dev.c */
int verbs_probe(char *why, size_t whylen);
wsync_status_t verbs_devs_open(verbs_transport_t *t);
wsync_status_t verbs_pollers_start(verbs_transport_t *t);
void verbs_pollers_stop(verbs_transport_t *t);
void verbs_devs_close(verbs_transport_t *t);
wsync_status_t verbs_mr_get(verbs_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind, verbs_mr_t **out);
void verbs_mr_put(verbs_transport_t *t, verbs_mr_t *m);
void verbs_mrs_free(verbs_transport_t *t);

/* verbs_conn.c */
wsync_status_t verbs_qp_create(verbs_dev_t *d, int recv_depth, struct ibv_qp **out);
wsync_status_t verbs_qp_connect(verbs_dev_t *d, struct ibv_qp *qp, uint32_t my_psn, const verbs_qp_attr_t *remote);
void verbs_qp_attr_local(verbs_dev_t *d, struct ibv_qp *qp, uint32_t psn, verbs_qp_attr_t *out);
wsync_status_t verbs_listen_start(verbs_transport_t *t, int *port);
void verbs_acceptor_stop(verbs_transport_t *t);
void verbs_peers_free(verbs_transport_t *t);
wsync_status_t verbs_conn_open(verbs_transport_t *t, const verbs_addr_t *a, int self_id, verbs_conn_t **out);
void verbs_conn_close(verbs_conn_t *c);
int verbs_post_recv(verbs_peer_t *p, int i);

/* verbs.c: one completion, from a device's poller. */
void verbs_on_wc(verbs_dev_t *d, const struct ibv_wc *wc);

#endif
