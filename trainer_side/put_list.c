/* put_list.c: the one put loop of a trainer rank. A pull request, whole image
 * or naming targets, becomes a list of puts (put_list.h); one loop puts them,
 * whatever the request, the memory (host or GPU), the slot (a publish slot,
 * or the caller's own extents for a single-copy version) or the transport.
 *
 * Why a list and not the identity node plan. A whole image is the identity
 * target, and its node plan's puts are exactly the plan's pieces
 * (target_plan.h), so the loop could serve it from a node plan. But a
 * whole-image request does not say the node's local ranks nor its landing
 * hint: it carries the landing map itself (which chunks land on the asker),
 * so a node plan's landing ranks would be ignored, and building one per
 * layout costs a pass over every tensor and runs kept per piece, to get back
 * plan.h's pieces. What both kinds of request share is what a put is: a
 * contiguous range of the asker's image, a tag, a chunk, and where its bytes
 * are (a range of the slot, or a place in the stage of packed puts). So each
 * kind lists its puts (pieces, or the node plan's puts of mine) and everything
 * after that (waiting for the slot's copy, packing, in-order issue, the puts,
 * what a failure says) is this file's, once. */
#include "trainer_side/put_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "common/targets/target_verify.h"
#include "trainer_side/delta_serve.h"

void pub_put_list_clear(pub_put_list_t *l)
{
    free(l->puts);
    free(l->packed);
    memset(l, 0, sizeof(*l));
}

static int by_source(const pub_put_t *x, const pub_put_t *y)
{
    int xs = x->stage != PUB_PUT_FROM_SLOT, ys = y->stage != PUB_PUT_FROM_SLOT;
    if (xs != ys) /* from the slot first: the stage needs my whole share copied */
        return xs - ys;
    if (xs)
        return x->stage < y->stage ? -1 : x->stage > y->stage;
    return x->src < y->src ? -1 : x->src > y->src;
}

static int by_source_cmp(const void *a, const void *b)
{
    return by_source(a, b);
}

static int by_chunk_cmp(const void *a, const void *b)
{
    const pub_put_t *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    return by_source(x, y);
}

/* In order (a sparse image frees each chunk once it is complete): chunk by
 * chunk, within a chunk the slot's puts first. Else the slot's puts in source
 * order (the order the copy into the slot goes), then the packed ones. */
static void list_order(pub_put_list_t *l, int in_order)
{
    qsort(l->puts, l->n, sizeof(*l->puts), in_order ? by_chunk_cmp : by_source_cmp);
}

static wsync_status_t list_alloc(pub_put_list_t *l, size_t n, size_t npacked)
{
    memset(l, 0, sizeof(*l));
    l->puts = calloc(n + 1, sizeof(*l->puts));
    l->packed = calloc(npacked + 1, sizeof(*l->packed));
    if (l->puts == NULL || l->packed == NULL) {
        pub_put_list_clear(l);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory listing %zu puts", n);
    }
    return WSYNC_OK;
}

wsync_status_t pub_put_list_pieces(const wsync_publisher_t *p, const wsync_pull_request_t *q, pub_put_list_t *out)
{
    memset(out, 0, sizeof(*out));
    out->plan = p->sl->plan;
    out->pieces = p->share.my_pieces;
    out->npieces = p->share.nmy;
    out->q = q;
    return WSYNC_OK;
}

size_t pub_put_list_len(const pub_put_list_t *l)
{
    return l->pieces ? l->npieces : l->n;
}

int pub_put_list_at(const pub_put_list_t *l, size_t k, pub_put_t *e)
{
    const wsync_piece_t *pc;
    if (l->pieces == NULL) {
        *e = l->puts[k];
        return 1;
    }
    pc = &l->plan->pieces[l->pieces[k]];
    if (pc->len == 0 || !wsync_pull_request_lands(l->q, pc->chunk))
        return 0;
    *e = (pub_put_t){.src = pc->offset,
                     .dst_off = pc->offset,
                     .len = pc->len,
                     .id = pc->id,
                     .chunk = pc->chunk,
                     .stage = PUB_PUT_FROM_SLOT};
    return 1;
}

wsync_status_t pub_put_list_targets(const wsync_publisher_t *p, const pub_treq_t *tr,
                                    const wsync_pull_request_t *q, pub_put_list_t *out)
{
    const wsync_node_plan_t *np = tr->np;
    const int me = p->cfg.rank;
    const size_t mine = np->rank_nputs[me];
    size_t k;
    WSYNC_CHECK(list_alloc(out, mine, mine));
    out->np = np;
    out->stage_key = tr->plan;
    for (k = 0; k < mine; k++) { /* in put id order: by chunk, then destination */
        const wsync_tput_t *pu = &np->puts[np->rank_puts[me][k]];
        pub_put_t *e = &out->puts[out->n];
        if (pu->land_rank != q->local_rank || !wsync_pull_request_lands(q, pu->chunk) || pu->len == 0)
            continue;
        *e = (pub_put_t){.dst_off = pu->dst_off, .len = pu->len, .id = pu->id, .chunk = pu->chunk};
        /* FP8 codes and scales are no slot bytes: always from the stage. */
        if (wsync_runs_contiguous(&np->runs[pu->first_run], pu->nruns, &e->src) &&
            !wsync_fp8_is_quantized(p->sl->manifest, e->src)) {
            e->stage = PUB_PUT_FROM_SLOT;
        } else {
            e->stage = (uint32_t)out->npacked;
            out->packed[out->npacked++] = pu->id;
        }
        out->n++;
    }
    list_order(out, q->in_order);
    return WSYNC_OK;
}

const char *pub_put_list_progress(const pub_put_list_t *l, const pub_request_t *r, char *buf, size_t len)
{
    char a[32], b[32];
    size_t k, n = 0;
    uint64_t bytes = 0;
    pub_put_t e;
    for (k = 0; k < pub_put_list_len(l); k++)
        if (pub_put_list_at(l, k, &e)) {
            n++;
            bytes += e.len;
        }
    snprintf(buf, len, "%zu of %zu puts (%s of %s) handed to the transport, %d of them not confirmed sent", r->nput,
             n, wsync_fmt_size(r->bput, a, sizeof(a)), wsync_fmt_size(bytes, b, sizeof(b)), r->outstanding);
    return buf;
}

/* Records the first failure, naming the put it stopped at. */
static void fail(const pub_put_list_t *l, pub_request_t *r, wsync_status_t st, const pub_put_t *e, const char *what)
{
    if (r->status != WSYNC_OK)
        return;
    r->status = st;
    snprintf(r->error, sizeof(r->error), "%s %u (%llu bytes at offset %llu of its image, chunk %u): %s",
             l->np ? "put" : "piece", e->id, (unsigned long long)e->len, (unsigned long long)e->dst_off, e->chunk,
             what);
}

/* Until none of r's puts is in flight, the last one handed to the transport's
 * socket or adapter, so the engine's chunks fill one after another instead of
 * one per connection and a sparse image holds about one chunk per trainer
 * rank. Called with p->lock held. */
static wsync_status_t one_in_flight(wsync_publisher_t *p, pub_request_t *r, int ti, pub_conn_t *conn,
                                    uint64_t deadline)
{
    if (r->outstanding > 0 && p->serving.transports[ti].ops->put_flush)
        p->serving.transports[ti].ops->put_flush(conn->conn);
    while (r->outstanding > 0 && r->status == WSYNC_OK) {
        struct timespec ts;
        if (wsync_now_ns() > deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "the put before it was not sent within the request's timeout");
        if (__atomic_load_n(&p->serving.stopping, __ATOMIC_ACQUIRE))
            return wsync_error(WSYNC_ERR_PEER, "the publisher is shutting down");
        wsync_abstime_after_ms(&ts, 20);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    return r->status;
}

/* Where put e's bytes are: the slot's registered area holding its source
 * (once the pieces under it are copied), or the stage (packed with this
 * version when the first packed put goes). */
static wsync_status_t locate(wsync_publisher_t *p, pub_slot_t *s, const pub_put_list_t *l,
                             const wsync_pull_request_t *q, pub_request_t *r, int ti, const pub_put_t *e,
                             uint64_t deadline, wsync_region_t **region, uint64_t *off)
{
    const pub_span_t *sp;
    if (e->stage != PUB_PUT_FROM_SLOT) {
        if (r->stage == NULL) {
            wsync_status_t st;
            wsync_trace("trainer rank %d: first packed put: waiting for the slot", p->cfg.rank);
            WSYNC_CHECK(pub_wait_range(p, s, 0, UINT64_MAX, deadline));
            wsync_trace("trainer rank %d: slot copied", p->cfg.rank);
            pthread_mutex_unlock(&p->lock); /* s is pinned */
            st = pub_fp8_ensure(p, s, l->np);
            pthread_mutex_lock(&p->lock);
            WSYNC_CHECK(st);
            WSYNC_CHECK(
                pub_stage_acquire(p, s, l->stage_key, l->np, q->local_rank, l->packed, l->npacked, ti, &r->stage));
            wsync_trace("trainer rank %d: stage packed", p->cfg.rank);
        }
        *region = pub_stage_region(r->stage, ti);
        *off = pub_stage_offset(r->stage, e->stage);
        return WSYNC_OK;
    }
    sp = pub_span_at(p, s, e->src);
    if (sp == NULL || e->src + e->len > sp->offset + sp->len)
        return wsync_error(WSYNC_ERR_INVALID, "it reads image bytes [%llu, %llu), which this rank does not own",
                           (unsigned long long)e->src, (unsigned long long)(e->src + e->len));
    /* The copy into the slot goes in source order, so waiting put by put
     * puts each one as soon as it is copied. */
    WSYNC_CHECK(pub_wait_range(p, s, e->src, e->len, deadline));
    *region = s->regions[ti][sp->area];
    *off = sp->area_off + (e->src - sp->offset);
    return WSYNC_OK;
}

/* direct_pack: packed put e gathered straight into the asker's region by the
 * transport (ops->put_gather), its stage never packed. 1: handed to the
 * transport (counted in r), or failed (*st set); 0: not so (no setting, no
 * such op, FP8 bands, the corrupting test hook, no plan, or the transport
 * declined it): the caller puts it from the stage. Called with p->lock
 * held, dropped while the plan is first prepared (s is pinned). */
static int put_direct(wsync_publisher_t *p, pub_slot_t *s, const pub_put_list_t *l, const wsync_pull_request_t *q,
                      pub_request_t *r, int ti, pub_conn_t *conn, const pub_put_t *e, uint64_t deadline,
                      wsync_status_t *st)
{
    const wsync_transport_ops_t *ops = p->serving.transports[ti].ops;
    const wsync_tput_t *pu = &l->np->puts[e->id];
    const struct wsync_pack_plan *plan = NULL;
    wsync_status_t rc;
    int area = -1, ok;
    if (!wsync_setting_int(WSYNC_SET_DIRECT_PACK) || ops->put_gather == NULL || p->mem->kind != WSYNC_MEM_CUDA ||
        (pu->nruns && wsync_fp8_is_quantized(p->sl->manifest, l->np->runs[pu->first_run].src_off)) ||
        wsync_fault(WSYNC_FAULT_CORRUPT_PACKED) == 1)
        return 0;
    /* As the stage: after my whole share is copied (at once when single-copy). */
    if ((*st = pub_wait_range(p, s, 0, UINT64_MAX, deadline)) != WSYNC_OK)
        return 1;
    pthread_mutex_unlock(&p->lock);
    ok = pub_direct_plan(p, s, l->stage_key, e->id, &plan, &area);
    pthread_mutex_lock(&p->lock);
    if (!ok || s->regions[ti] == NULL || s->regions[ti][area] == NULL)
        return 0;
    r->outstanding++;
    rc = ops->put_gather(conn->conn, s->regions[ti][area], 0, plan, &q->key, e->dst_off, e->len,
                         ((uint64_t)r->req << 32) | e->id);
    if (rc == WSYNC_ERR_UNSUPPORTED) {
        r->outstanding--;
        return 0;
    }
    if (rc != WSYNC_OK) {
        r->outstanding--;
        *st = WSYNC_ERR_PEER;
        return 1;
    }
    r->nput++;
    r->bput += e->len;
    r->ndirect++;
    return 1;
}

void pub_put_list_run(wsync_publisher_t *p, pub_slot_t *s, const pub_put_list_t *l, const wsync_pull_request_t *q,
                      pub_request_t *r, int ti, pub_conn_t *conn, uint64_t deadline)
{
    const wsync_transport_ops_t *ops = p->serving.transports[ti].ops;
    const size_t n = pub_put_list_len(l);
    size_t k;
    for (k = 0; k < n && r->status == WSYNC_OK; k++) {
        pub_put_t e;
        wsync_region_t *region = NULL;
        uint64_t off = 0;
        wsync_status_t st = WSYNC_OK;
        if (!pub_put_list_at(l, k, &e))
            continue;
        if (q->in_order)
            st = one_in_flight(p, r, ti, conn, deadline);
        /* A pull naming a base: the piece or put as its delta wire, when it pays. */
        if (st == WSYNC_OK && r->delta && pub_delta_put(p, s, r->delta, q, r, ti, conn, l, &e, deadline))
            continue;
        if (st == WSYNC_OK && e.stage != PUB_PUT_FROM_SLOT &&
            put_direct(p, s, l, q, r, ti, conn, &e, deadline, &st)) {
            if (st != WSYNC_OK) {
                fail(l, r, st, &e, wsync_last_error());
                break;
            }
            continue;
        }
        if (st == WSYNC_OK)
            st = locate(p, s, l, q, r, ti, &e, deadline, &region, &off);
        if (st != WSYNC_OK) {
            fail(l, r, st, &e, wsync_last_error());
            break;
        }
        r->outstanding++;
        if (ops->put(conn->conn, region, off, &q->key, e.dst_off, e.len, ((uint64_t)r->req << 32) | e.id) !=
            WSYNC_OK) {
            r->outstanding--;
            fail(l, r, WSYNC_ERR_PEER, &e, wsync_last_error());
            break;
        }
        r->nput++;
        r->bput += e.len;
    }
}
