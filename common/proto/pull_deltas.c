/* pull_deltas.c: a sender's delta wires for one pull (pull_deltas.h). */
#include "common/proto/pull_deltas.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/delta/delta.h"
#include "common/delta/delta_piece.h"
#include "common/digest/digest.h"
#include "common/targets/fp8_wire.h"

wsync_status_t wsync_pull_deltas_open(wsync_pull_deltas_t *d, uint64_t base, uint64_t cap,
                                      const wsync_transport_ops_t *ops, wsync_transport_t *t)
{
    wsync_blob_t key;
    memset(d, 0, sizeof(*d));
    d->buf = malloc(cap ? cap : 1); /* touched only where wires go */
    if (d->buf == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for a delta staging buffer of %llu bytes",
                           (unsigned long long)cap);
    if (ops->reg(t, d->buf, cap ? cap : 1, WSYNC_MEM_HOST, &d->region, &key) != WSYNC_OK) {
        free(d->buf);
        d->buf = NULL;
        return WSYNC_ERR_IO;
    }
    d->base = base;
    d->cap = cap;
    return WSYNC_OK;
}

/* Image bytes [off, end)'s width (delta_piece.h); in a quantized space, the
 * FP8 codes' or scales'. */
static unsigned range_width(const wsync_manifest_t *m, uint64_t off, uint64_t end)
{
    if (wsync_fp8_is_quantized(m, off))
        return wsync_fp8_elem_width(m, off);
    return wsync_delta_piece_width(m, off, end);
}

unsigned wsync_pull_deltas_width(const wsync_manifest_t *m, const wsync_node_plan_t *np, uint32_t put,
                                 uint64_t off, uint64_t len)
{
    unsigned w = 0;
    size_t k;
    if (np == NULL) {
        w = range_width(m, off, off + len);
    } else {
        const wsync_tput_t *pu = &np->puts[put];
        for (k = 0; k < pu->nruns; k++) {
            const wsync_run2d_t *rn = &np->runs[pu->first_run + k];
            unsigned rw = range_width(m, rn->src_off, rn->src_off + rn->row_bytes);
            if (rw != 0 && w != 0 && rw != w)
                return 1;
            w = rw ? rw : w;
        }
    }
    return wsync_delta_width_for(len, w ? w : 1);
}

wsync_status_t wsync_pull_deltas_encode(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, const void *base,
                                        const void *next, uint64_t len, unsigned width, uint64_t dst_off,
                                        unsigned char **wire, uint64_t *wire_len, uint64_t *dig)
{
    uint64_t sum;
    wsync_status_t st;
    WSYNC_CHECK(wsync_delta_piece_encode(mem, dev, base, next, len, width, wire, wire_len));
    if (*wire == NULL || dig == NULL) /* a put that goes full is verified as every full one */
        return WSYNC_OK;
    if (mem->kind == WSYNC_MEM_HOST) {
        sum = wsync_digest_sum(next, len, dst_off);
    } else if ((st = mem->digest_sum(next, len, dst_off, &sum)) != WSYNC_OK) {
        free(*wire);
        *wire = NULL;
        return st;
    }
    *dig = wsync_digest_final(sum, len, dst_off);
    return WSYNC_OK;
}

int wsync_pull_deltas_place(wsync_pull_deltas_t *d, const unsigned char *wire, uint64_t wl, uint64_t *at)
{
    const uint64_t a = (d->used + 7) & ~7ULL;
    if (wl > d->cap || a > d->cap - wl)
        return 0;
    if (d->n == d->room) {
        size_t room = d->room ? 2 * d->room : 64;
        wsync_pull_delta_t *n2 = realloc(d->entries, room * sizeof(*n2));
        if (n2 == NULL)
            return 0;
        d->entries = n2;
        d->room = room;
    }
    memcpy(d->buf + a, wire, wl);
    *at = a;
    return 1;
}

wsync_status_t wsync_pull_deltas_put(wsync_pull_deltas_t *d, const wsync_transport_ops_t *ops, wsync_conn_t *conn,
                                     const wsync_pull_request_t *q, uint32_t id, uint64_t at, uint64_t wl,
                                     uint64_t put_len, const uint64_t *dig)
{
    const wsync_delta_form_t form = (wsync_delta_form_t)d->buf[at + 4]; /* delta.h's header */
    if (wsync_fault(WSYNC_FAULT_CORRUPT_WIRE) == (long long)id) /* test hook: a wire the asker must refuse */
        d->buf[at] ^= 0xff;
    WSYNC_CHECK(ops->put(conn, d->region, at, &q->delta_key, q->delta_at + at, wl,
                         ((uint64_t)q->req << 32) | id | WSYNC_PULL_DELTA_TAG));
    d->entries[d->n++] = (wsync_pull_delta_t){.piece = id,
                                              .form = form,
                                              .bytes = wl,
                                              .at = at,
                                              .has_digest = dig != NULL,
                                              .digest = dig ? *dig : 0};
    d->used = at + wl;
    d->wire_bytes += wl;
    d->put_bytes += put_len;
    return WSYNC_OK;
}

void wsync_pull_deltas_reply(const wsync_pull_deltas_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out)
{
    out->has_base = q->base != 0;
    out->base = d ? d->base : 0;
    out->deltas = d ? d->entries : NULL;
    out->ndeltas = d ? d->n : 0;
}

void wsync_pull_deltas_release(wsync_pull_deltas_t *d, const wsync_transport_ops_t *ops)
{
    if (d && d->region)
        ops->dereg(d->region);
    if (d)
        d->region = NULL;
}

void wsync_pull_deltas_clear(wsync_pull_deltas_t *d)
{
    if (d == NULL)
        return;
    free(d->buf);
    free(d->entries);
    memset(d, 0, sizeof(*d));
}
