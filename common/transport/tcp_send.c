/* tcp_send.c: the sending side of the tcp transport: several connections
 * per receiver, each with a queue and a thread that writes header + payload,
 * so many puts are in flight and none blocks the caller. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/transport/tcp_internal.h"

/* A receiver that stops reading (stopped, hung, or hostile) must not hold a
 * trainer's puts, and the publish slot they read, until the pull request's
 * own timeout: a send that makes no progress for this long breaks the link,
 * so the request fails naming the receiver and the slot is free again. A
 * live receiver drains its socket continuously; 10 s without a byte is not
 * slowness. Setting tcp_stall_ms (WSYNC_TCP_STALL_MS; 0: no limit). */

static int stall_ms(void)
{
    return (int)wsync_setting_int(WSYNC_SET_TCP_STALL_MS);
}

static void set_stall_timeout(int fd)
{
    int ms = stall_ms();
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (ms > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Header then payload of one put; 0 or -1 when the connection broke. */
static int send_job(tcp_link_t *l, const tcp_job_t *j, char **bounce)
{
    unsigned char hb[TCP_HDR_LEN];
    const char *src = (const char *)j->src->super.ptr + j->src_off;
    uint64_t done = 0;
    tcp_hdr_encode(&j->hdr, hb);
    if (wsync_send_all(l->fd, hb, TCP_HDR_LEN) != 0)
        return -1;
    if (j->src->super.kind == WSYNC_MEM_HOST)
        return wsync_send_all(l->fd, src, j->hdr.len);
    /* GPU source: stage through a host buffer. */
    if (*bounce == NULL && (*bounce = malloc(TCP_BOUNCE)) == NULL)
        return -1;
    while (done < j->hdr.len) {
        size_t n = j->hdr.len - done < TCP_BOUNCE ? (size_t)(j->hdr.len - done) : TCP_BOUNCE;
        if (wsync_mem_cuda.copy(*bounce, src + done, n) != WSYNC_OK || wsync_send_all(l->fd, *bounce, n) != 0)
            return -1;
        done += n;
    }
    return 0;
}

/* One connection's sender thread: drains its queue in order. Once the
 * connection breaks, every put still queued on it fails with an ERROR. */
static void *link_main(void *arg)
{
    tcp_link_t *l = arg;
    tcp_conn_t *c = l->c;
    tcp_transport_t *t = container_of(c->super.transport, tcp_transport_t, super);
    char *bounce = NULL;
    for (;;) {
        tcp_job_t *j;
        int rc = -1, err = 0;
        pthread_mutex_lock(&l->lock);
        while (l->head == NULL && !c->stopping)
            pthread_cond_wait(&l->cond, &l->lock);
        if (c->stopping) {
            pthread_mutex_unlock(&l->lock);
            break;
        }
        j = l->head;
        l->head = j->next;
        if (l->head == NULL)
            l->tail = NULL;
        pthread_mutex_unlock(&l->lock);
        if (!__atomic_load_n(&l->broken, __ATOMIC_ACQUIRE))
            rc = send_job(l, j, &bounce);
        err = rc != 0 ? errno : 0;
        if (rc == 0) {
            wsync_completion_t done = {.kind = WSYNC_COMPLETION_SENT,
                                       .tag = j->hdr.tag,
                                       .len = j->hdr.len,
                                       .peer = -1};
            wsync_cqueue_push(&t->cq, &done);
        } else {
            int was = __atomic_exchange_n(&l->broken, 1, __ATOMIC_ACQ_REL);
            if (!was)
                LOG_DEBUG("tcp: connection to %s broke: %s", c->peer, strerror(errno));
            if (!c->stopping && (err == EAGAIN || err == EWOULDBLOCK))
                wsync_cqueue_push_error(&t->cq, j->hdr.tag, -1, WSYNC_ERR_TIMEOUT,
                                        "tcp: put of %llu bytes to receiver %s failed: it read nothing for %d ms "
                                        "(stopped or stalled receiver; WSYNC_TCP_STALL_MS)",
                                        (unsigned long long)j->hdr.len, c->peer, stall_ms());
            else
                wsync_cqueue_push_error(&t->cq, j->hdr.tag, -1, c->stopping ? WSYNC_ERR_CANCELLED : WSYNC_ERR_PEER,
                                        "tcp: put of %llu bytes to receiver %s failed: %s",
                                        (unsigned long long)j->hdr.len, c->peer,
                                        c->stopping ? "disconnected while sending" : "the connection broke");
        }
        pthread_mutex_lock(&l->lock);
        l->queued -= j->hdr.len;
        pthread_mutex_unlock(&l->lock);
        free(j);
    }
    free(bounce);
    return NULL;
}

void tcp_disconnect(wsync_conn_t *cc)
{
    tcp_transport_t *t;
    tcp_conn_t *c, **pp;
    int i;
    if (cc == NULL)
        return;
    c = container_of(cc, tcp_conn_t, super);
    t = container_of(cc->transport, tcp_transport_t, super);
    pthread_mutex_lock(&t->lock);
    for (pp = &t->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    for (i = 0; i < c->nlinks; i++) {
        pthread_mutex_lock(&c->links[i].lock);
        c->stopping = 1;
        pthread_cond_broadcast(&c->links[i].cond);
        pthread_mutex_unlock(&c->links[i].lock);
        /* Wakes a sender thread blocked in send() on a stalled peer. */
        shutdown(c->links[i].fd, SHUT_RDWR);
    }
    for (i = 0; i < c->nlinks; i++) {
        tcp_job_t *j, *n;
        pthread_join(c->links[i].th, NULL);
        close(c->links[i].fd);
        /* Puts never started still owe the caller a completion. */
        for (j = c->links[i].head; j; j = n) {
            n = j->next;
            wsync_cqueue_push_error(&t->cq, j->hdr.tag, -1, WSYNC_ERR_CANCELLED,
                                    "tcp: put of %llu bytes to receiver %s cancelled by disconnect",
                                    (unsigned long long)j->hdr.len, c->peer);
            free(j);
        }
        pthread_mutex_destroy(&c->links[i].lock);
        pthread_cond_destroy(&c->links[i].cond);
    }
    free(c);
}

static int conns_wanted(const tcp_transport_t *t)
{
    /* The setting, when given, wins over the caller's count (as the
     * variable always did): it is how a deployment tunes it. */
    int n = t->cfg.conns_per_peer > 0 && wsync_setting_source(WSYNC_SET_TCP_CONNS) == WSYNC_SRC_DEFAULT
                ? t->cfg.conns_per_peer
                : (int)wsync_setting_int(WSYNC_SET_TCP_CONNS);
    return n > TCP_MAX_CONNS ? TCP_MAX_CONNS : n;
}

wsync_status_t tcp_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
{
    tcp_transport_t *t = container_of(tt, tcp_transport_t, super);
    unsigned char hb[TCP_HELLO_LEN];
    tcp_addr_t a;
    tcp_hello_t h;
    tcp_conn_t *c;
    int n = conns_wanted(t), i;
    wsync_status_t st = WSYNC_OK;

    if (addr->len != TCP_ADDR_LEN)
        return wsync_error(WSYNC_ERR_FORMAT, "tcp: receiver address is %u bytes, expected %d: not a tcp address",
                           addr->len, TCP_ADDR_LEN);
    tcp_addr_decode(addr->data, &a);
    if (a.magic != TCP_MAGIC || a.version != TCP_VERSION)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "tcp: receiver address has magic %08x version %u, expected %08x version %d "
                           "(another transport, or another wsync version)",
                           a.magic, a.version, TCP_MAGIC, TCP_VERSION);
    h = (tcp_hello_t){.magic = TCP_MAGIC, .version = TCP_VERSION, .sender = self_id, .nonce = a.nonce};
    tcp_hello_encode(&h, hb);
    c = calloc(1, sizeof(*c));
    WSYNC_CHECK_ALLOC(c);
    c->super.transport = tt;
    c->nonce = a.nonce;
    c->self_id = self_id;
    snprintf(c->peer, sizeof(c->peer), "%s", a.hostport);
    for (i = 0; i < n; i++) {
        tcp_link_t *l = &c->links[i];
        l->c = c;
        l->fd = -1;
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->cond, NULL);
        st = wsync_tcp_connect(a.hostport, wsync_connect_timeout_ms(t->cfg.timeout_ms), &l->fd);
        if (st == WSYNC_OK) {
            /* Nagle stays on: puts are large writes, headers ride with them. */
            int off = 0;
            setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &off, sizeof(off));
            tcp_tune(l->fd);
            /* The hello rides in the handshake, proven with the token. */
            st = wsync_hs_connect(l->fd, &t->auth, WSYNC_HS_TCP, a.hostport, hb, TCP_HELLO_LEN,
                                  wsync_connect_timeout_ms(t->cfg.timeout_ms), NULL, 0, NULL);
            if (st != WSYNC_OK)
                st = wsync_error(st, "tcp: cannot connect to receiver %s: %s", a.hostport, wsync_last_error());
            if (st == WSYNC_OK)
                set_stall_timeout(l->fd);
        }
        if (st == WSYNC_OK && pthread_create(&l->th, NULL, link_main, l) != 0)
            st = wsync_error(WSYNC_ERR_IO, "tcp: cannot start a sender thread for receiver %s", a.hostport);
        if (st != WSYNC_OK) {
            if (l->fd >= 0)
                close(l->fd);
            pthread_mutex_destroy(&l->lock);
            pthread_cond_destroy(&l->cond);
            break;
        }
        c->nlinks++;
    }
    pthread_mutex_lock(&t->lock);
    c->next = t->conns;
    t->conns = c;
    pthread_mutex_unlock(&t->lock);
    if (st != WSYNC_OK) {
        tcp_disconnect(&c->super);
        return st;
    }
    *out = &c->super;
    return WSYNC_OK;
}

wsync_status_t tcp_put(wsync_conn_t *cc, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                       size_t dst_off, size_t len, uint64_t tag)
{
    tcp_conn_t *c = container_of(cc, tcp_conn_t, super);
    tcp_key_t k;
    tcp_job_t *j;
    tcp_link_t *l = NULL;
    uint64_t lq = 0;
    int i;

    if (dst_key->len != TCP_KEY_LEN)
        return wsync_error(WSYNC_ERR_FORMAT, "tcp: region key for receiver %s is %u bytes, expected %d", c->peer,
                           dst_key->len, TCP_KEY_LEN);
    tcp_key_decode(dst_key->data, &k);
    if (k.magic != TCP_MAGIC || k.version != TCP_VERSION)
        return wsync_error(WSYNC_ERR_FORMAT, "tcp: region key for receiver %s is not a tcp key of this version",
                           c->peer);
    if (k.nonce != c->nonce)
        return wsync_error(WSYNC_ERR_INVALID,
                           "tcp: region key belongs to another receiver than %s (stale key after a restart?)",
                           c->peer);
    if (len > k.len || dst_off > k.len - len)
        return wsync_error(WSYNC_ERR_INVALID, "tcp: put of %zu bytes at %zu outside the %llu-byte region of %s",
                           len, dst_off, (unsigned long long)k.len, c->peer);
    if (src_off > src->len || len > src->len - src_off)
        return wsync_error(WSYNC_ERR_INVALID, "tcp: put source [%zu, +%zu) outside its %zu-byte region", src_off,
                           len, src->len);
    /* The link with the fewest bytes queued: keeps every connection busy. */
    for (i = 0; i < c->nlinks; i++) {
        tcp_link_t *x = &c->links[i];
        uint64_t q = __atomic_load_n(&x->queued, __ATOMIC_RELAXED);
        if (!__atomic_load_n(&x->broken, __ATOMIC_ACQUIRE) && (l == NULL || q < lq)) {
            l = x;
            lq = q;
        }
    }
    if (l == NULL)
        return wsync_error(WSYNC_ERR_PEER, "tcp: every connection to receiver %s is broken; reconnect", c->peer);
    j = calloc(1, sizeof(*j));
    WSYNC_CHECK_ALLOC(j);
    j->src = container_of(src, tcp_region_t, super);
    j->src_off = src_off;
    j->hdr = (tcp_hdr_t){.magic = TCP_MAGIC,
                         .version = TCP_VERSION,
                         .sender = c->self_id,
                         .region = k.region,
                         .dst_off = dst_off,
                         .len = len,
                         .tag = tag};
    pthread_mutex_lock(&l->lock);
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    __atomic_add_fetch(&l->queued, len, __ATOMIC_RELAXED);
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    return WSYNC_OK;
}
