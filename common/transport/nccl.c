/* nccl.c: the NCCL transport. One 2-rank communicator per sender/receiver
 * pair (a dead peer never poisons the others): the receiver's listen() opens a
 * TCP handshake socket, a sender's connect() dials it and gets the
 * ncclUniqueId the receiver generated, both init (rank 0 = sender). Puts and
 * expects queue per pair and a worker issues them in order, grouped, on a
 * dedicated stream, with an event per group: its completion gives SENT on the
 * sender and LANDED on the receiver. Communicators are non-blocking, so a
 * dead or silent peer is aborted after a timeout instead of hanging. This
 * file: the ops table, open, registration, expect/put and close;
 * nccl_conn.c the handshake and pairs, nccl_peer.c each pair's worker. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/settings.h"
#include "common/transport/cqueue.h"
#include "common/transport/nccl_internal.h"
#include "common/transport/not_built.h"
#include "common/transport/transport.h"
#include "common/base/util.h"

#if WSYNC_HAVE_NCCL && WSYNC_HAVE_CUDA
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

static wsync_status_t nc_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    nc_transport_t *t;
    if (!nc_can_use(cfg))
        return WSYNC_ERR_UNSUPPORTED;
    nc_group_max = (int)wsync_setting_int(WSYNC_SET_NCCL_GROUP); /* 1..NC_GROUP_MAX */
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

static wsync_status_t nc_expect(wsync_transport_t *tt, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                uint64_t tag)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    nc_peer_t *p;
    if (off > dst->len || len > dst->len - off)
        return wsync_error(WSYNC_ERR_INVALID, "nccl expect: [%zu, +%zu) outside the %zu-byte region", off, len,
                           dst->len);
    WSYNC_CHECK(nc_peer_for(t, src_id, &p));
    return nc_peer_enqueue(p, 0, (char *)dst->ptr + off, len, tag);
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
    return nc_peer_enqueue(p, 1, (char *)src->ptr + src_off, len, tag);
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
        nc_peer_free(container_of(c, nc_peer_t, super));
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
        nc_peer_free(t->peers[i]);
    wsync_cqueue_destroy(&t->cq);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void nc_put_flush(wsync_conn_t *c)
{
    nc_peer_flush(container_of(c, nc_peer_t, super));
}

static void nc_expect_flush(wsync_transport_t *tt, int src_id)
{
    nc_transport_t *t = container_of(tt, nc_transport_t, super);
    nc_peer_t *p;
    if (nc_peer_for(t, src_id, &p) == WSYNC_OK)
        nc_peer_flush(p);
}

/* The ops table of a build with CUDA and NCCL. */
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

#else /* no NCCL */

WSYNC_TRANSPORT_NOT_BUILT(wsync_transport_nccl, "nccl", "CUDA and NCCL",
                          "rebuild with CUDA=1 NCCL=1 where /usr/local/cuda has nccl.h");
#endif
