/* nccl_conn.c: the nccl transport's connections: the receiver's handshake
 * socket and accept thread handing each sender the pair's ncclUniqueId, the
 * receiver's pair per sender id, and the sender's connect. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "common/base/log.h"
#include "common/transport/nccl_internal.h"

#if WSYNC_HAVE_NCCL && WSYNC_HAVE_CUDA
/* Receiver: the pair with sender `id`, created on first use (an expect may
 * come before the sender connects). */
wsync_status_t nc_peer_for(nc_transport_t *t, int id, nc_peer_t **out)
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
    st = nc_peer_new(t, id, 0, out);
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
    if (nc_peer_for(t, h.sender_id, &p) != WSYNC_OK) {
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

wsync_status_t nc_listen(wsync_transport_t *tt, wsync_blob_t *addr)
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

wsync_status_t nc_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
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
    WSYNC_CHECK_GOTO(nc_peer_new(t, self_id, 1, &p), st, err_close);
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
    nc_peer_free(p);
err_close:
    if (fd >= 0)
        close(fd);
    return wsync_error(st, "nccl connect to %s: %s", hostport, wsync_last_error());
}

#endif
