/* relay_delta.c: a relay's delta wires for one request (relay_delta.h).
 * No cache across requests: a relay serves a handful of children (its
 * fan-out), each request encodes what it sends. */
#include "engine_side/relay_delta.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/base/util.h"
#include "common/delta/delta_piece.h"

struct relay_delta {
    uint64_t base;
    const unsigned char *base_image;
    unsigned char *buf; /* the wires sent, back to back */
    uint64_t cap, used;
    wsync_region_t *region;
    wsync_pull_delta_t *entries;
    size_t n, room;
    uint64_t wire_bytes, piece_bytes, nfull; /* the wires put and their pieces' bytes; pieces that went full */
};

wsync_status_t relay_delta_begin(const wsync_pull_request_t *q, uint64_t base_version, const void *base_image,
                                 const wsync_transport_ops_t *ops, wsync_transport_t *t, relay_delta_t **out)
{
    relay_delta_t *d = calloc(1, sizeof(*d));
    wsync_blob_t key;
    *out = NULL;
    WSYNC_CHECK_ALLOC(d);
    d->base = base_version;
    d->base_image = base_image;
    d->cap = q->delta_bytes;
    d->buf = malloc(d->cap ? d->cap : 1); /* touched only where wires go */
    if (d->buf == NULL) {
        free(d);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for a delta staging buffer of %llu bytes",
                           (unsigned long long)q->delta_bytes);
    }
    if (ops->reg(t, d->buf, d->cap ? d->cap : 1, WSYNC_MEM_HOST, &d->region, &key) != WSYNC_OK) {
        free(d->buf);
        free(d);
        return WSYNC_ERR_IO;
    }
    *out = d;
    return WSYNC_OK;
}

int relay_delta_put(relay_delta_t *d, const wsync_transport_ops_t *ops, wsync_conn_t *conn,
                    const wsync_pull_request_t *q, const void *next, uint64_t off, uint64_t len, uint32_t id,
                    unsigned width, uint64_t *wire_len)
{
    const uint64_t at = (d->used + 7) & ~7ULL;
    unsigned char *wire = NULL;
    uint64_t wl = 0;
    if (len <= WSYNC_DELTA_HEADER)
        return 0;
    if (d->n == d->room) {
        size_t room = d->room ? 2 * d->room : 64;
        wsync_pull_delta_t *n2 = realloc(d->entries, room * sizeof(*n2));
        if (n2 == NULL)
            return 0;
        d->entries = n2;
        d->room = room;
    }
    if (wsync_delta_piece_encode(&wsync_mem_host, NULL, d->base_image + off, (const unsigned char *)next + off,
                                 len, width, &wire, &wl) != WSYNC_OK ||
        wire == NULL || at + wl > d->cap) {
        free(wire);
        d->nfull++;
        return 0;
    }
    memcpy(d->buf + at, wire, wl);
    free(wire);
    if (wsync_fault(WSYNC_FAULT_CORRUPT_WIRE) == (long long)id) /* test hook: a wire the child must refuse */
        d->buf[at] ^= 0xff;
    if (ops->put(conn, d->region, at, &q->delta_key, q->delta_at + at, wl,
                 ((uint64_t)q->req << 32) | id | WSYNC_PULL_DELTA_TAG) != WSYNC_OK)
        return -1;
    d->entries[d->n++] =
        (wsync_pull_delta_t){.piece = id, .form = (wsync_delta_form_t)d->buf[at + 4], .bytes = wl, .at = at};
    d->used = at + wl;
    d->wire_bytes += wl;
    d->piece_bytes += len;
    *wire_len = wl;
    return 1;
}

void relay_delta_reply(const relay_delta_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out)
{
    out->has_base = q->base != 0;
    out->base = d ? d->base : 0;
    out->deltas = d ? d->entries : NULL;
    out->ndeltas = d ? d->n : 0;
}

void relay_delta_release(relay_delta_t *d, const wsync_transport_ops_t *ops)
{
    if (d && d->region)
        ops->dereg(d->region);
    if (d)
        d->region = NULL;
}

void relay_delta_end(relay_delta_t *d, const char *engine_id, const wsync_pull_request_t *q)
{
    char a[32], b[32];
    if (d == NULL)
        return;
    LOG_INFO("engine %s's relay: version %llu to engine %s rank %d: %zu pieces as deltas from version %llu (%s of "
             "wires for %s of pieces), %llu pieces full",
             engine_id, (unsigned long long)q->version, q->engine, q->local_rank, d->n,
             (unsigned long long)d->base, wsync_fmt_size(d->wire_bytes, a, sizeof(a)),
             wsync_fmt_size(d->piece_bytes, b, sizeof(b)), (unsigned long long)d->nfull);
    free(d->buf);
    free(d->entries);
    free(d);
}
