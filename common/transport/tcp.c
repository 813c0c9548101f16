/* tcp.c: one-sided puts over TCP. A sender writes a small header (region,
 * offset, length, tag) then the payload; the receiver's reader thread checks
 * the header against its registered regions and reads the payload straight
 * into place (host memory) or through a bounce buffer (GPU memory), then
 * queues a LANDED completion. Several connections per peer pair, each with a
 * sender thread and a queue, so many puts are in flight. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/msg.h"
#include "common/transport/cqueue.h"
#include "common/transport/tcp_bounce.h"
#include "common/transport/tcp_wire.h"
#include "common/util.h"

#define TCP_BOUNCE (4u << 20)
#define TCP_SOCKBUF (8 << 20)
#define TCP_MAX_CONNS 16

typedef struct tcp_region {
    wsync_region_t super;
    uint32_t id;
    int dead;
    int inflight;                       /* readers writing into it now */
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
    uint64_t queued;                    /* bytes */
    int broken;
} tcp_link_t;

typedef struct tcp_conn {
    wsync_conn_t super;
    struct tcp_conn *next;              /* in the transport's list, so close can stop it */
    uint64_t nonce;                     /* the receiver instance its keys must name */
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

static void push_error(tcp_transport_t *t, uint64_t tag, int peer, wsync_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void push_error(tcp_transport_t *t, uint64_t tag, int peer, wsync_status_t st, const char *fmt, ...)
{
    wsync_completion_t c = {.kind = WSYNC_COMPLETION_ERROR, .status = st, .tag = tag, .peer = peer};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c.message, sizeof(c.message), fmt, ap);
    va_end(ap);
    wsync_cqueue_push(&t->cq, &c);
}

static int tcp_can_use(const wsync_transport_config_t *cfg)
{
    return 1;
}

static void tune(int fd)
{
    int sz = TCP_SOCKBUF;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

/* 0: all `len` bytes read; 1: the peer closed before sending any of them;
 * -1: error, or closed part way (a short read). */
static int recv_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t want = len;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_WAITALL);
        if (n == 0)
            return len == want ? 1 : -1;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static wsync_status_t tcp_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    tcp_transport_t *t = calloc(1, sizeof(*t));
    WSYNC_CHECK_ALLOC(t);
    t->super.ops = &wsync_transport_tcp;
    t->cfg = *cfg;
    snprintf(t->bind_host, sizeof(t->bind_host), "%s", cfg->bind_host ? cfg->bind_host : "");
    t->cfg.bind_host = NULL;
    t->nonce = wsync_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)t;
    t->listen_fd = -1;
    t->next_region = 1;
    wsync_cqueue_init(&t->cq);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    *out = &t->super;
    return WSYNC_OK;
}

static wsync_status_t tcp_reg(wsync_transport_t *tt, void *ptr, size_t len, wsync_mem_kind_t kind,
                              wsync_region_t **out, wsync_blob_t *key)
{
    tcp_transport_t *t = container_of(tt, tcp_transport_t, super);
    tcp_region_t *r;
    tcp_key_t k;
    if (ptr == NULL && len > 0)
        return wsync_error(WSYNC_ERR_INVALID, "tcp: cannot register a NULL region of %zu bytes", len);
    r = calloc(1, sizeof(*r));
    WSYNC_CHECK_ALLOC(r);
    r->super = (wsync_region_t){.transport = tt, .ptr = ptr, .len = len, .kind = kind};
    pthread_mutex_lock(&t->lock);
    r->id = t->next_region++;
    r->next = t->regions;
    t->regions = r;
    pthread_mutex_unlock(&t->lock);
    k = (tcp_key_t){.magic = TCP_MAGIC, .version = TCP_VERSION, .region = r->id, .nonce = t->nonce, .len = len};
    tcp_key_encode(&k, key->data);
    key->len = TCP_KEY_LEN;
    *out = &r->super;
    return WSYNC_OK;
}

static void tcp_dereg(wsync_region_t *rr)
{
    tcp_transport_t *t = container_of(rr->transport, tcp_transport_t, super);
    tcp_region_t *r = container_of(rr, tcp_region_t, super), **pp;
    pthread_mutex_lock(&t->lock);
    r->dead = 1;
    while (r->inflight > 0)
        pthread_cond_wait(&t->cond, &t->lock);
    for (pp = &t->regions; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    free(r);
}

static int stopping(tcp_transport_t *t)
{
    return __atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE);
}

/* Checks a put header against the registered regions; on success the region
 * is pinned (inflight) so dereg waits for the payload. Returns NULL and fills
 * `why` when the header must not be trusted. */
static tcp_region_t *admit(tcp_transport_t *t, const tcp_hdr_t *h, int sender, char *why, size_t whylen)
{
    tcp_region_t *r;
    if (h->magic != TCP_MAGIC || h->version != TCP_VERSION) {
        snprintf(why, whylen, "not a wsync put header (magic %08x, version %u)", h->magic, h->version);
        return NULL;
    }
    if (h->sender != sender) {
        snprintf(why, whylen, "header names sender %d on a connection of sender %d", h->sender, sender);
        return NULL;
    }
    pthread_mutex_lock(&t->lock);
    for (r = t->regions; r; r = r->next)
        if (r->id == h->region && !r->dead)
            break;
    if (r == NULL) {
        pthread_mutex_unlock(&t->lock);
        snprintf(why, whylen, "unknown region %u", h->region);
        return NULL;
    }
    /* Written so that no sum can overflow: off + len <= region length. */
    if (h->len > r->super.len || h->dst_off > r->super.len - h->len) {
        pthread_mutex_unlock(&t->lock);
        snprintf(why, whylen, "%llu bytes at offset %llu fall outside region %u of %zu bytes",
                 (unsigned long long)h->len, (unsigned long long)h->dst_off, h->region, r->super.len);
        return NULL;
    }
    r->inflight++;
    pthread_mutex_unlock(&t->lock);
    return r;
}

static void release(tcp_transport_t *t, tcp_region_t *r)
{
    pthread_mutex_lock(&t->lock);
    r->inflight--;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

/* One accepted connection: a hello, then header+payload until the sender
 * closes. Anything malformed ends this connection only, with an ERROR that
 * names the peer; bytes are only ever written inside a checked region. */
static void *reader_main(void *arg)
{
    tcp_reader_t *rd = arg;
    tcp_transport_t *t = rd->t;
    unsigned char buf[TCP_HDR_LEN];
    tcp_hello_t hello;
    tcp_bounce_t *bounce = NULL;
    char why[128];
    int sender, rc;

    rc = recv_all(rd->fd, buf, TCP_HELLO_LEN);
    if (rc != 0) {
        if (!stopping(t))
            push_error(t, ~0ULL, -1, WSYNC_ERR_PEER,
                       "tcp: connection from %s closed before its hello: not a wsync sender", rd->peer);
        goto out;
    }
    tcp_hello_decode(buf, &hello);
    if (hello.magic != TCP_MAGIC || hello.version != TCP_VERSION || hello.nonce != t->nonce) {
        push_error(t, ~0ULL, -1, WSYNC_ERR_PEER,
                   "tcp: connection from %s is not a sender of this receiver (%s): closed", rd->peer,
                   hello.magic != TCP_MAGIC         ? "garbage"
                   : hello.version != TCP_VERSION ? "other protocol version"
                                                   : "address of another receiver instance");
        goto out;
    }
    sender = hello.sender;
    for (;;) {
        tcp_hdr_t h;
        tcp_region_t *r;
        rc = recv_all(rd->fd, buf, TCP_HDR_LEN);
        if (rc != 0) {
            /* Between puts, a close is the sender's disconnect; inside a
             * header it is a broken stream. */
            if (rc < 0 && !stopping(t))
                push_error(t, ~0ULL, sender, WSYNC_ERR_PEER,
                           "tcp: sender %d at %s sent a truncated put header: connection closed", sender, rd->peer);
            break;
        }
        tcp_hdr_decode(buf, &h);
        r = admit(t, &h, sender, why, sizeof(why));
        if (r == NULL) {
            push_error(t, h.magic == TCP_MAGIC ? h.tag : ~0ULL, sender, WSYNC_ERR_PEER,
                       "tcp: bad put from sender %d at %s: %s; connection closed", sender, rd->peer, why);
            break;
        }
        if (r->super.kind == WSYNC_MEM_HOST)
            rc = recv_all(rd->fd, (char *)r->super.ptr + h.dst_off, h.len);
        else
            rc = tcp_bounce_recv(&bounce, TCP_BOUNCE, rd->fd, &wsync_mem_cuda, (char *)r->super.ptr + h.dst_off,
                                 h.len);
        release(t, r);
        if (rc != 0) {
            if (!stopping(t))
                push_error(t, h.tag, sender, WSYNC_ERR_PEER, "tcp: sender %d at %s went away in the middle of a %llu-byte put%s",
                           sender, rd->peer, (unsigned long long)h.len,
                           r->super.kind == WSYNC_MEM_HOST ? "" : " (or the copy into GPU memory failed: see the log)");
            break;
        }
        {
            wsync_completion_t c = {.kind = WSYNC_COMPLETION_LANDED, .tag = h.tag, .len = h.len, .peer = sender};
            wsync_cqueue_push(&t->cq, &c);
        }
    }
out:
    /* Close the connection now so the peer sees it; the descriptor itself is
     * closed when the thread is reaped, so its number cannot be reused under us. */
    shutdown(rd->fd, SHUT_RDWR);
    tcp_bounce_free(bounce);
    __atomic_store_n(&rd->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Join readers that ended. Called with t->lock held. */
static void reap_readers(tcp_transport_t *t, int all)
{
    tcp_reader_t **pp = &t->readers;
    while (*pp) {
        tcp_reader_t *rd = *pp;
        if (all || __atomic_load_n(&rd->done, __ATOMIC_ACQUIRE)) {
            if (all)
                shutdown(rd->fd, SHUT_RDWR);
            pthread_mutex_unlock(&t->lock);
            pthread_join(rd->th, NULL);
            pthread_mutex_lock(&t->lock);
            close(rd->fd);
            *pp = rd->next;
            free(rd);
        } else {
            pp = &rd->next;
        }
    }
}

static void *acceptor_main(void *arg)
{
    tcp_transport_t *t = arg;
    while (!__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd = {.fd = t->listen_fd, .events = POLLIN};
        struct sockaddr_in sa;
        socklen_t slen = sizeof(sa);
        tcp_reader_t *rd;
        int fd;
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        fd = accept4(t->listen_fd, (struct sockaddr *)&sa, &slen, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        tune(fd);
        rd = calloc(1, sizeof(*rd));
        if (rd == NULL) {
            close(fd);
            continue;
        }
        rd->t = t;
        rd->fd = fd;
        snprintf(rd->peer, sizeof(rd->peer), "%s:%d", inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
        pthread_mutex_lock(&t->lock);
        reap_readers(t, 0);
        if (pthread_create(&rd->th, NULL, reader_main, rd) != 0) {
            pthread_mutex_unlock(&t->lock);
            close(fd);
            free(rd);
            continue;
        }
        rd->next = t->readers;
        t->readers = rd;
        pthread_mutex_unlock(&t->lock);
    }
    return NULL;
}

static wsync_status_t tcp_listen(wsync_transport_t *tt, wsync_blob_t *addr)
{
    tcp_transport_t *t = container_of(tt, tcp_transport_t, super);
    const char *env = getenv("WSYNC_TCP_PORT");
    tcp_addr_t a = {.magic = TCP_MAGIC, .version = TCP_VERSION, .nonce = t->nonce};
    char adv[64], *end = NULL;
    long want = 0;
    int port = 0;

    if (env && *env) {
        want = strtol(env, &end, 10);
        if (*end != '\0' || want < 0 || want > 65535)
            return wsync_error(WSYNC_ERR_INVALID, "WSYNC_TCP_PORT='%s' is not a port number (0-65535)", env);
    }
    if (t->listen_fd < 0) {
        WSYNC_CHECK(wsync_tcp_listen(t->bind_host, (int)want, &t->listen_fd, &port));
        if (pthread_create(&t->acceptor, NULL, acceptor_main, t) != 0) {
            close(t->listen_fd);
            t->listen_fd = -1;
            return wsync_error(WSYNC_ERR_IO, "tcp: cannot start the accept thread");
        }
    } else {
        struct sockaddr_in sa;
        socklen_t slen = sizeof(sa);
        getsockname(t->listen_fd, (struct sockaddr *)&sa, &slen);
        port = ntohs(sa.sin_port);
    }
    if (t->bind_host[0] && strcmp(t->bind_host, "0.0.0.0") != 0)
        snprintf(adv, sizeof(adv), "%s", t->bind_host);
    else
        wsync_primary_ipv4(adv, sizeof(adv));
    memset(a.hostport, 0, sizeof(a.hostport));
    snprintf(a.hostport, sizeof(a.hostport), "%s:%d", adv, port);
    tcp_addr_encode(&a, addr->data);
    addr->len = TCP_ADDR_LEN;
    return WSYNC_OK;
}

/* Header then payload of one put; 0 or -1 when the connection broke. */
static int send_job(tcp_link_t *l, const tcp_job_t *j, char **bounce)
{
    unsigned char hb[TCP_HDR_LEN];
    const char *src = (const char *)j->src->super.ptr + j->src_off;
    uint64_t done = 0;
    tcp_hdr_encode(&j->hdr, hb);
    if (send_all(l->fd, hb, TCP_HDR_LEN) != 0)
        return -1;
    if (j->src->super.kind == WSYNC_MEM_HOST)
        return send_all(l->fd, src, j->hdr.len);
    /* GPU source: stage through a host buffer. */
    if (*bounce == NULL && (*bounce = malloc(TCP_BOUNCE)) == NULL)
        return -1;
    while (done < j->hdr.len) {
        size_t n = j->hdr.len - done < TCP_BOUNCE ? (size_t)(j->hdr.len - done) : TCP_BOUNCE;
        if (wsync_mem_cuda.copy(*bounce, src + done, n) != WSYNC_OK || send_all(l->fd, *bounce, n) != 0)
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
        int rc = -1;
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
        if (rc == 0) {
            wsync_completion_t done = {.kind = WSYNC_COMPLETION_SENT, .tag = j->hdr.tag, .len = j->hdr.len, .peer = -1};
            wsync_cqueue_push(&t->cq, &done);
        } else {
            int was = __atomic_exchange_n(&l->broken, 1, __ATOMIC_ACQ_REL);
            if (!was)
                LOG_DEBUG("tcp: connection to %s broke: %s", c->peer, strerror(errno));
            push_error(t, j->hdr.tag, -1, c->stopping ? WSYNC_ERR_CANCELLED : WSYNC_ERR_PEER,
                       "tcp: put of %llu bytes to receiver %s failed: %s", (unsigned long long)j->hdr.len, c->peer,
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

static void tcp_disconnect(wsync_conn_t *cc)
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
            push_error(t, j->hdr.tag, -1, WSYNC_ERR_CANCELLED,
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
    const char *env = getenv("WSYNC_TCP_CONNS");
    int n = t->cfg.conns_per_peer > 0 ? t->cfg.conns_per_peer : 4;
    if (env && atoi(env) > 0)
        n = atoi(env);
    return n > TCP_MAX_CONNS ? TCP_MAX_CONNS : n;
}

static wsync_status_t tcp_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
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
        st = wsync_tcp_connect(a.hostport, t->cfg.timeout_ms > 0 ? t->cfg.timeout_ms : 10000, &l->fd);
        if (st == WSYNC_OK) {
            /* Nagle stays on: puts are large writes, headers ride with them. */
            int off = 0;
            setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &off, sizeof(off));
            tune(l->fd);
            if (send_all(l->fd, hb, TCP_HELLO_LEN) != 0)
                st = wsync_error(WSYNC_ERR_PEER, "tcp: receiver %s closed the connection during the hello: %s",
                                 a.hostport, strerror(errno));
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

static wsync_status_t tcp_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                 uint64_t tag)
{
    return WSYNC_OK; /* one-sided: the header says where the bytes go */
}

static wsync_status_t tcp_put(wsync_conn_t *cc, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
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
        return wsync_error(WSYNC_ERR_INVALID, "tcp: put of %zu bytes at %zu outside the %llu-byte region of %s", len,
                           dst_off, (unsigned long long)k.len, c->peer);
    if (src_off > src->len || len > src->len - src_off)
        return wsync_error(WSYNC_ERR_INVALID, "tcp: put source [%zu, +%zu) outside its %zu-byte region", src_off, len,
                           src->len);
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
    j->hdr = (tcp_hdr_t){.magic = TCP_MAGIC, .version = TCP_VERSION, .sender = c->self_id, .region = k.region,
                         .dst_off = dst_off, .len = len, .tag = tag};
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

static wsync_status_t tcp_poll(wsync_transport_t *tt, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    tcp_transport_t *t = container_of(tt, tcp_transport_t, super);
    *n = wsync_cqueue_pop(&t->cq, out, max, timeout_ms);
    return WSYNC_OK;
}

static void tcp_close(wsync_transport_t *tt)
{
    tcp_transport_t *t;
    tcp_region_t *r, *n;
    if (tt == NULL)
        return;
    t = container_of(tt, tcp_transport_t, super);
    __atomic_store_n(&t->stopping, 1, __ATOMIC_RELEASE);
    /* Sender side first: its threads push into the queue freed below. */
    while (t->conns)
        tcp_disconnect(&t->conns->super);
    if (t->listen_fd >= 0) {
        pthread_join(t->acceptor, NULL);
        close(t->listen_fd);
    }
    pthread_mutex_lock(&t->lock);
    reap_readers(t, 1);
    pthread_mutex_unlock(&t->lock);
    for (r = t->regions; r; r = n) {
        n = r->next;
        free(r);
    }
    wsync_cqueue_destroy(&t->cq);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t);
}

const wsync_transport_ops_t wsync_transport_tcp = {
    .name = "tcp",
    .can_use = tcp_can_use,
    .open = tcp_open,
    .reg = tcp_reg,
    .dereg = tcp_dereg,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .expect = tcp_expect,
    .put = tcp_put,
    .poll = tcp_poll,
    .disconnect = tcp_disconnect,
    .close = tcp_close,
};
