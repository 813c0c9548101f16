/* nccl.c: the NCCL transport. One 2-rank communicator per sender/receiver
 * pair (a dead peer never poisons the others): the receiver's listen() opens a
 * TCP handshake socket, a sender's connect() dials it and gets the
 * ncclUniqueId the receiver generated, both init (rank 0 = sender). Puts and
 * expects queue per pair and a worker issues them in order, grouped, on a
 * dedicated stream, with an event per group: its completion gives SENT on the
 * sender and LANDED on the receiver. Communicators are non-blocking, so a
 * dead or silent peer is aborted after a timeout instead of hanging. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/settings.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"
#include "common/util.h"

#if WSYNC_HAVE_NCCL && WSYNC_HAVE_CUDA
#include "common/cuda_checks.h"

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

static int nc_can_use(const wsync_transport_config_t *cfg)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl: no CUDA device here");
        return 0;
    }
    if (cfg && cfg->device < 0) {
        wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl: needs GPU memory (--device cuda:N)");
        return 0;
    }
    return 1;
}

/* Waits for the pair's non-blocking communicator to leave ncclInProgress,
 * up to timeout_ms, or until the pair is being closed (a close never waits
 * out a set-up whose peer is gone). The caller aborts it on failure. */
static wsync_status_t comm_wait(nc_peer_t *p, int timeout_ms, const char *what)
{
    ncclComm_t comm = p->comm;
    int peer = p->id;
    uint64_t deadline = wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    ncclResult_t r = ncclInProgress;
    for (;;) {
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess)
            r = ncclInternalError;
        if (r != ncclInProgress)
            break;
        if (wsync_now_ns() > deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "nccl %s with peer %d: no progress in %d ms", what, peer,
                               timeout_ms);
        if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
            return wsync_error(WSYNC_ERR_PEER, "nccl %s with peer %d: transport closed", what, peer);
        usleep(20);
    }
    if (r != ncclSuccess)
        return wsync_error(WSYNC_ERR_NCCL, "nccl %s with peer %d: %s", what, peer, ncclGetErrorString(r));
    return WSYNC_OK;
}

static wsync_status_t comm_init(nc_peer_t *p)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    wsync_status_t st;
    cfg.blocking = 0;
    CUDA_CHECK(cudaSetDevice(p->t->device));
    NCCL_CHECK(ncclCommInitRankConfig(&p->comm, 2, p->uid, p->sender ? 0 : 1, &cfg));
    st = comm_wait(p, p->t->timeout_ms, "communicator set-up");
    if (st != WSYNC_OK) {
        ncclCommAbort(p->comm);
        p->comm = NULL;
    }
    return st;
}

static void fail_ops(nc_peer_t *p, nc_op_t *ops, const char *why)
{
    while (ops) {
        nc_op_t *n = ops->next;
        wsync_cqueue_push_error(&p->t->cq, ops->tag, p->sender ? -1 : p->id, WSYNC_ERR_PEER, "%s", why);
        free(ops);
        ops = n;
    }
}

static int group_max = NC_GROUP_MAX;

/* A full group, or a batch's end, is queued: a group can be issued. */
static int group_ready(const nc_peer_t *p)
{
    return p->head && (p->nqueued >= group_max || p->nlast > 0);
}

/* Issues up to NC_GROUP_MAX queued ops as one group. Called with p->lock
 * held; drops it while calling NCCL. */
static wsync_status_t issue_group(nc_peer_t *p, cudaStream_t s, nc_group_t *g)
{
    wsync_status_t st = WSYNC_OK;
    ncclResult_t r;
    int i;
    g->n = 0;
    while (p->head && g->n < group_max) {
        nc_op_t *o = p->head;
        g->ops[g->n++] = o;
        p->head = o->next;
        p->nqueued--;
        if (o->last) {
            p->nlast--;
            break;
        }
    }
    if (p->head == NULL)
        p->tail = NULL;
    pthread_mutex_unlock(&p->lock);
    ncclGroupStart();
    for (i = 0; i < g->n; i++) {
        nc_op_t *o = g->ops[i];
        r = o->send ? ncclSend(o->ptr, o->len, ncclUint8, 1, p->comm, s)
                    : ncclRecv(o->ptr, o->len, ncclUint8, 0, p->comm, s);
        if (r != ncclSuccess && r != ncclInProgress) {
            st = wsync_error(WSYNC_ERR_NCCL, "nccl %s of %zu bytes (tag %llu): %s", o->send ? "send" : "recv",
                             o->len, (unsigned long long)o->tag, ncclGetErrorString(r));
            break;
        }
    }
    r = ncclGroupEnd();
    if (st == WSYNC_OK && r != ncclSuccess && r != ncclInProgress)
        st = wsync_error(WSYNC_ERR_NCCL, "nccl group: %s", ncclGetErrorString(r));
    if (st == WSYNC_OK)
        st = comm_wait(p, p->t->op_timeout_ms, "enqueue");
    if (st == WSYNC_OK && cudaEventRecord(g->done, s) != cudaSuccess)
        st = wsync_error(WSYNC_ERR_CUDA, "cudaEventRecord after a nccl group failed");
    g->issued_ns = wsync_now_ns();
    pthread_mutex_lock(&p->lock);
    return st;
}

static void complete_group(nc_peer_t *p, nc_group_t *g)
{
    int i;
    for (i = 0; i < g->n; i++) {
        nc_op_t *o = g->ops[i];
        wsync_completion_t c = {.kind = o->send ? WSYNC_COMPLETION_SENT : WSYNC_COMPLETION_LANDED,
                                .status = WSYNC_OK,
                                .tag = o->tag,
                                .len = o->len,
                                .peer = o->send ? -1 : p->id};
        wsync_cqueue_push(&p->t->cq, &c);
        free(o);
    }
    g->n = 0;
}

/* The pair's worker: sets up the communicator, then keeps up to
 * NC_INFLIGHT_MAX groups in flight, retiring them in order as their events
 * complete. A communicator error or a group stuck past op_timeout aborts
 * the communicator and fails every op of this pair (and only this pair). */
static void *peer_main(void *arg)
{
    nc_peer_t *p = arg;
    nc_transport_t *t = p->t;
    nc_group_t groups[NC_INFLIGHT_MAX];
    int gh = 0, gn = 0, i;
    cudaStream_t s = NULL;
    wsync_status_t st = WSYNC_OK;
    char why[160];

    memset(groups, 0, sizeof(groups));
    if (cudaSetDevice(t->device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        st = wsync_error(WSYNC_ERR_CUDA, "nccl worker: cannot create a stream on cuda:%d", t->device);
        goto fail;
    }
    for (i = 0; i < NC_INFLIGHT_MAX; i++)
        if (cudaEventCreateWithFlags(&groups[i].done, cudaEventDisableTiming) != cudaSuccess) {
            st = wsync_error(WSYNC_ERR_CUDA, "nccl worker: cannot create events");
            goto fail;
        }
    /* Expects may be queued before their sender connects; a sender that
     * never comes fails them after op_timeout rather than never. */
    pthread_mutex_lock(&p->lock);
    while (!p->have_uid && !p->stop) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 100);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        if (p->head && wsync_now_ns() - p->first_op_ns > (uint64_t)t->op_timeout_ms * 1000000ULL) {
            pthread_mutex_unlock(&p->lock);
            st = wsync_error(WSYNC_ERR_TIMEOUT, "nccl: sender %d never connected within %d ms", p->id,
                             t->op_timeout_ms);
            goto fail;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (p->stop)
        goto out;
    if (p->comm == NULL) {
        st = comm_init(p);
        if (st != WSYNC_OK)
            goto fail;
    }
    pthread_mutex_lock(&p->lock);
    p->ready = 1;
    pthread_cond_broadcast(&p->cond);
    while (!p->stop) {
        if (group_ready(p) && gn < NC_INFLIGHT_MAX) {
            st = issue_group(p, s, &groups[(gh + gn) % NC_INFLIGHT_MAX]);
            gn++;
            if (st != WSYNC_OK) {
                pthread_mutex_unlock(&p->lock);
                goto fail;
            }
            continue;
        }
        if (gn == 0 && p->head) {
            /* A batch the caller never closed must not wait forever. */
            struct timespec ts;
            if (wsync_now_ns() - p->head->queued_ns > (uint64_t)t->op_timeout_ms * 1000000ULL) {
                pthread_mutex_unlock(&p->lock);
                st = wsync_error(WSYNC_ERR_INVALID,
                                 "nccl: %d ops with peer %d queued for %d ms in a batch "
                                 "that never ended (a put_flush/expect_flush is missing)",
                                 p->nqueued, p->id, t->op_timeout_ms);
                goto fail;
            }
            wsync_abstime_after_ms(&ts, 100);
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
            continue;
        }
        if (gn == 0) {
            pthread_cond_wait(&p->cond, &p->lock);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        {
            nc_group_t *g = &groups[gh];
            cudaError_t e = cudaEventQuery(g->done);
            ncclResult_t r = ncclSuccess;
            if (e == cudaSuccess) {
                complete_group(p, g);
                gh = (gh + 1) % NC_INFLIGHT_MAX;
                gn--;
            } else if (e != cudaErrorNotReady) {
                st = wsync_error(WSYNC_ERR_CUDA, "nccl transfer with peer %d: %s", p->id, cudaGetErrorString(e));
            } else if (ncclCommGetAsyncError(p->comm, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
                st = wsync_error(WSYNC_ERR_PEER, "nccl transfer with peer %d failed: %s", p->id,
                                 ncclGetErrorString(r));
            } else if (wsync_now_ns() - g->issued_ns > (uint64_t)t->op_timeout_ms * 1000000ULL) {
                st = wsync_error(WSYNC_ERR_TIMEOUT,
                                 "nccl transfer with peer %d: no completion in %d ms "
                                 "(peer dead or not posting the matching ops)",
                                 p->id, t->op_timeout_ms);
            } else {
                usleep(10);
            }
        }
        if (st != WSYNC_OK)
            goto fail;
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    goto out;

fail:
    snprintf(why, sizeof(why), "%s", wsync_last_error());
    wsync_log(WSYNC_LOG_WARN, "%s", why);
    if (p->comm) {
        ncclCommAbort(p->comm);
        p->comm = NULL;
    }
    pthread_mutex_lock(&p->lock);
    p->dead = 1;
    pthread_cond_broadcast(&p->cond);
    for (i = 0; i < gn; i++) {
        nc_group_t *g = &groups[(gh + i) % NC_INFLIGHT_MAX];
        int k;
        for (k = 0; k < g->n; k++) {
            g->ops[k]->next = NULL;
            fail_ops(p, g->ops[k], why);
        }
        g->n = 0;
    }
    gn = 0;
    fail_ops(p, p->head, why);
    p->head = p->tail = NULL;
    p->nqueued = p->nlast = 0;
    pthread_mutex_unlock(&p->lock);
    if (st == WSYNC_OK)
        st = WSYNC_ERR_PEER;
out:
    /* Ops still in flight at close: give them a short grace so the
     * communicator is not destroyed under running kernels; past it the
     * caller has given up on them (a failed pull closes its transport) and
     * abort stops the kernels. Waiting the full op timeout here made a
     * failed pull's close take a minute. */
    {
        int grace_ms = t->op_timeout_ms < 2000 ? t->op_timeout_ms : 2000;
        uint64_t deadline = wsync_now_ns() + (uint64_t)grace_ms * 1000000ULL;
        for (i = 0; i < gn; i++) {
            cudaEvent_t ev = groups[(gh + i) % NC_INFLIGHT_MAX].done;
            while (cudaEventQuery(ev) == cudaErrorNotReady && wsync_now_ns() < deadline)
                usleep(100);
        }
        if (gn > 0 && wsync_now_ns() >= deadline && p->comm) {
            ncclCommAbort(p->comm);
            p->comm = NULL;
        }
    }
    for (i = 0; i < NC_INFLIGHT_MAX; i++)
        if (groups[i].done)
            cudaEventDestroy(groups[i].done);
    if (s)
        cudaStreamDestroy(s);
    return NULL;
}

static wsync_status_t peer_new(nc_transport_t *t, int id, int sender, nc_peer_t **out)
{
    nc_peer_t *p = calloc(1, sizeof(*p));
    WSYNC_CHECK_ALLOC(p);
    p->super.transport = &t->super;
    p->t = t;
    p->id = id;
    p->sender = sender;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->worker, NULL, peer_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
        return wsync_error(WSYNC_ERR_IO, "nccl: cannot start a worker thread");
    }
    p->worker_started = 1;
    *out = p;
    return WSYNC_OK;
}

static void peer_free(nc_peer_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (p->worker_started)
        pthread_join(p->worker, NULL);
    /* Abort, not finalize + destroy: the worker has let every op finish
     * (or given up on it), and finalize/destroy synchronise with the other
     * rank of the pair, which may be gone or still using its side (a
     * trainer keeps serving after one engine closes): that waited forever. */
    if (p->comm)
        ncclCommAbort(p->comm);
    fail_ops(p, p->head, "transport closed");
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}

static wsync_status_t peer_enqueue(nc_peer_t *p, int send, void *ptr, size_t len, uint64_t tag)
{
    nc_op_t *o;
    if (p->dead)
        return wsync_error(WSYNC_ERR_PEER, "nccl: the pair with peer %d has failed; reconnect", p->id);
    o = calloc(1, sizeof(*o));
    WSYNC_CHECK_ALLOC(o);
    *o = (nc_op_t){.send = send, .ptr = ptr, .len = len, .tag = tag, .queued_ns = wsync_now_ns()};
    pthread_mutex_lock(&p->lock);
    if (p->first_op_ns == 0)
        p->first_op_ns = wsync_now_ns();
    if (p->tail)
        p->tail->next = o;
    else
        p->head = o;
    p->tail = o;
    p->nqueued++;
    if (p->nqueued >= group_max)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return WSYNC_OK;
}

/* The batch ends with the last queued op. Nothing queued: the batch ended
 * on a full group, already issued. */
static void peer_flush(nc_peer_t *p)
{
    pthread_mutex_lock(&p->lock);
    if (p->tail && !p->tail->last) {
        p->tail->last = 1;
        p->nlast++;
    }
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* Receiver: the pair with sender `id`, created on first use (an expect may
 * come before the sender connects). */
static wsync_status_t peer_for(nc_transport_t *t, int id, nc_peer_t **out)
{
    wsync_status_t st = WSYNC_OK;
    int i;
    pthread_mutex_lock(&t->lock);
    for (i = 0; i < t->npeers; i++)
        if (t->peers[i]->id == id && !t->peers[i]->dead) {
            *out = t->peers[i];
            goto out;
        }
    if (t->npeers == NC_MAX_PEERS) {
        st = wsync_error(WSYNC_ERR_INVALID, "nccl: more than %d senders", NC_MAX_PEERS);
        goto out;
    }
    st = peer_new(t, id, 0, out);
    if (st == WSYNC_OK)
        t->peers[t->npeers++] = *out;
out:
    pthread_mutex_unlock(&t->lock);
    return st;
}

/* Receiver's handshake: hello in (the data-plane handshake's payload: with
 * a token, proven), unique id out (its reply, proven back); the pair's
 * worker inits. */
static void handshake(nc_transport_t *t, int fd)
{
    unsigned char *payload = NULL;
    size_t len = 0;
    char peer[96];
    nc_hello_t h;
    ncclUniqueId uid;
    nc_peer_t *p;
    wsync_hs_t hs;
    wsync_peer_name(fd, peer, sizeof(peer));
    if (wsync_hs_serve(&hs, fd, &t->auth, WSYNC_HS_NCCL, peer, sizeof(h), t->timeout_ms, &payload, &len) !=
        WSYNC_OK) {
        wsync_log(WSYNC_LOG_WARN, "nccl: %s", wsync_last_error());
        return;
    }
    if (len == sizeof(h))
        memcpy(&h, payload, sizeof(h));
    free(payload);
    if (len != sizeof(h) || h.magic != NC_MAGIC) {
        wsync_hs_refuse(&hs, WSYNC_ERR_FORMAT, "not an nccl hello");
        wsync_log(WSYNC_LOG_WARN, "nccl: dropped a connection from %s that is not a wsync sender", peer);
        return;
    }
    if (ncclGetUniqueId(&uid) != ncclSuccess) {
        wsync_hs_refuse(&hs, WSYNC_ERR_NCCL, "the receiver's ncclGetUniqueId failed");
        wsync_cqueue_push_error(&t->cq, ~0ULL, h.sender_id, WSYNC_ERR_NCCL, "nccl: ncclGetUniqueId failed");
        return;
    }
    if (peer_for(t, h.sender_id, &p) != WSYNC_OK) {
        wsync_hs_refuse(&hs, WSYNC_ERR_INVALID, wsync_last_error());
        wsync_cqueue_push_error(&t->cq, ~0ULL, h.sender_id, WSYNC_ERR_INVALID, "%s", wsync_last_error());
        return;
    }
    if (wsync_hs_accept(&hs, &uid, sizeof(uid)) != WSYNC_OK)
        return;
    pthread_mutex_lock(&p->lock);
    p->uid = uid;
    p->have_uid = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void *acceptor_main(void *arg)
{
    nc_transport_t *t = arg;
    while (!t->stop) {
        struct pollfd pfd = {.fd = t->listen_fd, .events = POLLIN};
        int fd;
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        handshake(t, fd);
        close(fd);
    }
    return NULL;
}

static wsync_status_t nc_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    nc_transport_t *t;
    if (!nc_can_use(cfg))
        return WSYNC_ERR_UNSUPPORTED;
    group_max = (int)wsync_setting_int(WSYNC_SET_NCCL_GROUP); /* 1..NC_GROUP_MAX */
    t = calloc(1, sizeof(*t));
    WSYNC_CHECK_ALLOC(t);
    t->super.ops = &wsync_transport_nccl;
    t->device = cfg->device;
    t->timeout_ms = wsync_connect_timeout_ms(cfg->timeout_ms);
    /* A 64 MiB group takes well under a millisecond; a minute without any
     * completion means the peer is gone. */
    t->op_timeout_ms = (int)wsync_setting_int(WSYNC_SET_NCCL_OP_TIMEOUT_MS);
    snprintf(t->bind_host, sizeof(t->bind_host), "%s", cfg->bind_host ? cfg->bind_host : "");
    if (cfg->auth)
        t->auth = *cfg->auth;
    t->listen_fd = -1;
    wsync_cqueue_init(&t->cq);
    pthread_mutex_init(&t->lock, NULL);
    *out = &t->super;
    return WSYNC_OK;
}

static wsync_status_t nc_reg(wsync_transport_t *tt, void *ptr, size_t len, wsync_mem_kind_t kind,
                             wsync_region_t **out, wsync_blob_t *key)
{
    wsync_region_t *r;
    uint64_t k[2] = {NC_MAGIC, len};
    if (kind != WSYNC_MEM_CUDA)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl: needs GPU memory, got host memory "
                                                  "(use --device cuda:N or the tcp transport)");
    r = calloc(1, sizeof(*r));
    WSYNC_CHECK_ALLOC(r);
    *r = (wsync_region_t){.transport = tt, .ptr = ptr, .len = len, .kind = kind};
    /* Two-sided: the receiver's expect() says where bytes land, so the key
     * only lets the sender check bounds. */
    memcpy(key->data, k, sizeof(k));
    key->len = sizeof(k);
    *out = r;
    return WSYNC_OK;
}

static void nc_dereg(wsync_region_t *r)
{
    free(r);
}

static wsync_status_t nc_listen(wsync_transport_t *tt, wsync_blob_t *addr)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    int port = 0;
    if (t->listen_fd < 0) {
        WSYNC_CHECK(wsync_tcp_listen(t->bind_host, 0, &t->listen_fd, &port));
        if (pthread_create(&t->acceptor, NULL, acceptor_main, t) != 0) {
            close(t->listen_fd);
            t->listen_fd = -1;
            return wsync_error(WSYNC_ERR_IO, "nccl: cannot start the handshake thread");
        }
        t->acceptor_started = 1;
        wsync_listen_hostport(t->listen_fd, t->bind_host, t->listen_addr, sizeof(t->listen_addr));
    }
    memset(addr->data, 0, sizeof(addr->data));
    snprintf((char *)addr->data, sizeof(addr->data), "nccl:%s", t->listen_addr);
    addr->len = (uint32_t)strlen((char *)addr->data) + 1;
    return WSYNC_OK;
}

static wsync_status_t nc_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    nc_hello_t h = {.magic = NC_MAGIC, .sender_id = self_id};
    char hostport[WSYNC_BLOB_MAX];
    nc_peer_t *p = NULL;
    size_t uid_len = 0;
    wsync_status_t st;
    int fd = -1;
    if (addr->len < 6 || addr->len > WSYNC_BLOB_MAX || memcmp(addr->data, "nccl:", 5) != 0 ||
        memchr(addr->data, '\0', addr->len) == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "nccl: the receiver's address is not an nccl address");
    snprintf(hostport, sizeof(hostport), "%s", (const char *)addr->data + 5);
    WSYNC_CHECK(wsync_tcp_connect(hostport, t->timeout_ms, &fd));
    WSYNC_CHECK_GOTO(peer_new(t, self_id, 1, &p), st, err_close);
    WSYNC_CHECK_GOTO(wsync_hs_connect(fd, &t->auth, WSYNC_HS_NCCL, hostport, &h, sizeof(h), t->timeout_ms, &p->uid,
                                      sizeof(p->uid), &uid_len),
                     st, err_peer);
    if (uid_len != sizeof(p->uid)) {
        st = wsync_error(WSYNC_ERR_FORMAT, "nccl: the receiver answered with %zu bytes, not a unique id", uid_len);
        goto err_peer;
    }
    close(fd);
    fd = -1;
    pthread_mutex_lock(&p->lock);
    p->have_uid = 1;
    pthread_cond_broadcast(&p->cond);
    while (!p->ready && !p->dead)
        pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    if (p->dead) {
        st = wsync_error(WSYNC_ERR_PEER, "nccl: cannot set up the pair with the receiver at %s", hostport);
        goto err_peer;
    }
    *out = &p->super;
    return WSYNC_OK;

err_peer:
    peer_free(p);
err_close:
    if (fd >= 0)
        close(fd);
    return wsync_error(st, "nccl connect to %s: %s", hostport, wsync_last_error());
}

static wsync_status_t nc_expect(wsync_transport_t *tt, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                uint64_t tag)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    nc_peer_t *p;
    if (off > dst->len || len > dst->len - off)
        return wsync_error(WSYNC_ERR_INVALID, "nccl expect: [%zu, +%zu) outside the %zu-byte region", off, len,
                           dst->len);
    WSYNC_CHECK(peer_for(t, src_id, &p));
    return peer_enqueue(p, 0, (char *)dst->ptr + off, len, tag);
}

static wsync_status_t nc_put(wsync_conn_t *c, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                             size_t dst_off, size_t len, uint64_t tag)
{
    nc_peer_t *p = container_of(c, nc_peer_t, super);
    uint64_t k[2];
    if (src_off > src->len || len > src->len - src_off)
        return wsync_error(WSYNC_ERR_INVALID, "nccl put: [%zu, +%zu) outside the %zu-byte source", src_off, len,
                           src->len);
    if (dst_key->len == sizeof(k)) {
        memcpy(k, dst_key->data, sizeof(k));
        if (k[0] == NC_MAGIC && (dst_off > k[1] || len > k[1] - dst_off))
            return wsync_error(WSYNC_ERR_INVALID, "nccl put: [%zu, +%zu) outside the receiver's %llu-byte region",
                               dst_off, len, (unsigned long long)k[1]);
    }
    return peer_enqueue(p, 1, (char *)src->ptr + src_off, len, tag);
}

static wsync_status_t nc_poll(wsync_transport_t *tt, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    *n = wsync_cqueue_pop(&t->cq, out, max, timeout_ms);
    return WSYNC_OK;
}

static void nc_disconnect(wsync_conn_t *c)
{
    if (c)
        peer_free(container_of(c, nc_peer_t, super));
}

static void nc_close(wsync_transport_t *tt)
{
    nc_transport_t *t;
    int i;
    if (tt == NULL)
        return;
    t = container_of(tt, nc_transport_t, super);
    t->stop = 1;
    if (t->acceptor_started)
        pthread_join(t->acceptor, NULL);
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    for (i = 0; i < t->npeers; i++)
        peer_free(t->peers[i]);
    wsync_cqueue_destroy(&t->cq);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void nc_put_flush(wsync_conn_t *c)
{
    peer_flush(container_of(c, nc_peer_t, super));
}

static void nc_expect_flush(wsync_transport_t *tt, int src_id)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    nc_peer_t *p;
    if (peer_for(t, src_id, &p) == WSYNC_OK)
        peer_flush(p);
}

#else /* no NCCL */

static wsync_status_t no_nccl(void)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl: wsync was not built with CUDA and NCCL "
                                              "(rebuild with CUDA=1 NCCL=1 where /usr/local/cuda has nccl.h)");
}
static int nc_can_use(const wsync_transport_config_t *cfg)
{
    no_nccl();
    return 0;
}
static wsync_status_t nc_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    return no_nccl();
}
static wsync_status_t nc_reg(wsync_transport_t *t, void *p, size_t l, wsync_mem_kind_t k, wsync_region_t **o,
                             wsync_blob_t *key)
{
    return no_nccl();
}
static void nc_dereg(wsync_region_t *r) {}
static wsync_status_t nc_listen(wsync_transport_t *t, wsync_blob_t *a)
{
    return no_nccl();
}
static wsync_status_t nc_connect(wsync_transport_t *t, const wsync_blob_t *a, int id, wsync_conn_t **o)
{
    return no_nccl();
}
static wsync_status_t nc_expect(wsync_transport_t *t, int s, wsync_region_t *d, size_t o, size_t l, uint64_t tag)
{
    return no_nccl();
}
static wsync_status_t nc_put(wsync_conn_t *c, wsync_region_t *s, size_t so, const wsync_blob_t *k, size_t d,
                             size_t l, uint64_t tag)
{
    return no_nccl();
}
static wsync_status_t nc_poll(wsync_transport_t *t, wsync_completion_t *o, int m, int *n, int to)
{
    *n = 0;
    return no_nccl();
}
static void nc_disconnect(wsync_conn_t *c) {}
static void nc_close(wsync_transport_t *t) {}
static void nc_put_flush(wsync_conn_t *c) {}
static void nc_expect_flush(wsync_transport_t *t, int src_id) {}
#endif

/* One table for both builds: without the library every op says why. */
const wsync_transport_ops_t wsync_transport_nccl = {
    .name = "nccl",
    .can_use = nc_can_use,
    .open = nc_open,
    .reg = nc_reg,
    .dereg = nc_dereg,
    .listen = nc_listen,
    .connect = nc_connect,
    .expect = nc_expect,
    .put = nc_put,
    .put_flush = nc_put_flush,
    .expect_flush = nc_expect_flush,
    .poll = nc_poll,
    .disconnect = nc_disconnect,
    .close = nc_close,
};
