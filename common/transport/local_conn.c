/* local_conn.c: the local transport's connections: the receiver's abstract
 * Unix socket, its accept thread and one reader per sender turning notices
 * into completions (and answering its asks for a region's redirect); the sender's connect (handshake, stream, sum ring,
 * progress thread) and disconnect. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/net/fdpass.h"
#include "common/net/handshake.h"
#include "common/transport/local_internal.h"
#include "common/base/util.h"

#if WSYNC_HAVE_CUDA
/* Receiver: notices of one sender become completions. */
static void *reader_main(void *arg)
{
    lo_reader_t *rd = arg;
    lo_transport_t *t = rd->t;
    lo_notice_t n;
    for (;;) {
        wsync_completion_t c = {.kind = WSYNC_COMPLETION_LANDED, .status = WSYNC_OK, .peer = rd->peer};
        int fd = -1;
        if (wsync_fd_recv(rd->fd, &n, sizeof(n), &fd) != WSYNC_OK) {
            if (fd >= 0)
                close(fd);
            /* A sender that disconnects is done; a sender that dies mid-put
             * also fails its request, which names it. */
            break;
        }
        if (fd >= 0)
            close(fd);
        if (n.status == LO_ASK_SPANS) { /* local_redirect.c */
            if (lo_spans_answer(t, rd->fd, n.tag) != WSYNC_OK)
                break;
            continue;
        }
        c.tag = n.tag;
        c.len = n.len;
        c.has_sum = n.has_sum != 0;
        c.sum = n.sum;
        if (n.status != WSYNC_OK) {
            n.message[sizeof(n.message) - 1] = '\0';
            wsync_cqueue_push_error(&t->cq, n.tag, rd->peer, (wsync_status_t)n.status,
                                    "local put from sender %d failed: %s", rd->peer, n.message);
            continue;
        }
        wsync_cqueue_push(&t->cq, &c);
    }
    return NULL;
}

static void *accept_main(void *arg)
{
    lo_transport_t *t = arg;
    while (!__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd = {.fd = t->lfd, .events = POLLIN};
        unsigned char *payload = NULL;
        size_t len = 0;
        lo_hello_t h;
        lo_reader_t *rd;
        wsync_hs_t hs;
        int fd;
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (wsync_hs_serve(&hs, fd, &t->auth, WSYNC_HS_LOCAL, "a local process", sizeof(h), t->timeout_ms,
                           &payload, &len) != WSYNC_OK) {
            wsync_log(WSYNC_LOG_WARN, "local: %s", wsync_last_error());
            close(fd);
            continue;
        }
        if (len == sizeof(h))
            memcpy(&h, payload, sizeof(h));
        free(payload);
        if (len != sizeof(h) || h.magic != LO_MAGIC || h.nonce != t->nonce) {
            wsync_hs_refuse(&hs, WSYNC_ERR_PEER, "not a sender of this receiver (stale address?)");
            close(fd); /* not a sender of ours (stale address, scan) */
            continue;
        }
        if (wsync_hs_accept(&hs, NULL, 0) != WSYNC_OK) {
            close(fd);
            continue;
        }
        rd = calloc(1, sizeof(*rd));
        if (rd == NULL) {
            close(fd);
            continue;
        }
        rd->t = t;
        rd->fd = fd;
        rd->peer = h.id;
        if (pthread_create(&rd->th, NULL, reader_main, rd) != 0) {
            wsync_cqueue_push_error(&t->cq, ~0ULL, h.id, WSYNC_ERR_IO,
                                    "local: cannot start the reader of sender %d", h.id);
            close(fd);
            free(rd);
            continue;
        }
        pthread_mutex_lock(&t->lock);
        rd->next = t->readers;
        t->readers = rd;
        pthread_mutex_unlock(&t->lock);
    }
    return NULL;
}

wsync_status_t lo_listen(wsync_transport_t *tr, wsync_blob_t *addr)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_addr_t a;
    if (t->lfd < 0) {
        t->nonce = wsync_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)t;
        snprintf(t->name, sizeof(t->name), "wsync-local/%d/%016llx", (int)getpid(), (unsigned long long)t->nonce);
        WSYNC_CHECK(wsync_unix_listen(t->name, &t->lfd));
        if (pthread_create(&t->acceptor, NULL, accept_main, t) != 0) {
            close(t->lfd);
            t->lfd = -1;
            return wsync_error(WSYNC_ERR_IO, "transport local: cannot start the accept thread");
        }
        t->accepting = 1;
    }
    memset(&a, 0, sizeof(a));
    a.magic = LO_MAGIC;
    a.pid = (uint64_t)getpid();
    a.nonce = t->nonce;
    snprintf(a.name, sizeof(a.name), "%s", t->name);
    memcpy(addr->data, &a, sizeof(a));
    addr->len = sizeof(a);
    return WSYNC_OK;
}

/* The connection's device words and mapped sum ring, zeroed (once: the
 * kernels leave the accumulator and counter at 0). Called on its device. */
static wsync_status_t conn_sums_alloc(lo_conn_t *c)
{
    void *dev = NULL;
    CUDA_CHECK(cudaMalloc(&dev, 2 * LO_BATCH * sizeof(uint64_t)));
    c->dacc = dev;
    c->dcount = (unsigned int *)((uint64_t *)dev + LO_BATCH);
    CUDA_CHECK(cudaMemset(dev, 0, 2 * LO_BATCH * sizeof(uint64_t)));
    CUDA_CHECK(cudaHostAlloc((void **)&c->hsums, LO_SUMS * sizeof(uint64_t), cudaHostAllocMapped));
    memset(c->hsums, 0, LO_SUMS * sizeof(uint64_t));
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&c->hsums_dev, c->hsums, 0));
    return WSYNC_OK;
}

void lo_conn_sums_free(lo_conn_t *c)
{
    lo_op_t *op;
    cudaFree(c->dacc);
    cudaFreeHost(c->hsums);
    c->dacc = NULL;
    c->hsums = NULL;
    while ((op = c->free_ops) != NULL) {
        c->free_ops = op->next;
        cudaEventDestroy(op->ev);
        if (op->ev0)
            cudaEventDestroy(op->ev0);
        free(op);
    }
}

wsync_status_t lo_connect(wsync_transport_t *tr, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_addr_t a;
    lo_hello_t h = {.magic = LO_MAGIC, .id = self_id};
    lo_conn_t *c;
    wsync_status_t st = WSYNC_OK;
    int prev = 0;
    if (addr->len != sizeof(a))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "transport local: address of %u bytes, expected %zu (is the "
                           "receiver using another transport?)",
                           addr->len, sizeof(a));
    memcpy(&a, addr->data, sizeof(a));
    a.name[LO_NAME - 1] = '\0';
    if (a.magic != LO_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "transport local: not a local transport address");
    c = calloc(1, sizeof(*c));
    WSYNC_CHECK_ALLOC(c);
    c->base.transport = tr;
    c->id = self_id;
    c->fd = -1;
    snprintf(c->peer_name, sizeof(c->peer_name), "%s", a.name);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->span_lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    WSYNC_CHECK_GOTO(wsync_unix_connect(a.name, t->timeout_ms, &c->fd), st, fail);
    h.nonce = a.nonce;
    WSYNC_CHECK_GOTO(wsync_hs_connect(c->fd, &t->auth, WSYNC_HS_LOCAL, a.name, &h, sizeof(h), t->timeout_ms, NULL,
                                      0, NULL),
                     st, fail);
    WSYNC_CHECK_GOTO(enter_device(t->device, &prev), st, fail);
    st = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) == cudaSuccess
             ? WSYNC_OK
             : wsync_error(WSYNC_ERR_CUDA, "transport local: cannot create a stream on cuda:%d", t->device);
    if (st == WSYNC_OK && conn_sums_alloc(c) != WSYNC_OK) {
        lo_conn_sums_free(c);
        cudaStreamDestroy(c->stream);
        st = wsync_error(WSYNC_ERR_CUDA, "transport local: cannot allocate put sums on cuda:%d: %s", t->device,
                         wsync_last_error());
    }
    leave_device(t->device, prev);
    if (st != WSYNC_OK)
        goto fail;
    if (pthread_create(&c->progress, NULL, lo_progress_main, c) != 0) {
        lo_conn_sums_free(c);
        cudaStreamDestroy(c->stream);
        st = wsync_error(WSYNC_ERR_IO, "transport local: cannot start the progress thread");
        goto fail;
    }
    c->peer_pid = a.pid;
    pthread_mutex_lock(&t->lock);
    c->next_conn = t->conns;
    t->conns = c;
    pthread_mutex_unlock(&t->lock);
    *out = &c->base;
    return WSYNC_OK;
fail:
    if (c->fd >= 0)
        close(c->fd);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->span_lock);
    pthread_cond_destroy(&c->cond);
    free(c);
    return wsync_error(st, "cannot connect to local receiver '%s' (pid %llu) as sender %d: %s", a.name,
                       (unsigned long long)a.pid, self_id, wsync_last_error());
}

/* The connection leaves its transport's list; the maps of a receiver it
 * was the last connection to close (every copy of it has drained). */
static void conn_unlist(lo_conn_t *c)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_conn_t **at;
    int prev = 0;
    pthread_mutex_lock(&t->lock);
    for (at = &t->conns; *at != NULL && *at != c; at = &(*at)->next_conn)
        ;
    if (*at == c)
        *at = c->next_conn;
    pthread_mutex_unlock(&t->lock);
    if (enter_device(t->device, &prev) != WSYNC_OK)
        return; /* the maps stay until the transport closes */
    lo_unmap_unused(t);
    leave_device(t->device, prev);
}

void lo_disconnect(wsync_conn_t *cn)
{
    lo_conn_t *c = (lo_conn_t *)cn;
    if (c == NULL)
        return;
    /* Drain: every queued copy finishes before the mapping can go. */
    lo_put_flush(cn);
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->progress, NULL);
    cudaStreamDestroy(c->stream);
    lo_conn_sums_free(c);
    lo_conn_tables_free(c);
    conn_unlist(c);
    close(c->fd);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->span_lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

#endif
