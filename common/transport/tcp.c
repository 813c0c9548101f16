/* tcp.c: one-sided puts over TCP: the transport object, region
 * registration, the completion queue and the socket helpers both sides use.
 * A sender writes a small header (region, offset, length, tag) then the
 * payload (tcp_send.c); the receiver's reader thread checks the header
 * against its registered regions and reads the payload straight into place,
 * or through bounce buffers for GPU memory (tcp_recv.c), then queues a
 * LANDED completion. The wire layouts are in tcp_wire.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/transport/tcp_internal.h"
#include "common/base/util.h"

void tcp_tune(int fd)
{
    int sz = TCP_SOCKBUF;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

/* TCP needs nothing but sockets: always usable, the last resort of "auto". */
static int tcp_can_use(const wsync_transport_config_t *cfg)
{
    return 1;
}

static wsync_status_t tcp_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    tcp_transport_t *t = calloc(1, sizeof(*t));
    WSYNC_CHECK_ALLOC(t);
    t->super.ops = &wsync_transport_tcp;
    t->cfg = *cfg;
    snprintf(t->bind_host, sizeof(t->bind_host), "%s", cfg->bind_host ? cfg->bind_host : "");
    t->cfg.bind_host = NULL;
    if (cfg->auth)
        t->auth = *cfg->auth;
    t->cfg.auth = NULL;
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
    if (r->inflight > 0) {
        /* A put is still being read into it: its sender may be unreachable
         * without a reset (a cut link, a partition), so that read would never
         * return. The owner is giving the region up: cut the connections so
         * the readers let go (found by the netns link-cut test). */
        tcp_reader_t *rd;
        for (rd = t->readers; rd; rd = rd->next)
            shutdown(rd->fd, SHUT_RDWR);
    }
    while (r->inflight > 0)
        pthread_cond_wait(&t->cond, &t->lock);
    for (pp = &t->regions; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    free(r->spans);
    free(r);
}

static wsync_status_t tcp_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                 uint64_t tag)
{
    return WSYNC_OK; /* one-sided: the header says where the bytes go */
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
    tcp_reap_readers(t, 1);
    pthread_mutex_unlock(&t->lock);
    for (r = t->regions; r; r = n) {
        n = r->next;
        free(r->spans);
        free(r);
    }
    wsync_cqueue_destroy(&t->cq);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t);
}

wsync_status_t tcp_redirect(wsync_region_t *rr, const wsync_redirect_t *spans, size_t n, wsync_blob_t *key)
{
    tcp_transport_t *t = container_of(rr->transport, tcp_transport_t, super);
    tcp_region_t *r = container_of(rr, tcp_region_t, super);
    wsync_redirect_t *copy = NULL;
    (void)key; /* the receiver lands the bytes: its key stays */
    WSYNC_CHECK(wsync_redirect_check(rr, spans, n, "tcp"));
    if (n > 0 && wsync_fault(WSYNC_FAULT_REFUSE_REDIRECT) == 1)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "tcp: redirect refused (test hook WSYNC_TEST_REFUSE_REDIRECT)");
    if (n > 0) {
        copy = malloc(n * sizeof(*copy));
        WSYNC_CHECK_ALLOC(copy);
        memcpy(copy, spans, n * sizeof(*copy));
    }
    pthread_mutex_lock(&t->lock);
    while (r->inflight > 0) /* a reader holds the old spans */
        pthread_cond_wait(&t->cond, &t->lock);
    free(r->spans);
    r->spans = copy;
    r->nspans = n;
    pthread_mutex_unlock(&t->lock);
    return WSYNC_OK;
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
    .redirect = tcp_redirect,
    .poll = tcp_poll,
    .disconnect = tcp_disconnect,
    .close = tcp_close,
};
