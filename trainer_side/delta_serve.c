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
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/delta/delta.h"
#include "common/delta/delta_mem.h"
#include "common/model/manifest.h"
#include "common/proto/pull_deltas.h"

#define WIRE_FULL ((unsigned char *)1) /* cached: the piece goes full (its wire would not be smaller) */

/* The wires of one list of puts of a slot's version against one base: the
 * whole image's (key NULL, by piece id) or a node plan's (key its cache
 * entry, by put id). A target put's entry also keeps the digest of its new
 * bytes (the engine checks it once the wire is applied). */
typedef struct delta_slot_cache {
    uint64_t version, base;
    const void *key;
    size_t n;
    unsigned char **wire; /* [n]: NULL not encoded yet, WIRE_FULL, or the wire */
    uint64_t *len, *dig;
} delta_slot_cache_t;

#define DELTA_KEYS 4 /* lists cached per slot: the whole image and node plans */

typedef struct pub_delta_cache {
    pthread_mutex_t lock;
    delta_slot_cache_t e[PUB_SLOTS][DELTA_KEYS];
    unsigned next[PUB_SLOTS]; /* the entry a new key takes when all are used */
    wsync_delta_dev_t *dev;   /* slots on a GPU: the encoder's device buffers (delta_mem.h) */
} pub_delta_cache_t;

struct pub_delta_req {
    int base_slot, pinned;   /* pinned: the base slot is, until the puts are issued */
    wsync_pull_deltas_t out; /* the wires sent and the answer's entries */
};

static void slot_cache_reset(delta_slot_cache_t *c)
{
    size_t i;
    for (i = 0; c->wire && i < c->n; i++)
        if (c->wire[i] != WIRE_FULL)
            free(c->wire[i]);
    free(c->wire);
    free(c->len);
    free(c->dig);
    memset(c, 0, sizeof(*c));
}

void pub_delta_cache_free(wsync_publisher_t *p)
{
    pub_delta_cache_t *dc = p->serving.delta_cache;
    int k, j;
    if (dc == NULL)
        return;
    for (k = 0; k < PUB_SLOTS; k++)
        for (j = 0; j < DELTA_KEYS; j++)
            slot_cache_reset(&dc->e[k][j]);
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
    wsync_status_t st;
    int sb;
    *out = NULL;
    /* Whole images and targets over tcp from host or GPU memory (the wires
     * go from host memory either way), out of a copy slot, with a base
     * kept: else
     * every piece goes full (the engine needs no second path; the reply's
     * base 0 says why none is a delta). */
    if (q->base == 0 || q->delta_bytes < WSYNC_DELTA_HEADER || wsync_setting_int(WSYNC_SET_DELTA_BASES) == 0 ||
        strcmp(ops->name, "tcp") != 0 || slot_index(p, s) < 0 || (sb = find_base(p, s, q->base)) < 0)
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
    st = wsync_pull_deltas_open(&d->out, q->base,
                                q->delta_bytes < p->share.owned_bytes ? q->delta_bytes : p->share.owned_bytes, ops,
                                p->serving.transports[ti].t);
    if (st != WSYNC_OK) {
        free(d);
        return st;
    }
    p->slots.slot[sb].pins++; /* the base stays until this request's puts are issued */
    d->pinned = 1;
    *out = d;
    return WSYNC_OK;
}

/* Host memory, a packed put: most of up to 256 elements read through its
 * runs in both slots changed (as delta_piece.h looks at a piece), before anything is gathered, so a put
 * that goes full costs no copy. 0 (encode) when a sample falls outside
 * the slots' spans; *st set only by a failed quantization. */
static int packed_mostly_changed(wsync_publisher_t *p, const pub_slot_t *s, const pub_slot_t *b,
                                 const pub_put_list_t *l, const pub_put_t *e, unsigned width, wsync_status_t *st)
{
    const wsync_tput_t *pu = &l->np->puts[e->id];
    const wsync_run2d_t *runs = &l->np->runs[pu->first_run];
    uint64_t i, seen = 0, diff = 0;
    if (pu->nruns == 0 || (*st = pub_fp8_ensure(p, s, l->np)) != WSYNC_OK ||
        (*st = pub_fp8_ensure(p, b, l->np)) != WSYNC_OK)
        return 0;
    for (i = 0; i < 256; i++) {
        const wsync_run2d_t *r = &runs[i * pu->nruns / 256];
        const uint64_t elems = r->row_bytes / width, row = r->rows > 1 ? (i * 2654435761u) % r->rows : 0;
        const uint64_t off = r->src_off + row * r->src_stride + (elems ? (i * 40503u) % elems : 0) * width;
        const pub_span_t *sn = pub_span_at(p, s, off), *sb = pub_span_at(p, b, off);
        if (sn == NULL || sb == NULL || sn->area < 0 || sb->area < 0 || off + width > sn->offset + sn->len ||
            off + width > sb->offset + sb->len)
            return 0;
        seen++;
        diff += memcmp((const char *)sn->ptr + (off - sn->offset), (const char *)sb->ptr + (off - sb->offset),
                       width) != 0;
    }
    return 2 * diff > seen;
}

/* Under dc->lock: slot si's entry for the list `key` (n ids) of version
 * against base, made empty when it held another; a new key takes a free
 * entry, else the next in turn. NULL without memory. */
static delta_slot_cache_t *cache_entry(pub_delta_cache_t *dc, int si, uint64_t version, uint64_t base,
                                       const void *key, size_t n)
{
    delta_slot_cache_t *c = NULL;
    int j;
    for (j = 0; j < DELTA_KEYS && c == NULL; j++)
        if (dc->e[si][j].wire && dc->e[si][j].key == key)
            c = &dc->e[si][j];
    for (j = 0; j < DELTA_KEYS && c == NULL; j++)
        if (dc->e[si][j].wire == NULL)
            c = &dc->e[si][j];
    if (c == NULL)
        c = &dc->e[si][dc->next[si]++ % DELTA_KEYS];
    if (c->wire && c->version == version && c->base == base && c->key == key && c->n == n)
        return c;
    slot_cache_reset(c);
    c->wire = calloc(n + 1, sizeof(*c->wire));
    c->len = calloc(n + 1, sizeof(*c->len));
    c->dig = calloc(n + 1, sizeof(*c->dig));
    if (c->wire == NULL || c->len == NULL || c->dig == NULL) {
        slot_cache_reset(c);
        return NULL;
    }
    *c = (delta_slot_cache_t){.version = version,
                              .base = base,
                              .key = key,
                              .n = n,
                              .wire = c->wire,
                              .len = c->len,
                              .dig = c->dig};
    return c;
}

/* Put e's bytes of slot s's version (*next) and of the base's, slot b
 * (*base): straight from the slots, or (a packed put of a node plan)
 * gathered by its runs from each slot (FP8 codes and scales from each
 * version's quantized bands) into *tmp, memory of the publisher's kind that
 * the caller frees. No p->lock held; both slots pinned. */
static wsync_status_t put_bytes(wsync_publisher_t *p, const pub_slot_t *s, const pub_slot_t *b,
                                const pub_put_list_t *l, const pub_put_t *e, const unsigned char **next,
                                const unsigned char **base, void **tmp)
{
    const wsync_tput_t *pu;
    wsync_status_t st;
    *tmp = NULL;
    if (e->stage == PUB_PUT_FROM_SLOT) {
        const pub_span_t *sn = pub_span_at(p, s, e->src), *sb = pub_span_at(p, b, e->src);
        if (sn == NULL || sb == NULL)
            return wsync_error(WSYNC_ERR_INVALID, "it is not in the slots");
        *next = (const unsigned char *)sn->ptr + (e->src - sn->offset);
        *base = (const unsigned char *)sb->ptr + (e->src - sb->offset);
        return WSYNC_OK;
    }
    pu = &l->np->puts[e->id];
    WSYNC_CHECK(pub_fp8_ensure(p, s, l->np));
    WSYNC_CHECK(pub_fp8_ensure(p, b, l->np)); /* kept with the base's slot, else quantized again */
    WSYNC_CHECK(p->mem->alloc(2 * e->len, tmp));
    st = pub_gather(p, s, &l->np->runs[pu->first_run], pu->nruns, *tmp);
    if (st == WSYNC_OK)
        st = pub_gather(p, b, &l->np->runs[pu->first_run], pu->nruns, (char *)*tmp + e->len);
    if (st != WSYNC_OK) {
        p->mem->free(*tmp);
        *tmp = NULL;
        return st;
    }
    *next = *tmp;
    *base = (const unsigned char *)*tmp + e->len;
    return WSYNC_OK;
}

/* Put e's wire against the base (cached), and with a node plan the digest
 * of its new bytes. Called without p->lock: the slots are pinned. *wire
 * WIRE_FULL: the put goes full. The cache lock is held on return with a
 * wire (the caller copies it, then unlocks). */
static wsync_status_t get_wire(wsync_publisher_t *p, const pub_slot_t *s, const pub_delta_req_t *d,
                               const pub_put_list_t *l, const pub_put_t *e, unsigned char **wire, uint64_t *len,
                               uint64_t *dig)
{
    pub_delta_cache_t *dc = p->serving.delta_cache;
    const int si = slot_index(p, s);
    const void *key = l->np ? l->stage_key : NULL;
    const size_t n = l->np ? l->np->nputs : l->plan->npieces;
    const unsigned width = wsync_pull_deltas_width(p->sl->manifest, l->np, e->id, e->src, e->len);
    const unsigned char *bp = NULL, *np = NULL;
    unsigned char *out = NULL;
    uint64_t wl = 0;
    delta_slot_cache_t *c;
    void *tmp = NULL;
    uint64_t dg = 0;
    wsync_status_t st = WSYNC_OK;
    int full;
    pthread_mutex_lock(&dc->lock);
    if ((c = cache_entry(dc, si, s->version, d->out.base, key, n)) == NULL) {
        pthread_mutex_unlock(&dc->lock);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for the delta cache");
    }
    if (c->wire[e->id]) {
        *wire = c->wire[e->id];
        *len = c->len[e->id];
        *dig = c->dig[e->id];
        return WSYNC_OK; /* locked */
    }
    pthread_mutex_unlock(&dc->lock);
    full = p->mem->kind == WSYNC_MEM_HOST && e->stage != PUB_PUT_FROM_SLOT &&
           packed_mostly_changed(p, s, &p->slots.slot[d->base_slot], l, e, width, &st);
    if (st == WSYNC_OK && !full)
        st = put_bytes(p, s, &p->slots.slot[d->base_slot], l, e, &np, &bp, &tmp);
    if (st == WSYNC_OK && !full)
        st = wsync_pull_deltas_encode(p->mem, &dc->dev, bp, np, e->len, width, e->dst_off, &out, &wl,
                                      l->np ? &dg : NULL);
    else
        wl = e->len + WSYNC_DELTA_HEADER; /* full */
    if (tmp)
        p->mem->free(tmp);
    if (st != WSYNC_OK) {
        free(out);
        return st;
    }
    pthread_mutex_lock(&dc->lock);
    if ((c = cache_entry(dc, si, s->version, d->out.base, key, n)) == NULL) {
        pthread_mutex_unlock(&dc->lock);
        free(out);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for the delta cache");
    }
    if (c->wire[e->id] == NULL) {
        c->wire[e->id] = out ? out : WIRE_FULL;
        c->len[e->id] = wl;
        c->dig[e->id] = dg;
    } else {
        free(out); /* another request encoded it meanwhile */
    }
    *wire = c->wire[e->id];
    *len = c->len[e->id];
    *dig = c->dig[e->id];
    return WSYNC_OK; /* locked */
}

int pub_delta_put(wsync_publisher_t *p, const pub_slot_t *s, pub_delta_req_t *d, const wsync_pull_request_t *q,
                  pub_request_t *r, int ti, pub_conn_t *conn, const pub_put_list_t *l, const pub_put_t *e,
                  uint64_t deadline)
{
    const wsync_transport_ops_t *ops = p->serving.transports[ti].ops;
    const int slot = e->stage == PUB_PUT_FROM_SLOT; /* else packed: from my whole share (FP8 bands too) */
    unsigned char *wire = NULL;
    uint64_t wl = 0, dig = 0, at = 0;
    wsync_status_t st;
    int placed;
    if (d == NULL || !d->pinned || e->len == 0 || e->len <= WSYNC_DELTA_HEADER)
        return 0;
    if (pub_wait_range(p, (pub_slot_t *)s, slot ? e->src : 0, slot ? e->len : UINT64_MAX, deadline) != WSYNC_OK)
        return 0; /* the full put's wait says why */
    pthread_mutex_unlock(&p->lock);
    st = get_wire(p, s, d, l, e, &wire, &wl, &dig);
    placed = st == WSYNC_OK && wire != WIRE_FULL && wsync_pull_deltas_place(&d->out, wire, wl, &at);
    if (st == WSYNC_OK)
        pthread_mutex_unlock(&p->serving.delta_cache->lock);
    pthread_mutex_lock(&p->lock);
    if (st != WSYNC_OK) {
        LOG_WARN("trainer rank %d: %s %u of version %llu goes full: encoding it against version %llu failed: "
                 "%s",
                 p->cfg.rank, l->np ? "put" : "piece", e->id, (unsigned long long)s->version,
                 (unsigned long long)d->out.base, wsync_last_error());
        return 0;
    }
    if (!placed) /* it goes full: its wire would not be smaller, or does not fit */
        return 0;
    r->outstanding++;
    if (wsync_pull_deltas_put(&d->out, ops, conn->conn, q, e->id, at, wl, e->len, l->np ? &dig : NULL) != WSYNC_OK) {
        r->outstanding--;
        if (r->status == WSYNC_OK) {
            r->status = WSYNC_ERR_PEER;
            snprintf(r->error, sizeof(r->error), "%s %u's delta wire (%llu bytes): %s", l->np ? "put" : "piece",
                     e->id, (unsigned long long)wl, wsync_last_error());
        }
        return 1;
    }
    r->nput++;
    r->bput += wl;
    return 1;
}

void pub_delta_reply(const pub_delta_req_t *d, const wsync_pull_request_t *q, wsync_pull_reply_t *out)
{
    wsync_pull_deltas_reply(d ? &d->out : NULL, q, out);
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
    wsync_pull_deltas_release(&d->out, p->serving.transports[ti].ops);
}

void pub_delta_free(pub_delta_req_t *d)
{
    if (d == NULL)
        return;
    wsync_pull_deltas_clear(&d->out);
    free(d);
}
