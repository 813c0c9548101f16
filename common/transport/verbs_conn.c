/* verbs_conn.c: reliable-connected queue pairs and how two sides connect
 * them. The receiver's listen() opens a TCP handshake socket; a sender dials
 * it and both exchange one hello (sender id, receiver nonce, and per queue
 * pair: GID, QPN, PSN, LID, MTU, port) inside the data-plane handshake
 * (common/net/handshake.h: with a token both prove it), then move their
 * queue pairs INIT -> RTR -> RTS. The socket stays open: its close tells the receiver
 * that sender is gone. */
#if WSYNC_HAVE_VERBS
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/transport/verbs_internal.h"
#include "common/base/verbs_select.h"
#include "common/base/util.h"

#define MAX_PEERS 256

wsync_status_t verbs_qp_create(verbs_dev_t *d, int recv_depth, struct ibv_qp **out)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = d->cq,
        .recv_cq = d->cq,
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
        .cap = {.max_send_wr = (uint32_t)d->send_depth,
                .max_recv_wr = (uint32_t)(recv_depth > 0 ? recv_depth : 1),
                .max_send_sge = 1,
                .max_recv_sge = 1},
    };
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .pkey_index = 0,
                            .port_num = d->port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
    struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
    if (qp == NULL)
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot create a queue pair on %s: %s", d->name, strerror(errno));
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        ibv_destroy_qp(qp);
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot move a queue pair of %s to INIT: %s", d->name,
                           strerror(errno));
    }
    *out = qp;
    return WSYNC_OK;
}

void verbs_qp_attr_local(verbs_dev_t *d, struct ibv_qp *qp, uint32_t psn, verbs_qp_attr_t *out)
{
    memcpy(out->gid, d->gid.raw, 16);
    out->qpn = qp->qp_num;
    out->psn = psn & 0xffffff;
    out->lid = d->lid;
    out->mtu = (uint8_t)d->mtu;
    out->port = d->port;
}

wsync_status_t verbs_qp_connect(verbs_dev_t *d, struct ibv_qp *qp, uint32_t my_psn, const verbs_qp_attr_t *r)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(r->mtu < (uint8_t)d->mtu ? r->mtu : (uint8_t)d->mtu);
    a.dest_qp_num = r->qpn;
    a.rq_psn = r->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12; /* 0.64 ms: receives are reposted right away */
    a.ah_attr.port_num = d->port;
    a.ah_attr.dlid = r->lid;
    if (d->is_roce) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot move queue pair %u of %s to RTR (remote qpn %u): %s",
                           qp->qp_num, d->name, r->qpn, strerror(errno));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    /* Ack timeout 4.096 us * 2^timeout, 7 retries: with the default 14 a
     * dead receiver is declared after about half a second. */
    a.timeout = (uint8_t)wsync_setting_int(WSYNC_SET_IB_TIMEOUT);
    a.retry_cnt = (uint8_t)wsync_setting_int(WSYNC_SET_IB_RETRY_CNT);
    a.rnr_retry = 7;
    a.sq_psn = my_psn & 0xffffff;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return wsync_error(WSYNC_ERR_VERBS, "verbs: cannot move queue pair %u of %s to RTS: %s", qp->qp_num,
                           d->name, strerror(errno));
    return WSYNC_OK;
}

static void qp_to_error(struct ibv_qp *qp)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int verbs_post_recv(verbs_peer_t *p, int i)
{
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)(uintptr_t)p | VERBS_WR_RECV, .sg_list = NULL, .num_sge = 0}, *bad;
    return ibv_post_recv(p->qp[i], &wr, &bad);
}

static uint32_t random_psn(void)
{
    return (uint32_t)(wsync_now_ns() * 2654435761u ^ (uint64_t)getpid()) & 0xffffff;
}

/* A hello that arrived as a handshake payload: header, then as many queue
 * pairs as it announces, exactly. */
static wsync_status_t parse_hello(const unsigned char *buf, size_t len, const char *who, verbs_hello_t *h)
{
    if (len < VERBS_HELLO_HDR || verbs_hello_peek_len(buf) != len)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: %s sent something that is not a verbs handshake", who);
    return verbs_hello_decode(buf, len, h);
}

static int timeout_ms(const verbs_transport_t *t)
{
    return wsync_connect_timeout_ms(t->cfg.timeout_ms);
}

/* Receiver: destroy one sender's queue pairs (after the pollers stopped, or
 * once they are in the error state and flushed). */
static void peer_free(verbs_peer_t *p)
{
    int i;
    for (i = p->nqp - 1; i >= 0; i--)
        if (p->qp[i])
            ibv_destroy_qp(p->qp[i]);
    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

/* Receiver: one sender's handshake. Queue pair i of the sender talks to one
 * of ours on device i mod ndev; receives are posted before RTR so the first
 * write finds one. */
static void accept_peer(verbs_transport_t *t, int fd, const char *from)
{
    unsigned char buf[VERBS_HELLO_MAX], *payload = NULL;
    verbs_hello_t in, reply = {.sender = -1};
    verbs_peer_t *p;
    uint32_t psn = random_psn(), i;
    size_t plen = 0;
    wsync_hs_t hs;
    int k;
    wsync_status_t st;

    /* With a token, nothing is created for a peer that did not prove it. */
    st = wsync_hs_serve(&hs, fd, &t->auth, WSYNC_HS_VERBS, from, VERBS_HELLO_MAX, timeout_ms(t), &payload, &plen);
    if (st == WSYNC_ERR_AUTH)
        LOG_WARN("verbs: %s", wsync_last_error());
    if (st == WSYNC_OK) {
        st = parse_hello(payload, plen, from, &in);
        if (st == WSYNC_OK && in.nonce != t->nonce)
            st = wsync_error(WSYNC_ERR_PEER, "verbs: %s dialled an address of another receiver instance", from);
        if (st != WSYNC_OK)
            wsync_hs_refuse(&hs, st, wsync_last_error());
    }
    free(payload);
    if (st != WSYNC_OK) {
        wsync_cqueue_push_error(&t->cq, ~0ULL, -1, st, "%s; connection closed", wsync_last_error());
        close(fd);
        return;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        wsync_hs_refuse(&hs, WSYNC_ERR_NOMEM, "the receiver is out of memory");
        close(fd);
        return;
    }
    p->t = t;
    p->fd = fd;
    p->sender = in.sender;
    snprintf(p->addr, sizeof(p->addr), "%s", from);
    reply.nonce = t->nonce;
    reply.nqp = in.nqp;
    for (i = 0; i < in.nqp && st == WSYNC_OK; i++) {
        verbs_dev_t *d = &t->devs[i % (uint32_t)t->ndev];
        p->dev[i] = d;
        st = verbs_qp_create(d, VERBS_RECV_DEPTH, &p->qp[i]);
        if (st != WSYNC_OK)
            break;
        p->nqp++;
        for (k = 0; k < VERBS_RECV_DEPTH && st == WSYNC_OK; k++)
            if (verbs_post_recv(p, (int)i) != 0)
                st = wsync_error(WSYNC_ERR_VERBS, "verbs: cannot post receives for sender %d on %s", p->sender,
                                 d->name);
        if (st == WSYNC_OK)
            st = verbs_qp_connect(d, p->qp[i], psn, &in.qp[i]);
        verbs_qp_attr_local(d, p->qp[i], psn, &reply.qp[i]);
    }
    if (st == WSYNC_OK && wsync_hs_accept(&hs, buf, verbs_hello_encode(&reply, buf)) != WSYNC_OK)
        st = wsync_error(WSYNC_ERR_PEER, "verbs: sender %d at %s left during the handshake", p->sender, from);
    if (st != WSYNC_OK) {
        wsync_hs_refuse(&hs, st, wsync_last_error());
        wsync_cqueue_push_error(&t->cq, ~0ULL, p->sender, st, "%s", wsync_last_error());
        peer_free(p);
        return;
    }
    pthread_mutex_lock(&t->lock);
    p->next = t->peers;
    t->peers = p;
    pthread_mutex_unlock(&t->lock);
    LOG_DEBUG("verbs: sender %d at %s connected with %u queue pairs", p->sender, from, in.nqp);
}

/* Accepts senders and watches their handshake sockets: a closed one means
 * that sender left, so its queue pairs go to the error state (their posted
 * receives flush) and are destroyed at close. */
static void *acceptor_main(void *arg)
{
    verbs_transport_t *t = arg;
    while (!__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd[MAX_PEERS + 1];
        verbs_peer_t *who[MAX_PEERS + 1], *p;
        int n = 1, i;
        pfd[0] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
        pthread_mutex_lock(&t->lock);
        for (p = t->peers; p && n <= MAX_PEERS; p = p->next)
            if (!p->dead) {
                who[n] = p;
                pfd[n++] = (struct pollfd){.fd = p->fd, .events = POLLIN};
            }
        pthread_mutex_unlock(&t->lock);
        if (poll(pfd, (nfds_t)n, 100) <= 0)
            continue;
        for (i = 1; i < n; i++)
            if (pfd[i].revents) {
                char b;
                if (recv(pfd[i].fd, &b, 1, MSG_DONTWAIT) == 1)
                    continue;
                LOG_DEBUG("verbs: sender %d at %s disconnected", who[i]->sender, who[i]->addr);
                pthread_mutex_lock(&t->lock);
                who[i]->dead = 1;
                for (int q = 0; q < who[i]->nqp; q++)
                    qp_to_error(who[i]->qp[q]);
                pthread_mutex_unlock(&t->lock);
            }
        if (pfd[0].revents & POLLIN) {
            struct sockaddr_in sa;
            socklen_t slen = sizeof(sa);
            char from[64];
            int fd = accept4(t->listen_fd, (struct sockaddr *)&sa, &slen, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            snprintf(from, sizeof(from), "%s:%d", inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
            accept_peer(t, fd, from);
        }
    }
    return NULL;
}

wsync_status_t verbs_listen_start(verbs_transport_t *t, int *port)
{
    WSYNC_CHECK(wsync_tcp_listen(t->bind_host, (int)wsync_setting_int(WSYNC_SET_VERBS_PORT), &t->listen_fd, port));
    if (pthread_create(&t->acceptor, NULL, acceptor_main, t) != 0) {
        close(t->listen_fd);
        t->listen_fd = -1;
        return wsync_error(WSYNC_ERR_IO, "verbs: cannot start the handshake thread");
    }
    t->acceptor_started = 1;
    return WSYNC_OK;
}

void verbs_acceptor_stop(verbs_transport_t *t)
{
    __atomic_store_n(&t->stopping, 1, __ATOMIC_RELEASE);
    if (t->acceptor_started) {
        pthread_join(t->acceptor, NULL);
        t->acceptor_started = 0;
    }
    if (t->listen_fd >= 0) {
        close(t->listen_fd);
        t->listen_fd = -1;
    }
}

void verbs_peers_free(verbs_transport_t *t)
{
    while (t->peers) {
        verbs_peer_t *p = t->peers;
        t->peers = p->next;
        peer_free(p);
    }
}

/* Sender: dial, create one queue pair per local device, exchange hellos,
 * connect. Unwinds in reverse on any failure. */
wsync_status_t verbs_conn_open(verbs_transport_t *t, const verbs_addr_t *a, int self_id, verbs_conn_t **out)
{
    unsigned char buf[VERBS_HELLO_MAX], rbuf[VERBS_HELLO_MAX];
    verbs_hello_t h = {.sender = self_id, .nonce = a->nonce, .nqp = (uint32_t)t->ndev}, r;
    uint32_t psn = random_psn();
    size_t rlen = 0;
    verbs_conn_t *c;
    wsync_status_t st;
    int i;

    c = calloc(1, sizeof(*c));
    WSYNC_CHECK_ALLOC(c);
    c->super.transport = &t->super;
    c->nonce = a->nonce;
    c->self_id = self_id;
    c->fd = -1;
    snprintf(c->peer, sizeof(c->peer), "%s", a->hostport);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    WSYNC_CHECK_GOTO(wsync_tcp_connect(a->hostport, timeout_ms(t), &c->fd), st, err_free);
    for (i = 0; i < t->ndev; i++) {
        verbs_link_t *l = &c->links[i];
        l->c = c;
        l->dev = &t->devs[i];
        WSYNC_CHECK_GOTO(verbs_qp_create(l->dev, 0, &l->qp), st, err_destroy_qps);
        c->nlinks++;
        verbs_qp_attr_local(l->dev, l->qp, psn, &h.qp[i]);
    }
    st = wsync_hs_connect(c->fd, &t->auth, WSYNC_HS_VERBS, a->hostport, buf, verbs_hello_encode(&h, buf),
                          timeout_ms(t), rbuf, sizeof(rbuf), &rlen);
    if (st != WSYNC_OK) {
        st = wsync_error(st, "verbs: handshake with receiver %s: %s", a->hostport, wsync_last_error());
        goto err_destroy_qps;
    }
    WSYNC_CHECK_GOTO(parse_hello(rbuf, rlen, a->hostport, &r), st, err_destroy_qps);
    if (r.nonce != a->nonce || r.nqp != h.nqp) {
        st = wsync_error(WSYNC_ERR_PEER,
                         "verbs: receiver %s answered for another instance or with %u queue pairs "
                         "instead of %u",
                         a->hostport, r.nqp, h.nqp);
        goto err_destroy_qps;
    }
    for (i = 0; i < c->nlinks; i++) {
        c->links[i].remote_dev = i;
        WSYNC_CHECK_GOTO(verbs_qp_connect(c->links[i].dev, c->links[i].qp, psn, &r.qp[i]), st, err_destroy_qps);
    }
    *out = c;
    return WSYNC_OK;
err_destroy_qps:
    for (i = c->nlinks - 1; i >= 0; i--)
        ibv_destroy_qp(c->links[i].qp);
    close(c->fd);
err_free:
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
    return st;
}

/* Sender: stop a connection. Its queue pairs go to the error state so every
 * posted write completes (flushed) through the poller, which reports each
 * unfinished put; then the queue pairs, socket and memory go, in reverse. */
void verbs_conn_close(verbs_conn_t *c)
{
    verbs_transport_t *t = container_of(c->super.transport, verbs_transport_t, super);
    uint64_t deadline = wsync_now_ns() + 5000000000ULL;
    int i, busy;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    for (i = 0; i < c->nlinks; i++)
        qp_to_error(c->links[i].qp);
    do {
        struct timespec ts;
        busy = 0;
        for (i = 0; i < c->nlinks; i++)
            busy += c->links[i].inflight_wr;
        if (busy == 0 || wsync_now_ns() > deadline)
            break;
        wsync_abstime_after_ms(&ts, 10);
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    } while (1);
    for (i = 0; i < c->nlinks; i++) {
        verbs_job_t *j;
        while ((j = c->links[i].head) != NULL) {
            c->links[i].head = j->next;
            wsync_cqueue_push_error(&t->cq, j->tag, -1, WSYNC_ERR_CANCELLED,
                                    "verbs: put of piece %u (%llu bytes) to receiver %s cancelled by disconnect",
                                    (uint32_t)j->tag, (unsigned long long)j->len, c->peer);
            free(j);
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (busy) {
        /* The poller may still see them: keep the memory they point to. */
        LOG_WARN("verbs: %d work requests to %s never completed after disconnect; leaking the connection", busy,
                 c->peer);
        return;
    }
    for (i = c->nlinks - 1; i >= 0; i--)
        ibv_destroy_qp(c->links[i].qp);
    close(c->fd);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}
#endif
