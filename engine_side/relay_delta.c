/* relay_delta.c: a relay's delta wires for one request (relay_delta.h),
 * laid, put and listed as a trainer rank's (common/proto/pull_deltas.h).
 * No cache across requests: a relay serves a handful of children (its
 * fan-out), each request encodes what it sends. */
#include "engine_side/relay_delta.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/util.h"
#include "common/delta/delta_mem.h"

struct relay_delta {
    const unsigned char *base_image;
    const wsync_mem_ops_t *mem; /* where both images live */
    wsync_delta_dev_t *dev;     /* a GPU image's encoder buffers, freed at the request's end */
    wsync_pull_deltas_t out;
    uint64_t nfull; /* puts that went full */
};

wsync_status_t relay_delta_begin(const wsync_pull_request_t *q, uint64_t base_version, const void *base_image,
                                 wsync_mem_kind_t kind, int device, const wsync_transport_ops_t *ops,
                                 wsync_transport_t *t, relay_delta_t **out)
{
    relay_delta_t *d;
    wsync_status_t st;
    *out = NULL;
    /* a GPU image: its device is this thread's, for the encoder and the digests */
    if (kind == WSYNC_MEM_CUDA)
        WSYNC_CHECK(wsync_mem_cuda.init(device));
    d = calloc(1, sizeof(*d));
    WSYNC_CHECK_ALLOC(d);
    d->base_image = base_image;
    d->mem = kind == WSYNC_MEM_CUDA ? &wsync_mem_cuda : &wsync_mem_host;
    if ((st = wsync_pull_deltas_open(&d->out, base_version, q->delta_bytes, ops, t)) != WSYNC_OK) {
        free(d);
        return st;
    }
    *out = d;
    return WSYNC_OK;
}

int relay_delta_put(relay_delta_t *d, const wsync_transport_ops_t *ops, wsync_conn_t *conn,
                    const wsync_pull_request_t *q, const void *next, uint64_t off, uint64_t len, uint32_t id,
                    unsigned width, int with_digest, uint64_t *wire_len)
{
    unsigned char *wire = NULL;
    uint64_t wl = 0, at = 0, dig = 0;
    int placed;
    if (len <= WSYNC_DELTA_HEADER)
        return 0;
    placed = wsync_pull_deltas_encode(d->mem, &d->dev, d->base_image + off, (const unsigned char *)next + off, len,
                                      width, off, &wire, &wl, with_digest ? &dig : NULL) == WSYNC_OK &&
             wire != NULL && wsync_pull_deltas_place(&d->out, wire, wl, &at);
    free(wire);
    if (!placed) {
        d->nfull++;
        return 0;
    }
    if (wsync_pull_deltas_put(&d->out, ops, conn, q, id, at, wl, len, with_digest ? &dig : NULL) != WSYNC_OK)
        return -1;
    *wire_len = wl;
    return 1;
}

void relay_delta_reply(const relay_delta_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out)
{
    wsync_pull_deltas_reply(d ? &d->out : NULL, q, out);
}

void relay_delta_release(relay_delta_t *d, const wsync_transport_ops_t *ops)
{
    wsync_pull_deltas_release(d ? &d->out : NULL, ops);
}

void relay_delta_end(relay_delta_t *d, const char *engine_id, const wsync_pull_request_t *q)
{
    const char *unit = q->ntargets ? "puts" : "pieces";
    char a[32], b[32];
    if (d == NULL)
        return;
    LOG_INFO("engine %s's relay: version %llu to engine %s rank %d: %zu %s as deltas from version %llu (%s of "
             "wires for %s of %s), %llu %s full",
             engine_id, (unsigned long long)q->version, q->engine, q->local_rank, d->out.n, unit,
             (unsigned long long)d->out.base, wsync_fmt_size(d->out.wire_bytes, a, sizeof(a)),
             wsync_fmt_size(d->out.put_bytes, b, sizeof(b)), unit, (unsigned long long)d->nfull, unit);
    wsync_pull_deltas_clear(&d->out);
    wsync_delta_dev_free(d->mem, d->dev); /* on the request's thread: its device */
    free(d);
}
