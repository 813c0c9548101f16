/* delta_serve.c: pulls that name a base (delta_serve.h). The wires of a
 * version are cached per copy slot, keyed by (version, base): every engine
 * asking from that base gets the same bytes, encoded once. Each request lays
 * the wires it sends back to back in a buffer of its own, registered with
 * the transport, and puts each from there to the same place of the asker's
 * staging region; the reply says which pieces went so and where. */
#include "trainer_side/delta_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/delta/delta.h"
#include "common/delta/delta_mem.h"
#include "common/delta/delta_piece.h"
#include "common/model/manifest.h"

#define WIRE_FULL ((unsigned char *)1) /* cached: the piece goes full (its wire would not be smaller) */

typedef struct delta_slot_cache {
    uint64_t version, base;
    unsigned char **wire; /* [nmy]: NULL not encoded yet, WIRE_FULL, or the wire */
    uint64_t *len;
} delta_slot_cache_t;

typedef struct pub_delta_cache {
    pthread_mutex_t lock;
    delta_slot_cache_t e[PUB_SLOTS];
    wsync_delta_dev_t *dev; /* slots on a GPU: the encoder's device buffers (delta_mem.h) */
} pub_delta_cache_t;

struct pub_delta_req {
    int base_slot, pinned; /* pinned: the base slot is, until the puts are issued */
    uint64_t base;
    unsigned char *buf; /* the wires sent, back to back */
    uint64_t cap, used;
    wsync_region_t *region;
    wsync_pull_delta_t *entries;
    size_t n, room;
};

static void slot_cache_reset(delta_slot_cache_t *c, size_t nmy)
{
    size_t i;
    for (i = 0; c->wire && i < nmy; i++)
        if (c->wire[i] != WIRE_FULL)
            free(c->wire[i]);
    free(c->wire);
    free(c->len);
    memset(c, 0, sizeof(*c));
}

void pub_delta_cache_free(wsync_publisher_t *p)
{
    pub_delta_cache_t *dc = p->serving.delta_cache;
    int k;
    if (dc == NULL)
        return;
    for (k = 0; k < PUB_SLOTS; k++)
        slot_cache_reset(&dc->e[k], p->share.nmy);
    wsync_delta_dev_free(p->mem, dc->dev);
    pthread_mutex_destroy(&dc->lock);
    free(dc);
    p->serving.delta_cache = NULL;
}

/* The copy slot holding `base`, fully copied, other than s; -1 if none. */
static int find_base(const wsync_publisher_t *p, const pub_slot_t *s, uint64_t base)
{
    int k;
    size_t i;
    for (k = 0; k < PUB_SLOTS; k++) {
        const pub_slot_t *b = &p->slots.slot[k];
        if (b == s || b->version != base || b->copy_status != WSYNC_OK)
            continue;
        for (i = 0; i < p->share.nmy && b->copied[i]; i++)
            ;
        return i == p->share.nmy ? k : -1;
    }
    return -1;
}

/* The slot index of s among the copy slots, or -1 (the direct slot). */
static int slot_index(const wsync_publisher_t *p, const pub_slot_t *s)
{
    int k;
    for (k = 0; k < PUB_SLOTS; k++)
        if (&p->slots.slot[k] == s)
            return k;
    return -1;
}

wsync_status_t pub_delta_begin(wsync_publisher_t *p, const wsync_pull_request_t *q, const pub_slot_t *s, int ti,
                               pub_delta_req_t **out)
{
    const wsync_transport_ops_t *ops = p->serving.transports[ti].ops;
    pub_delta_req_t *d;
    wsync_blob_t key;
    int sb;
    *out = NULL;
    /* Whole images over tcp from host or GPU memory (the wires go from
     * host memory either way), out of a copy slot, with a base kept: else
     * every piece goes full (the engine needs no second path; the reply's
     * base 0 says why none is a delta). */
    if (q->base == 0 || q->ntargets > 0 || q->delta_bytes < WSYNC_DELTA_HEADER ||
        wsync_setting_int(WSYNC_SET_DELTA_BASES) == 0 || strcmp(ops->name, "tcp") != 0 || slot_index(p, s) < 0 ||
        (sb = find_base(p, s, q->base)) < 0)
        return WSYNC_OK;
    if (p->serving.delta_cache == NULL) {
        pub_delta_cache_t *dc = calloc(1, sizeof(*dc));
        WSYNC_CHECK_ALLOC(dc);
        pthread_mutex_init(&dc->lock, NULL);
        p->serving.delta_cache = dc;
    }
    d = calloc(1, sizeof(*d));
    WSYNC_CHECK_ALLOC(d);
    d->base_slot = sb;
    d->base = q->base;
    d->cap = q->delta_bytes < p->share.owned_bytes ? q->delta_bytes : p->share.owned_bytes;
    d->buf = malloc(d->cap ? d->cap : 1); /* touched only where wires go */
    if (d->buf == NULL) {
        free(d);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for a delta staging buffer");
    }
    if (ops->reg(p->serving.transports[ti].t, d->buf, d->cap ? d->cap : 1, WSYNC_MEM_HOST, &d->region, &key) !=
        WSYNC_OK) {
        free(d->buf);
        free(d);
        return WSYNC_ERR_IO;
    }
    p->slots.slot[sb].pins++; /* the base stays until this request's puts are issued */
    d->pinned = 1;
    *out = d;
    return WSYNC_OK;
}

/* My piece k's wire against the base (cached). Called without p->lock: the
 * slots are pinned. *wire WIRE_FULL: the piece goes full. The cache lock
 * is held on return with a wire (the caller copies it, then unlocks). */
static wsync_status_t get_wire(wsync_publisher_t *p, const pub_slot_t *s, const pub_delta_req_t *d, size_t k,
                               const pub_put_t *e, unsigned char **wire, uint64_t *len)
{
    pub_delta_cache_t *dc = p->serving.delta_cache;
    delta_slot_cache_t *c = &dc->e[slot_index(p, s)];
    const pub_span_t *sn = pub_span_at(p, s, e->src), *sb = pub_span_at(p, &p->slots.slot[d->base_slot], e->src);
    unsigned width = wsync_delta_piece_width(p->sl->manifest, e->src, e->src + e->len);
    uint64_t wl = 0;
    const unsigned char *bp, *np;
    unsigned char *out = NULL;
    pthread_mutex_lock(&dc->lock);
    if (c->version != s->version || c->base != d->base || c->wire == NULL) {
        slot_cache_reset(c, p->share.nmy);
        c->wire = calloc(p->share.nmy + 1, sizeof(*c->wire));
        c->len = calloc(p->share.nmy + 1, sizeof(*c->len));
        if (c->wire == NULL || c->len == NULL) {
            slot_cache_reset(c, p->share.nmy);
            pthread_mutex_unlock(&dc->lock);
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory for the delta cache");
        }
        c->version = s->version;
        c->base = d->base;
    }
    if (c->wire[k]) {
        *wire = c->wire[k];
        *len = c->len[k];
        return WSYNC_OK; /* locked */
    }
    pthread_mutex_unlock(&dc->lock);
    if (sn == NULL || sb == NULL)
        return wsync_error(WSYNC_ERR_INVALID, "piece %u is not in the slots", e->id);
    bp = (const unsigned char *)sb->ptr + (e->src - sb->offset);
    np = (const unsigned char *)sn->ptr + (e->src - sn->offset);
    WSYNC_CHECK(wsync_delta_piece_encode(p->mem, &dc->dev, bp, np, e->len, width, &out, &wl));
    pthread_mutex_lock(&dc->lock);
    if (c->version != s->version || c->base != d->base || c->wire == NULL) { /* cannot happen: s is pinned */
        pthread_mutex_unlock(&dc->lock);
        free(out);
        return wsync_error(WSYNC_ERR_INTERNAL, "delta cache reset while pinned");
    }
    if (c->wire[k] == NULL) {
        c->wire[k] = out ? out : WIRE_FULL;
        c->len[k] = wl;
    } else {
        free(out); /* another request encoded it meanwhile */
    }
    *wire = c->wire[k];
    *len = c->len[k];
    return WSYNC_OK; /* locked */
}

static wsync_delta_form_t wire_form(const unsigned char *wire)
{
    return (wsync_delta_form_t)wire[4];
}

int pub_delta_put(wsync_publisher_t *p, const pub_slot_t *s, pub_delta_req_t *d, const wsync_pull_request_t *q,
                  pub_request_t *r, int ti, pub_conn_t *conn, size_t k, const pub_put_t *e, uint64_t deadline)
{
    const wsync_transport_ops_t *ops = p->serving.transports[ti].ops;
    unsigned char *wire = NULL;
    uint64_t wl = 0, at = d ? (d->used + 7) & ~7ULL : 0;
    wsync_delta_form_t form;
    wsync_status_t st;
    if (d == NULL || !d->pinned || e->len == 0 || e->len <= WSYNC_DELTA_HEADER)
        return 0;
    if (pub_wait_range(p, (pub_slot_t *)s, e->src, e->len, deadline) != WSYNC_OK)
        return 0; /* the full put's wait says why */
    if (d->n == d->room) {
        size_t room = d->room ? 2 * d->room : 64;
        wsync_pull_delta_t *n2 = realloc(d->entries, room * sizeof(*n2));
        if (n2 == NULL)
            return 0;
        d->entries = n2;
        d->room = room;
    }
    pthread_mutex_unlock(&p->lock);
    st = get_wire(p, s, d, k, e, &wire, &wl);
    if (st == WSYNC_OK && wire != WIRE_FULL && at + wl <= d->cap)
        memcpy(d->buf + at, wire, wl);
    if (st == WSYNC_OK)
        pthread_mutex_unlock(&p->serving.delta_cache->lock);
    pthread_mutex_lock(&p->lock);
    if (st != WSYNC_OK) {
        LOG_WARN("trainer rank %d: piece %u of version %llu goes full: encoding it against version %llu failed: "
                 "%s",
                 p->cfg.rank, e->id, (unsigned long long)s->version, (unsigned long long)d->base,
                 wsync_last_error());
        return 0;
    }
    if (wire == WIRE_FULL || at + wl > d->cap)
        return 0;
    form = wire_form(d->buf + at);
    if (wsync_fault(WSYNC_FAULT_CORRUPT_WIRE) == (long long)e->id) /* test hook: a wire engines must refuse */
        d->buf[at] ^= 0xff;
    r->outstanding++;
    if (ops->put(conn->conn, d->region, at, &q->delta_key, q->delta_at + at, wl,
                 ((uint64_t)r->req << 32) | e->id | WSYNC_PULL_DELTA_TAG) != WSYNC_OK) {
        r->outstanding--;
        if (r->status == WSYNC_OK) {
            r->status = WSYNC_ERR_PEER;
            snprintf(r->error, sizeof(r->error), "piece %u's delta wire (%llu bytes): %s", e->id,
                     (unsigned long long)wl, wsync_last_error());
        }
        return 1;
    }
    d->entries[d->n++] = (wsync_pull_delta_t){.piece = e->id, .form = form, .bytes = wl, .at = at};
    d->used = at + wl;
    r->nput++;
    r->bput += wl;
    return 1;
}

void pub_delta_reply(const pub_delta_req_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out)
{
    out->has_base = q->base != 0;
    out->base = d ? d->base : 0;
    out->deltas = d ? d->entries : NULL;
    out->ndeltas = d ? d->n : 0;
}

void pub_delta_unpin(wsync_publisher_t *p, pub_delta_req_t *d)
{
    if (d == NULL || !d->pinned)
        return;
    d->pinned = 0;
    p->slots.slot[d->base_slot].pins--;
    pthread_cond_broadcast(&p->cond); /* a publish may wait for the slot */
}

void pub_delta_release(wsync_publisher_t *p, pub_delta_req_t *d, int ti)
{
    if (d == NULL)
        return;
    pub_delta_unpin(p, d);
    if (d->region)
        p->serving.transports[ti].ops->dereg(d->region);
    d->region = NULL;
}

void pub_delta_free(pub_delta_req_t *d)
{
    if (d == NULL)
        return;
    free(d->buf);
    free(d->entries);
    free(d);
}
