/* verbs.c: the libibverbs transport's ops table and data path. A put is an
 * RDMA WRITE WITH IMMEDIATE (imm = piece id) straight into the receiver's
 * registered region on a reliable-connected queue pair; the receiver's
 * receive completion is the LANDED signal. Puts are striped round-robin over
 * the connection's queue pairs (one per NIC), many in flight per queue pair;
 * puts beyond the send queue's depth wait in a per-queue-pair list that the
 * device's poller drains as writes retire. Without libibverbs, the shared
 * refusal (not_built.h) stands in. See verbs_wire.h for the
 * immediate and segmentation rules, docs/verbs.md for the whole picture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/transport/not_built.h"
#include "common/transport/transport.h"

#if WSYNC_HAVE_VERBS
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/net/sock.h"
#include "common/transport/verbs_internal.h"
#include "common/base/util.h"

static int verbs_can_use(const wsync_transport_config_t *cfg)
{
    char why[200];
    if (verbs_probe(why, sizeof(why)))
        return 1;
    wsync_error(WSYNC_ERR_UNSUPPORTED, "transport verbs: %s", why);
    return 0;
}

static wsync_status_t verbs_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    verbs_transport_t *t = calloc(1, sizeof(*t));
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(t);
    t->super.ops = &wsync_transport_verbs;
    t->cfg = *cfg;
    snprintf(t->bind_host, sizeof(t->bind_host), "%s", cfg->bind_host ? cfg->bind_host : "");
    t->cfg.bind_host = NULL;
    if (cfg->auth)
        t->auth = *cfg->auth;
    t->cfg.auth = NULL;
    t->nonce = wsync_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)t;
    t->listen_fd = -1;
    wsync_cqueue_init(&t->cq);
    pthread_mutex_init(&t->lock, NULL);
    WSYNC_CHECK_GOTO(verbs_devs_open(t), st, err_free);
    WSYNC_CHECK_GOTO(verbs_pollers_start(t), st, err_stop_pollers);
    *out = &t->super;
    return WSYNC_OK;
err_stop_pollers:
    verbs_pollers_stop(t);
    verbs_devs_close(t);
err_free:
    pthread_mutex_destroy(&t->lock);
    wsync_cqueue_destroy(&t->cq);
    free(t);
    return st;
}

static wsync_status_t verbs_reg(wsync_transport_t *tt, void *ptr, size_t len, wsync_mem_kind_t kind,
                                wsync_region_t **out, wsync_blob_t *key)
{
    verbs_transport_t *t = container_of(tt, verbs_transport_t, super);
    verbs_region_t *r;
    verbs_key_t k = {.nonce = t->nonce, .addr = (uint64_t)(uintptr_t)ptr, .len = len, .ndev = (uint32_t)t->ndev};
    int i;
    if (ptr == NULL || len == 0)
        return wsync_error(WSYNC_ERR_INVALID, "verbs: cannot register an empty or NULL region (%zu bytes)", len);
    r = calloc(1, sizeof(*r));
    WSYNC_CHECK_ALLOC(r);
    if (verbs_mr_get(t, ptr, len, kind, &r->mr) != WSYNC_OK) {
        free(r);
        return wsync_last_error()[0] ? WSYNC_ERR_VERBS : WSYNC_ERR_INTERNAL;
    }
    r->super = (wsync_region_t){.transport = tt, .ptr = ptr, .len = len, .kind = kind};
    for (i = 0; i < t->ndev; i++)
        k.rkey[i] = r->mr->mr[i]->rkey;
    verbs_key_encode(&k, key->data);
    key->len = VERBS_KEY_LEN;
    *out = &r->super;
    return WSYNC_OK;
}

static void verbs_dereg(wsync_region_t *rr)
{
    verbs_region_t *r;
    if (rr == NULL)
        return;
    r = container_of(rr, verbs_region_t, super);
    verbs_mr_put(container_of(rr->transport, verbs_transport_t, super), r->mr);
    free(r);
}

static wsync_status_t verbs_listen(wsync_transport_t *tt, wsync_blob_t *addr)
{
    verbs_transport_t *t = container_of(tt, verbs_transport_t, super);
    verbs_addr_t a = {.nonce = t->nonce};
    int port = 0;
    if (t->listen_fd < 0)
        WSYNC_CHECK(verbs_listen_start(t, &port));
    wsync_listen_hostport(t->listen_fd, t->bind_host, a.hostport, sizeof(a.hostport));
    verbs_addr_encode(&a, addr->data);
    addr->len = VERBS_ADDR_LEN;
    return WSYNC_OK;
}

static wsync_status_t verbs_connect(wsync_transport_t *tt, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
{
    verbs_transport_t *t = container_of(tt, verbs_transport_t, super);
    verbs_addr_t a;
    verbs_conn_t *c;
    WSYNC_CHECK(verbs_addr_decode(addr->data, addr->len, &a));
    WSYNC_CHECK(verbs_conn_open(t, &a, self_id, &c));
    pthread_mutex_lock(&t->lock);
    c->next = t->conns;
    t->conns = c;
    pthread_mutex_unlock(&t->lock);
    *out = &c->super;
    return WSYNC_OK;
}

static void verbs_disconnect(wsync_conn_t *cc)
{
    verbs_transport_t *t;
    verbs_conn_t *c, **pp;
    if (cc == NULL)
        return;
    c = container_of(cc, verbs_conn_t, super);
    t = container_of(cc->transport, verbs_transport_t, super);
    pthread_mutex_lock(&t->lock);
    for (pp = &t->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    verbs_conn_close(c);
}

static unsigned exp_bucket(int sender, uint32_t low)
{
    return (low * 2654435761u ^ (uint32_t)sender * 40503u) % VERBS_EXP_BUCKETS;
}

static wsync_status_t verbs_expect(wsync_transport_t *tt, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                   uint64_t tag)
{
    verbs_transport_t *t = container_of(tt, verbs_transport_t, super);
    verbs_expect_t *e = calloc(1, sizeof(*e));
    unsigned b = exp_bucket(src_id, (uint32_t)tag);
    WSYNC_CHECK_ALLOC(e);
    e->sender = src_id;
    e->low = (uint32_t)tag;
    e->tag = tag;
    e->len = len;
    pthread_mutex_lock(&t->lock);
    e->next = t->exp[b];
    t->exp[b] = e;
    pthread_mutex_unlock(&t->lock);
    return WSYNC_OK;
}

/* The expectation for (sender, piece), consumed; 0 if none. */
static int take_expect(verbs_transport_t *t, int sender, uint32_t low, uint64_t *tag, uint64_t *len)
{
    verbs_expect_t **pp, *e;
    unsigned b = exp_bucket(sender, low);
    pthread_mutex_lock(&t->lock);
    for (pp = &t->exp[b]; (e = *pp) != NULL; pp = &e->next)
        if (e->sender == sender && e->low == low) {
            *pp = e->next;
            pthread_mutex_unlock(&t->lock);
            *tag = e->tag;
            *len = e->len;
            free(e);
            return 1;
        }
    pthread_mutex_unlock(&t->lock);
    return 0;
}

static const char *wc_hint(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_RETRY_EXC_ERR: return " (transport retries exhausted: the receiver is gone or unreachable)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return " (the receiver posted no receive in time)";
    case IBV_WC_REM_ACCESS_ERR: return " (the receiver refused the write: stale region key or out of range)";
    case IBV_WC_WR_FLUSH_ERR: return " (flushed after an earlier error or a disconnect)";
    default: return "";
    }
}

/* Posts as many queued puts as the send queue has room for. Called with the
 * connection's lock held. A broken queue pair fails what is queued. */
static void pump(verbs_transport_t *t, verbs_link_t *l)
{
    verbs_conn_t *c = l->c;
    verbs_job_t *j;
    while ((j = l->head) != NULL) {
        verbs_seg_t seg[64];
        size_t n, i;
        int rc = 0;
        if (!l->broken && !c->stopping && l->inflight_wr + (int)j->nseg > l->dev->send_depth)
            return;
        l->head = j->next;
        if (l->head == NULL)
            l->tail = NULL;
        n = l->broken || c->stopping ? 0 : verbs_seg_build(j->len, l->dev->max_msg, seg, 64);
        for (i = 0; i < n && rc == 0; i++) {
            struct ibv_sge sge = {.addr = j->src_addr + seg[i].src_off, .length = seg[i].len, .lkey = j->lkey};
            struct ibv_send_wr wr =
                                   {
                                       .wr_id = (uint64_t)(uintptr_t)j | (seg[i].last ? VERBS_WR_LAST : 0),
                                       .sg_list = seg[i].len ? &sge : NULL,
                                       .num_sge = seg[i].len ? 1 : 0,
                                       .opcode = seg[i].last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                                       .send_flags = seg[i].last ? IBV_SEND_SIGNALED : 0,
                                       .imm_data = verbs_imm_encode(j->tag),
                                       .wr.rdma = {.remote_addr = j->dst_addr + seg[i].dst_off, .rkey = j->rkey},
                                   },
                               *bad;
            rc = ibv_post_send(l->qp, &wr, &bad);
            if (rc == 0)
                l->inflight_wr++;
        }
        if (n > 0 && rc == 0) {
            j->nseg = (uint32_t)n;
            continue;
        }
        if (i > 0) {
            /* Part posted: the poller retires it and reports the failure. */
            j->nseg = (uint32_t)(i - 1);
            j->failed = 1;
            l->broken = 1;
        }
        wsync_cqueue_push_error(&t->cq, j->tag, -1, c->stopping ? WSYNC_ERR_CANCELLED : WSYNC_ERR_PEER,
                                "verbs: put of piece %u (%llu bytes) from sender %d to receiver %s on %s %s",
                                (uint32_t)j->tag, (unsigned long long)j->len, c->self_id, c->peer, l->dev->name,
                                c->stopping ? "cancelled by disconnect"
                                : l->broken ? "not sent: the queue pair failed earlier"
                                            : "could not be posted");
        if (i == 0)
            free(j);
    }
}

static wsync_status_t verbs_put(wsync_conn_t *cc, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                                size_t dst_off, size_t len, uint64_t tag)
{
    verbs_conn_t *c = container_of(cc, verbs_conn_t, super);
    verbs_transport_t *t = container_of(cc->transport, verbs_transport_t, super);
    verbs_region_t *s = container_of(src, verbs_region_t, super);
    verbs_link_t *l = NULL;
    verbs_key_t k;
    verbs_job_t *j;
    int i;

    WSYNC_CHECK(verbs_key_decode(dst_key->data, dst_key->len, &k));
    if (k.nonce != c->nonce)
        return wsync_error(WSYNC_ERR_INVALID,
                           "verbs: region key belongs to another receiver than %s (stale key after a restart?)",
                           c->peer);
    if (len > k.len || dst_off > k.len - len)
        return wsync_error(WSYNC_ERR_INVALID, "verbs: put of %zu bytes at %zu outside the %llu-byte region of %s",
                           len, dst_off, (unsigned long long)k.len, c->peer);
    if (src_off > src->len || len > src->len - src_off)
        return wsync_error(WSYNC_ERR_INVALID, "verbs: put source [%zu, +%zu) outside its %zu-byte region", src_off,
                           len, src->len);
    if (verbs_seg_count(len, t->devs[0].max_msg) > 64)
        return wsync_error(WSYNC_ERR_INVALID,
                           "verbs: a put of %zu bytes needs more than 64 work requests; "
                           "use smaller chunks",
                           len);
    j = calloc(1, sizeof(*j));
    WSYNC_CHECK_ALLOC(j);
    pthread_mutex_lock(&c->lock);
    /* Stripe puts over the NICs, round-robin, skipping broken queue pairs. */
    for (i = 0; i < c->nlinks && l == NULL; i++) {
        verbs_link_t *x = &c->links[(c->rr + (unsigned)i) % (unsigned)c->nlinks];
        if (!x->broken)
            l = x;
    }
    if (l == NULL || c->stopping) {
        pthread_mutex_unlock(&c->lock);
        free(j);
        return wsync_error(WSYNC_ERR_PEER, "verbs: every queue pair to receiver %s has failed; reconnect", c->peer);
    }
    c->rr++;
    j->l = l;
    j->tag = tag;
    j->len = len;
    j->src_addr = (uint64_t)(uintptr_t)src->ptr + src_off;
    j->lkey = s->mr->mr[l->dev->index]->lkey;
    j->dst_addr = k.addr + dst_off;
    j->rkey = k.rkey[l->remote_dev % (int)k.ndev];
    j->nseg = (uint32_t)verbs_seg_count(len, l->dev->max_msg);
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    pump(t, l);
    pthread_mutex_unlock(&c->lock);
    return WSYNC_OK;
}

/* Receiver: a write with immediate landed, or a receive failed. */
static void on_recv(verbs_dev_t *d, verbs_peer_t *p, const struct ibv_wc *wc)
{
    verbs_transport_t *t = d->t;
    uint32_t piece = verbs_imm_decode(wc->imm_data);
    uint64_t tag = piece, len = wc->byte_len;
    int i;
    if (wc->status != IBV_WC_SUCCESS) {
        if (wc->status != IBV_WC_WR_FLUSH_ERR || !p->dead)
            wsync_cqueue_push_error(&t->cq, ~0ULL, p->sender, WSYNC_ERR_PEER,
                                    "verbs: receive from sender %d (%s) failed on %s: %s%s", p->sender, p->addr,
                                    d->name, ibv_wc_status_str(wc->status), wc_hint(wc->status));
        return;
    }
    for (i = 0; i < p->nqp; i++)
        if (p->qp[i]->qp_num == wc->qp_num && verbs_post_recv(p, i) != 0)
            wsync_cqueue_push_error(&t->cq, ~0ULL, p->sender, WSYNC_ERR_VERBS,
                                    "verbs: cannot repost a receive for sender %d on %s", p->sender, d->name);
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
        return;
    take_expect(t, p->sender, piece, &tag, &len);
    {
        wsync_completion_t c = {.kind = WSYNC_COMPLETION_LANDED, .tag = tag, .len = len, .peer = p->sender};
        wsync_cqueue_push(&t->cq, &c);
    }
}

/* Sender: a put's segment retired (the last one is always signalled, and an
 * error completes any segment). */
static void on_send(verbs_dev_t *d, verbs_job_t *j, int last, const struct ibv_wc *wc)
{
    verbs_link_t *l = j->l;
    verbs_conn_t *c = l->c;
    verbs_transport_t *t = d->t;
    pthread_mutex_lock(&c->lock);
    if (wc->status != IBV_WC_SUCCESS) {
        l->broken = 1;
        if (!j->failed)
            wsync_cqueue_push_error(&t->cq, j->tag, -1, c->stopping ? WSYNC_ERR_CANCELLED : WSYNC_ERR_PEER,
                                    "verbs: put of piece %u (%llu bytes) from sender %d to receiver %s failed on "
                                    "%s: %s%s",
                                    (uint32_t)j->tag, (unsigned long long)j->len, c->self_id, c->peer, d->name,
                                    ibv_wc_status_str(wc->status), wc_hint(wc->status));
        j->failed = 1;
    }
    if (!last) {
        /* An unsignalled segment only completes on error; the last still comes. */
        pthread_mutex_unlock(&c->lock);
        return;
    }
    l->inflight_wr -= (int)j->nseg;
    if (!j->failed) {
        wsync_completion_t done = {.kind = WSYNC_COMPLETION_SENT, .tag = j->tag, .len = j->len, .peer = -1};
        wsync_cqueue_push(&t->cq, &done);
    }
    free(j);
    pump(t, l);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

void verbs_on_wc(verbs_dev_t *d, const struct ibv_wc *wc)
{
    uintptr_t id = (uintptr_t)wc->wr_id;
    if (id & VERBS_WR_RECV)
        on_recv(d, (verbs_peer_t *)(id & ~(uintptr_t)3), wc);
    else
        on_send(d, (verbs_job_t *)(id & ~(uintptr_t)3), (id & VERBS_WR_LAST) != 0, wc);
}

static wsync_status_t verbs_poll(wsync_transport_t *tt, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    verbs_transport_t *t = container_of(tt, verbs_transport_t, super);
    *n = wsync_cqueue_pop(&t->cq, out, max, timeout_ms);
    return WSYNC_OK;
}

/* Teardown, the reverse of set-up: stop accepting senders, disconnect our
 * own connections (their writes flush through the still-running pollers),
 * stop the pollers, destroy the senders' queue pairs, deregister memory,
 * then CQs, channels, PDs and devices. */
static void verbs_close(wsync_transport_t *tt)
{
    verbs_transport_t *t;
    unsigned b;
    if (tt == NULL)
        return;
    t = container_of(tt, verbs_transport_t, super);
    if (t->acceptor_started || t->listen_fd >= 0) {
        verbs_acceptor_stop(t);
        __atomic_store_n(&t->stopping, 0, __ATOMIC_RELEASE); /* pollers still needed below */
    }
    while (t->conns)
        verbs_disconnect(&t->conns->super);
    verbs_pollers_stop(t);
    verbs_peers_free(t);
    verbs_mrs_free(t);
    verbs_devs_close(t);
    for (b = 0; b < VERBS_EXP_BUCKETS; b++)
        while (t->exp[b]) {
            verbs_expect_t *e = t->exp[b];
            t->exp[b] = e->next;
            free(e);
        }
    pthread_mutex_destroy(&t->lock);
    wsync_cqueue_destroy(&t->cq);
    free(t);
}

/* The ops table of a build with libibverbs. */
const wsync_transport_ops_t wsync_transport_verbs = {
    .name = "verbs",
    .can_use = verbs_can_use,
    .open = verbs_open,
    .reg = verbs_reg,
    .dereg = verbs_dereg,
    .listen = verbs_listen,
    .connect = verbs_connect,
    .expect = verbs_expect,
    .put = verbs_put,
    .poll = verbs_poll,
    .disconnect = verbs_disconnect,
    .close = verbs_close,
};

#else /* !WSYNC_HAVE_VERBS */

WSYNC_TRANSPORT_NOT_BUILT(wsync_transport_verbs, "verbs", "libibverbs", "install libibverbs-dev and rebuild");
#endif
