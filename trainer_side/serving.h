/* serving.h: a publisher serving engine pulls (pull_server.c): the pull
 * port and its threads, the transports opened for it with their pollers and
 * connections, and the pulls in flight. Owned by the publisher; its fields
 * are under the publisher's lock (p->lock) unless said otherwise. */
#ifndef WSYNC_TRAINER_SERVING_H
#define WSYNC_TRAINER_SERVING_H

#include <pthread.h>

#include <jansson.h>

#include "common/base/blob.h"
#include "common/transport/transport.h"
#include "trainer_side/slots.h"

typedef struct pub_conn {
    struct pub_conn *next;
    char key[2 * WSYNC_BLOB_MAX + 1]; /* hex of the receiver's address */
    char owner[160];                  /* "<engine id>/<local rank>": one live conn each */
    wsync_conn_t *conn;
    int users; /* pulls using it now */
    int stale; /* dropped when the last user is done */
} pub_conn_t;

/* A pull being served: puts in flight are counted down by the poller. */
typedef struct pub_request {
    struct pub_request *next;
    uint32_t req; /* the engine's request id: high half of every tag */
    int outstanding;
    size_t nput;    /* puts handed to the transport (put_list.c) */
    uint64_t bput;  /* and their bytes */
    size_t ndirect; /* of them gathered straight into the asker's window (direct_pack, put_list.c) */
    wsync_status_t status;
    char error[512];
    struct pub_stage *stage;     /* engine layouts: the packed puts' stage it reads (target_stage.c) */
    json_t *segments;            /* {"segments": {...}}: the digests for the answer */
    struct pub_delta_req *delta; /* a pull naming a base: its delta wires (delta_serve.c), or NULL */
} pub_request_t;

typedef struct pub_transport {
    const wsync_transport_ops_t *ops;
    wsync_transport_t *t;
    pthread_t poller;
    int poller_started;
    pub_conn_t *conns;
} pub_transport_t;

typedef struct pub_serving {
    struct wsync_pull_port *port; /* the pull port (common/proto/pull_port.h) */
    int listen_port;
    int stopping; /* set (atomically) at stop: threads and waits end */
    pub_transport_t transports[PUB_MAX_TRANSPORTS];
    int ntransports;
    pub_request_t *requests;
    uint64_t pulls_ended;                /* pull requests answered (or failed): wait_held wakes on it */
    struct pub_delta_cache *delta_cache; /* encoded delta wires per slot (delta_serve.c), or NULL */
} pub_serving_t;

/* Starts the pull port on cfg.listen (p->serving.listen_port is its port);
 * stop ends its threads and the pollers and closes the connections (the
 * transports themselves close at destroy, after the slots' regions). */
wsync_status_t pub_server_start(wsync_publisher_t *p);
void pub_server_stop(wsync_publisher_t *p);
/* p->lock held: wait until every piece of mine overlapping image bytes
 * [off, off + len) is copied into slot s (the copy runs after the version
 * is announced); fails naming why (withdrawn, timeout, stop). */
wsync_status_t pub_wait_range(wsync_publisher_t *p, pub_slot_t *s, uint64_t off, uint64_t len, uint64_t deadline);

#endif
