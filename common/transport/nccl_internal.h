/* nccl_internal.h: what the nccl transport's files share: its objects (a
 * queued op, a group in flight, a sender/receiver pair and the transport),
 * the hello a sender opens with, and the ops each file implements. Builds
 * with CUDA and NCCL only. */
#ifndef WSYNC_COMMON_TRANSPORT_NCCL_INTERNAL_H
#define WSYNC_COMMON_TRANSPORT_NCCL_INTERNAL_H

#if WSYNC_HAVE_NCCL && WSYNC_HAVE_CUDA
#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "common/base/cuda_checks.h"
#include "common/net/auth.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"

#define NC_MAGIC 0x6c63636e5f6e7973ULL
#define NC_MAX_PEERS 256
/* Ops per ncclGroupStart/End. NCCL leaves p2p calls grouped differently on
 * the two ranks undefined (NVIDIA/nccl#1279), so grouping depends on the op
 * sequence only, never on timing: a group is NC_GROUP_MAX consecutive ops, or
 * fewer when the caller's batch ends (put_flush / expect_flush mark its last
 * op). Both sides see the same sequence and the same batch ends. A group of
 * 8 moves 64 MiB chunks measurably faster than single-op groups (0.963 vs
 * 0.905 of one raw send on two H200s): one kernel launch drives them all.
 * WSYNC_NCCL_GROUP=1..8 overrides (both sides must agree). */
#define NC_GROUP_MAX 8
#define NC_INFLIGHT_MAX 8 /* groups in flight per pair */

typedef struct nc_op {
    struct nc_op *next;
    int send; /* 1 = ncclSend, 0 = ncclRecv */
    int last; /* the caller's batch ends here: close the group */
    uint64_t queued_ns;
    void *ptr;
    size_t len;
    uint64_t tag;
} nc_op_t;

typedef struct nc_group {
    cudaEvent_t done;
    nc_op_t *ops[NC_GROUP_MAX];
    int n;
    uint64_t issued_ns;
} nc_group_t;

typedef struct nc_transport nc_transport_t;

/* One pair: on the receiver, one per sender id; on the sender, the conn. */
typedef struct nc_peer {
    wsync_conn_t super; /* used on the sender side */
    nc_transport_t *t;
    int id;     /* sender id (peer reported in completions) */
    int sender; /* 1 on the sending side */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    nc_op_t *head, *tail; /* queued, not yet issued */
    int nqueued, nlast;   /* ops queued; of them, ones ending a batch */
    uint64_t first_op_ns; /* when the first op was queued */
    ncclUniqueId uid;
    int have_uid, ready, dead, stop;
    ncclComm_t comm;
    pthread_t worker;
    int worker_started;
} nc_peer_t;

struct nc_transport {
    wsync_transport_t super;
    int device;
    int timeout_ms;
    int op_timeout_ms;
    char bind_host[64];
    wsync_auth_t auth; /* handshakes prove the token, when set */
    int listen_fd;
    char listen_addr[96]; /* "HOST:PORT" senders dial */
    pthread_t acceptor;
    int acceptor_started;
    volatile int stop;
    wsync_cqueue_t cq;
    pthread_mutex_t lock;
    nc_peer_t *peers[NC_MAX_PEERS]; /* receiver side, by slot */
    int npeers;
};

typedef struct nc_hello {
    uint64_t magic;
    int32_t sender_id;
    int32_t pad;
} nc_hello_t;

/* Ops per group, set at open from WSYNC_NCCL_GROUP (1..NC_GROUP_MAX). */
extern int nc_group_max;

/* nccl_peer.c: a pair's worker, its ops and groups. */
wsync_status_t nc_peer_new(nc_transport_t *t, int id, int sender, nc_peer_t **out);
void nc_peer_free(nc_peer_t *p);
wsync_status_t nc_peer_enqueue(nc_peer_t *p, int send, void *ptr, size_t len, uint64_t tag);
void nc_peer_flush(nc_peer_t *p);

/* nccl_conn.c: the handshake socket, the receiver's pairs, connect. */
wsync_status_t nc_peer_for(nc_transport_t *t, int id, nc_peer_t **out);
wsync_status_t nc_listen(wsync_transport_t *tt, wsync_blob_t *addr);
wsync_status_t nc_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out);

#endif
#endif
