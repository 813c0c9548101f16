/* tcp_recv.c: the receiving side of the tcp transport: the listening
 * socket and its accept thread, and one reader thread per connection that
 * validates every header before a byte of payload is written. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/transport/tcp_bounce.h"
#include "common/transport/tcp_internal.h"
#include "common/base/util.h"

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

/* Test hook WSYNC_TEST_RECV_STALL_MS=N: after the first put this process
 * receives, every connection stops reading for N ms (once), as a receiver
 * that stops reading its sockets would; the senders must not be held up for
 * their other receivers. */
static void test_recv_stall(void)
{
    static uint64_t until; /* 0: not armed yet; set once */
    long long ms = wsync_fault(WSYNC_FAULT_RECV_STALL_MS);
    uint64_t u, now;
    if (ms <= 0)
        return;
    now = wsync_now_ns();
    u = 0;
    if (__atomic_compare_exchange_n(&until, &u, now + (uint64_t)ms * 1000000ULL, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        u = now + (uint64_t)ms * 1000000ULL;
    if (now < u)
        usleep((useconds_t)((u - now) / 1000));
}

/* The handshake of an accepted connection (its payload: the tcp hello); the
 * sender id, or -1 when it failed (reported as an ERROR naming the peer).
 * With a token, a peer that did not prove it never gets past here. */
static int handshake(tcp_reader_t *rd)
{
    tcp_transport_t *t = rd->t;
    int timeout = wsync_connect_timeout_ms(t->cfg.timeout_ms);
    unsigned char *payload = NULL;
    size_t len = 0;
    tcp_hello_t hello = {0};
    const char *why = NULL;
    wsync_hs_t hs;
    wsync_status_t st;

    st = wsync_hs_serve(&hs, rd->fd, &t->auth, WSYNC_HS_TCP, rd->peer, TCP_HELLO_LEN, timeout, &payload, &len);
    if (st != WSYNC_OK) {
        if (stopping(t))
            return -1;
        if (st == WSYNC_ERR_AUTH)
            LOG_WARN("tcp: %s", wsync_last_error());
        if (st == WSYNC_ERR_PEER || st == WSYNC_ERR_TIMEOUT)
            wsync_cqueue_push_error(&t->cq, ~0ULL, -1, WSYNC_ERR_PEER,
                                    "tcp: connection from %s closed before its hello: not a wsync sender", rd->peer);
        else
            wsync_cqueue_push_error(&t->cq, ~0ULL, -1, st,
                                    "tcp: connection from %s is not a sender of this "
                                    "receiver (%s: %s): closed",
                                    rd->peer, st == WSYNC_ERR_AUTH ? "refused" : "garbage", wsync_last_error());
        return -1;
    }
    if (len == TCP_HELLO_LEN)
        tcp_hello_decode(payload, &hello);
    free(payload);
    if (len != TCP_HELLO_LEN || hello.magic != TCP_MAGIC)
        why = "garbage";
    else if (hello.version != TCP_VERSION)
        why = "other protocol version";
    else if (hello.nonce != t->nonce)
        why = "address of another receiver instance";
    if (why) {
        wsync_hs_refuse(&hs, WSYNC_ERR_PEER, why);
        wsync_cqueue_push_error(&t->cq, ~0ULL, -1, WSYNC_ERR_PEER,
                                "tcp: connection from %s is not a sender of this receiver (%s): closed", rd->peer,
                                why);
        return -1;
    }
    if (wsync_hs_accept(&hs, NULL, 0) != WSYNC_OK)
        return -1;
    return hello.sender;
}

/* The put's bytes [off, off+len) of region r read off the socket where
 * they land: the region's memory, or a redirect span's (tcp_redirect);
 * GPU memory through the bounce buffer. 0, or -1 when the stream broke. */
static int recv_put(tcp_reader_t *rd, tcp_bounce_t **bounce, const tcp_region_t *r, uint64_t off, uint64_t len)
{
    size_t i = 0, hi = r->nspans;
    while (i < hi) { /* the first span ending after off (spans are sorted and disjoint) */
        size_t mid = i + (hi - i) / 2;
        if (r->spans[mid].off + r->spans[mid].len <= off)
            i = mid + 1;
        else
            hi = mid;
    }
    while (len > 0) {
        const wsync_redirect_t *sp;
        char *dst = (char *)r->super.ptr + off;
        uint64_t n = len;
        int rc;
        while (i < r->nspans && r->spans[i].off + r->spans[i].len <= off)
            i++;
        sp = i < r->nspans ? &r->spans[i] : NULL;
        if (sp && sp->off <= off) {
            dst = (char *)sp->ptr + (off - sp->off);
            n = sp->off + sp->len - off < len ? sp->off + sp->len - off : len;
        } else if (sp && sp->off < off + len) {
            n = sp->off - off;
        }
        if (r->super.kind == WSYNC_MEM_HOST)
            rc = wsync_recv_all(rd->fd, dst, n, 0);
        else
            rc = tcp_bounce_recv(bounce, TCP_BOUNCE, rd->fd, &wsync_mem_cuda, dst, n);
        if (rc != 0)
            return -1;
        off += n;
        len -= n;
    }
    return 0;
}

/* One accepted connection: the handshake, then header+payload until the
 * sender closes. Anything malformed ends this connection only, with an ERROR
 * that names the peer; bytes are only ever written inside a checked region. */
static void *reader_main(void *arg)
{
    tcp_reader_t *rd = arg;
    tcp_transport_t *t = rd->t;
    unsigned char buf[TCP_HDR_LEN];
    tcp_bounce_t *bounce = NULL;
    char why[128];
    int sender, rc;

    if ((sender = handshake(rd)) < 0)
        goto out;
    for (;;) {
        tcp_hdr_t h;
        tcp_region_t *r;
        rc = wsync_recv_all(rd->fd, buf, TCP_HDR_LEN, 0);
        if (rc != 0) {
            /* Between puts, a close is the sender's disconnect; inside a
             * header it is a broken stream. */
            if (rc < 0 && !stopping(t))
                wsync_cqueue_push_error(&t->cq, ~0ULL, sender, WSYNC_ERR_PEER,
                                        "tcp: sender %d at %s sent a truncated put header: connection closed",
                                        sender, rd->peer);
            break;
        }
        tcp_hdr_decode(buf, &h);
        r = admit(t, &h, sender, why, sizeof(why));
        if (r == NULL) {
            wsync_cqueue_push_error(&t->cq, h.magic == TCP_MAGIC ? h.tag : ~0ULL, sender, WSYNC_ERR_PEER,
                                    "tcp: bad put from sender %d at %s: %s; connection closed", sender, rd->peer,
                                    why);
            break;
        }
        rc = recv_put(rd, &bounce, r, h.dst_off, h.len);
        release(t, r);
        if (rc != 0) {
            if (!stopping(t))
                wsync_cqueue_push_error(&t->cq, h.tag, sender, WSYNC_ERR_PEER,
                                        "tcp: sender %d at %s went away in the middle of a %llu-byte put%s",
                                        sender, rd->peer, (unsigned long long)h.len,
                                        r->super.kind == WSYNC_MEM_HOST
                                            ? ""
                                            : " (or the copy into GPU memory failed: see the log)");
            break;
        }
        {
            wsync_completion_t c = {.kind = WSYNC_COMPLETION_LANDED, .tag = h.tag, .len = h.len, .peer = sender};
            wsync_cqueue_push(&t->cq, &c);
        }
        test_recv_stall();
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
void tcp_reap_readers(tcp_transport_t *t, int all)
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
        tcp_tune(fd);
        rd = calloc(1, sizeof(*rd));
        if (rd == NULL) {
            close(fd);
            continue;
        }
        rd->t = t;
        rd->fd = fd;
        snprintf(rd->peer, sizeof(rd->peer), "%s:%d", inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
        pthread_mutex_lock(&t->lock);
        tcp_reap_readers(t, 0);
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

wsync_status_t tcp_listen(wsync_transport_t *tt, wsync_blob_t *addr)
{
    tcp_transport_t *t = container_of(tt, tcp_transport_t, super);
    tcp_addr_t a = {.magic = TCP_MAGIC, .version = TCP_VERSION, .nonce = t->nonce};
    long want = wsync_setting_int(WSYNC_SET_TCP_PORT); /* 0..65535, checked at start */
    int port = 0;

    if (t->listen_fd < 0) {
        WSYNC_CHECK(wsync_tcp_listen(t->bind_host, (int)want, &t->listen_fd, &port));
        if (pthread_create(&t->acceptor, NULL, acceptor_main, t) != 0) {
            close(t->listen_fd);
            t->listen_fd = -1;
            return wsync_error(WSYNC_ERR_IO, "tcp: cannot start the accept thread");
        }
    }
    memset(a.hostport, 0, sizeof(a.hostport));
    wsync_listen_hostport(t->listen_fd, t->bind_host, a.hostport, sizeof(a.hostport));
    tcp_addr_encode(&a, addr->data);
    addr->len = TCP_ADDR_LEN;
    return WSYNC_OK;
}
