/* pull_server.c: serves engine pulls for a publisher. An engine rank sends one
 * request (version, its landing rank, its transport address and region key,
 * and the targets of its node's ranks when they hold engine layouts); this
 * rank admits it (the version's slot, the transport, the connection), lists
 * the puts it owes the asker (put_list.c: the pieces of the chunks landing
 * on it, or the node plan's puts of mine, pull_targets.c), puts them all in
 * the one put loop, each as soon as publish() has copied its bytes into the
 * slot, and answers when all were handed to the network (with targets, with
 * the digests of the asker's segments it owns). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/proto/pull_port.h"
#include "common/proto/pull_reply.h"
#include "common/proto/pull_request.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "trainer_side/publisher_internal.h"
#include "trainer_side/put_list.h"
#include "trainer_side/delta_serve.h"

static pub_request_t *find_request(wsync_publisher_t *p, uint32_t req)
{
    pub_request_t *r;
    for (r = p->serving.requests; r; r = r->next)
        if (r->req == req)
            return r;
    return NULL;
}

static void fail_request(pub_request_t *r, wsync_status_t st, const char *msg)
{
    if (r->status == WSYNC_OK) {
        r->status = st;
        snprintf(r->error, sizeof(r->error), "%s", msg);
    }
}

/* One per transport: routes completions to the requests they belong to. */
static void *poller_main(void *arg)
{
    wsync_publisher_t *p = ((void **)arg)[0];
    pub_transport_t *pt = ((void **)arg)[1];
    wsync_completion_t comps[64];
    free(arg);
    while (!__atomic_load_n(&p->serving.stopping, __ATOMIC_ACQUIRE)) {
        int n = 0, i;
        if (pt->ops->poll(pt->t, comps, 64, &n, 100) != WSYNC_OK) {
            usleep(1000);
            continue;
        }
        if (n == 0)
            continue;
        pthread_mutex_lock(&p->lock);
        for (i = 0; i < n; i++) {
            wsync_completion_t *c = &comps[i];
            pub_request_t *r = c->tag == ~0ULL ? NULL : find_request(p, (uint32_t)(c->tag >> 32));
            if (c->kind == WSYNC_COMPLETION_SENT && r) {
                r->outstanding--;
            } else if (c->kind == WSYNC_COMPLETION_ERROR) {
                if (r) {
                    r->outstanding--;
                    fail_request(r, c->status, c->message);
                } else {
                    for (r = p->serving.requests; r; r = r->next)
                        fail_request(r, c->status, c->message);
                }
            }
        }
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

/* The transport named `name`, opened on first use. Called with p->lock held. */
static wsync_status_t get_transport(wsync_publisher_t *p, const char *name, int *idx)
{
    wsync_transport_config_t cfg = {.bind_host = NULL,
                                    .conns_per_peer = 0,
                                    .device = -1,
                                    .timeout_ms = wsync_connect_timeout_ms(0),
                                    .auth = &p->auth};
    const wsync_transport_ops_t *ops;
    pub_transport_t *pt;
    void **arg;
    int i;

    for (i = 0; i < p->serving.ntransports; i++)
        if (strcmp(p->serving.transports[i].ops->name, name) == 0) {
            *idx = i;
            return WSYNC_OK;
        }
    if (p->serving.ntransports == PUB_MAX_TRANSPORTS)
        return wsync_error(WSYNC_ERR_INVALID, "too many transports");
    if (p->mem->kind == WSYNC_MEM_CUDA)
        cfg.device = p->device;
    WSYNC_CHECK(wsync_transport_get(name, &cfg, &ops));
    pt = &p->serving.transports[p->serving.ntransports];
    memset(pt, 0, sizeof(*pt));
    pt->ops = ops;
    WSYNC_CHECK(ops->open(&cfg, &pt->t));
    arg = malloc(2 * sizeof(void *));
    WSYNC_CHECK_ALLOC(arg);
    arg[0] = p;
    arg[1] = pt;
    if (pthread_create(&pt->poller, NULL, poller_main, arg) != 0) {
        free(arg);
        ops->close(pt->t);
        return wsync_error(WSYNC_ERR_IO, "cannot start the completion thread");
    }
    pt->poller_started = 1;
    *idx = p->serving.ntransports++;
    return WSYNC_OK;
}

/* Register a slot's memory with transport `ti` once. Called with p->lock held. */
static wsync_status_t slot_regions(wsync_publisher_t *p, pub_slot_t *s, int ti)
{
    pub_transport_t *pt = &p->serving.transports[ti];
    wsync_blob_t key;
    int a;
    if (s->regions[ti] == NULL) {
        s->regions[ti] = calloc((size_t)(s->nareas ? s->nareas : 1), sizeof(wsync_region_t *));
        WSYNC_CHECK_ALLOC(s->regions[ti]);
    }
    for (a = 0; a < s->nareas; a++)
        if (s->regions[ti][a] == NULL)
            WSYNC_CHECK(pt->ops->reg(pt->t, s->area_ptr[a], s->area_len[a], p->mem->kind, &s->regions[ti][a], &key));
    return WSYNC_OK;
}

/* A cached connection to the receiver at `addr`. Called with p->lock held. */
static void drop_conn(wsync_publisher_t *p, int ti, pub_conn_t *dead);

/* The connection to the receiver at `addr` (one per address, shared by the
 * pulls of that engine rank), with a user counted; put_conn() gives it back.
 * An engine rank that reset its transport after a failed attempt listens at
 * a new address: its old connection (`owner` matches, address differs) is
 * dropped, so connections stay one per engine rank instead of piling up
 * half-closed (measured: ~200 descriptors per 1000 versions before). */
static wsync_status_t get_conn(wsync_publisher_t *p, int ti, const json_t *addr_json, const wsync_blob_t *addr,
                               const char *owner, pub_conn_t **out)
{
    pub_transport_t *pt = &p->serving.transports[ti];
    const char *key = json_string_value(addr_json);
    pub_conn_t *c, *other, *next;
    wsync_status_t st;
    for (c = pt->conns; c; c = c->next)
        if (strcmp(c->key, key) == 0 && !c->stale) {
            c->users++;
            *out = c;
            return WSYNC_OK;
        }
    for (c = pt->conns; c; c = next) {
        next = c->next;
        if (strcmp(c->owner, owner) == 0 && strcmp(c->key, key) != 0) {
            if (c->users == 0)
                drop_conn(p, ti, c);
            else
                c->stale = 1;
        }
    }
    c = calloc(1, sizeof(*c));
    WSYNC_CHECK_ALLOC(c);
    snprintf(c->key, sizeof(c->key), "%s", key);
    snprintf(c->owner, sizeof(c->owner), "%s", owner);
    /* Connecting can take the transport's whole timeout (a receiver that is
     * gone, a request that waited in the backlog while this rank was
     * stopped): never with p->lock held, which every other pull and
     * publish() need. */
    pthread_mutex_unlock(&p->lock);
    st = pt->ops->connect(pt->t, addr, p->cfg.rank, &c->conn);
    pthread_mutex_lock(&p->lock);
    if (st != WSYNC_OK) {
        free(c);
        return WSYNC_ERR_PEER;
    }
    for (other = pt->conns; other; other = other->next)
        if (strcmp(other->key, key) == 0 && !other->stale) { /* another pull connected meanwhile */
            pt->ops->disconnect(c->conn);
            free(c);
            other->users++;
            *out = other;
            return WSYNC_OK;
        }
    c->users = 1;
    c->next = pt->conns;
    pt->conns = c;
    *out = c;
    return WSYNC_OK;
}

static void drop_conn(wsync_publisher_t *p, int ti, pub_conn_t *dead)
{
    pub_transport_t *pt = &p->serving.transports[ti];
    pub_conn_t **pp;
    for (pp = &pt->conns; *pp; pp = &(*pp)->next)
        if (*pp == dead) {
            *pp = dead->next;
            pt->ops->disconnect(dead->conn);
            free(dead);
            return;
        }
}

/* A pull is done with `c`; `failed`: its puts may still be queued, so no
 * later pull may use it (dropped now if no other pull does). */
static void put_conn(wsync_publisher_t *p, int ti, pub_conn_t *c, int failed)
{
    if (failed)
        c->stale = 1;
    if (--c->users == 0 && c->stale)
        drop_conn(p, ti, c);
}

/* Until my piece i is in slot s: publish() announces a version before it
 * copies it (snapshot.c). Called with p->lock held; on failure, why says it. */
static wsync_status_t wait_copied(wsync_publisher_t *p, pub_slot_t *s, size_t i, uint64_t deadline, char *why,
                                  size_t len)
{
    while (!s->copied[i]) {
        struct timespec ts;
        if (s->copy_status != WSYNC_OK) {
            snprintf(why, len, "version withdrawn: %.200s", p->slots.withdrawn_why);
            return s->copy_status;
        }
        if (p->serving.stopping) {
            snprintf(why, len, "the publisher is shutting down");
            return WSYNC_ERR_PEER;
        }
        if (wsync_now_ns() >= deadline) {
            snprintf(why, len, "piece %u was not copied into the publish slot within the request's timeout",
                     p->share.my_pieces[i]);
            return WSYNC_ERR_TIMEOUT;
        }
        wsync_abstime_after_ms(&ts, 20);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    return WSYNC_OK;
}

wsync_status_t pub_wait_range(wsync_publisher_t *p, pub_slot_t *s, uint64_t off, uint64_t len, uint64_t deadline)
{
    const wsync_plan_t *plan = p->sl->plan;
    char why[400];
    size_t lo = 0, hi = p->share.nmy, i;
    while (lo < hi) { /* the first piece of mine ending after off (mine are in offset order) */
        size_t mid = lo + (hi - lo) / 2;
        const wsync_piece_t *pc = &plan->pieces[p->share.my_pieces[mid]];
        if (pc->offset + pc->len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (i = lo; i < p->share.nmy && plan->pieces[p->share.my_pieces[i]].offset < off + len; i++) {
        wsync_status_t st = wait_copied(p, s, i, deadline, why, sizeof(why));
        if (st != WSYNC_OK)
            return wsync_error(st, "%s", why);
    }
    return WSYNC_OK;
}

static int find_slot(wsync_publisher_t *p, uint64_t version)
{
    int s;
    for (s = 0; s < PUB_NSLOTS; s++)
        if (p->slots.slot[s].version == version && version != 0)
            return s;
    return -1;
}

/* Every failure of a serve names the peer as the engine shows it (this rank,
 * the version, the engine rank asking), then what was wrong or missing. */
static void __attribute__((format(printf, 4, 5)))
answer_error(json_t *reply, const wsync_publisher_t *p, const wsync_pull_request_t *q, const char *fmt, ...)
{
    char what[900], msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof(msg), "trainer rank %d, version %llu, engine %s rank %d: %s", p->cfg.rank,
             (unsigned long long)q->version, q->engine, q->local_rank, what);
    wsync_pull_reply_write_error(reply, "%s", msg);
}

/* Admits the request under p->lock: its version's slot (pinned), the
 * transport and the connection to the asker. On failure why says what. */
static wsync_status_t admit(wsync_publisher_t *p, const json_t *req, const wsync_pull_request_t *q,
                            pub_slot_t **sp, int *ti, pub_conn_t **conn, char *why, size_t len)
{
    const int slot = find_slot(p, q->version);
    char owner[160];
    pub_slot_t *s;
    if (slot < 0 && p->slots.withdrawn == q->version) {
        snprintf(why, len, "the version was withdrawn: %s", p->slots.withdrawn_why);
        return WSYNC_ERR_NOT_FOUND;
    }
    if (slot < 0) {
        snprintf(why, len, "this rank no longer holds the version (newest: %llu)",
                 p->slots.latest >= 0 ? (unsigned long long)p->slots.slot[p->slots.latest].version : 0ULL);
        return WSYNC_ERR_NOT_FOUND;
    }
    if (find_request(p, q->req)) {
        snprintf(why, len, "request id %u already in use; retry", q->req);
        return WSYNC_ERR_INVALID;
    }
    s = &p->slots.slot[slot];
    if (get_transport(p, q->transport, ti) != WSYNC_OK || slot_regions(p, s, *ti) != WSYNC_OK) {
        snprintf(why, len, "transport %s: %s", q->transport, wsync_last_error());
        return WSYNC_ERR_IO;
    }
    /* Pinned before get_conn drops the lock to connect: publish() must not
     * take this slot meanwhile. */
    s->pins++;
    snprintf(owner, sizeof(owner), "%s/%d", q->engine, q->local_rank);
    if (get_conn(p, *ti, json_object_get(req, "addr"), &q->addr, owner, conn) != WSYNC_OK) {
        snprintf(why, len, "cannot connect to its %s transport: %s", q->transport, wsync_last_error());
        s->pins--;
        pthread_cond_broadcast(&p->cond);
        return WSYNC_ERR_PEER;
    }
    *sp = s;
    return WSYNC_OK;
}

/* After the puts (p->lock held): with targets, the digests of the asker's
 * segments I own (the lock released meanwhile, the slot pinned), but for a
 * node of identity targets, which verifies against the record's piece
 * digests (no_segment_digests); then until the transport confirmed every
 * put sent. */
static void finish_puts(wsync_publisher_t *p, pub_slot_t *s, const pub_treq_t *tr, const wsync_pull_request_t *q,
                        pub_request_t *r, int ti, pub_conn_t *conn, uint64_t deadline)
{
    if (p->serving.transports[ti].ops->put_flush)
        p->serving.transports[ti].ops->put_flush(conn->conn);
    if (q->ntargets && q->no_segment_digests)
        wsync_trace("trainer rank %d: engine %s rank %d, version %llu: no segment digests (identity targets: the "
                    "record's piece digests verify them)",
                    p->cfg.rank, q->engine, q->local_rank, (unsigned long long)q->version);
    if (q->ntargets && !q->no_segment_digests && r->status == WSYNC_OK) {
        /* Digested from my whole share, copied (FP8 bands are quantized
         * from it too, fp8_quant.c): a request of digests alone (a relayed
         * node, an empty chunk map) waited for no put's range, and digests
         * taken while the publish still copies are wrong, and cached. */
        wsync_status_t st = pub_wait_range(p, s, 0, UINT64_MAX, deadline);
        if (st != WSYNC_OK) {
            fail_request(r, st, wsync_last_error());
            goto wait;
        }
        r->segments = json_object();
        pthread_mutex_unlock(&p->lock);
        st = r->segments ? pub_targets_digests(p, s, tr, q->version, q->put_digests, r->segments) : WSYNC_ERR_NOMEM;
        wsync_trace("trainer rank %d: engine %s rank %d: segment digests", p->cfg.rank, q->engine, q->local_rank);
        pthread_mutex_lock(&p->lock);
        if (st != WSYNC_OK)
            fail_request(r, st, wsync_last_error());
    }
wait:
    while (r->outstanding > 0 && r->status == WSYNC_OK && wsync_now_ns() < deadline && !p->serving.stopping) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 20);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    if (r->outstanding > 0 && r->status == WSYNC_OK)
        fail_request(r, p->serving.stopping ? WSYNC_ERR_PEER : WSYNC_ERR_TIMEOUT,
                     p->serving.stopping
                         ? "the publisher is shutting down"
                         : "the transport did not confirm every put sent within the request's timeout");
}

/* The answer (common/proto/pull_reply.h): what was put, and with targets the
 * digests of the asker's segments I own; or what failed and how far the puts
 * got. */
static void answer(json_t *reply, const wsync_publisher_t *p, const wsync_pull_request_t *q,
                   const pub_put_list_t *l, const pub_request_t *r)
{
    wsync_pull_reply_t ok = {.pieces = r->nput, .bytes = r->bput};
    json_t *segs = r->segments ? json_object_get(r->segments, "segments") : NULL;
    json_t *puts = r->segments ? json_object_get(r->segments, "puts") : NULL;
    char done[200];
    if (r->status != WSYNC_OK) {
        answer_error(reply, p, q, "%s; %s", r->error, pub_put_list_progress(l, r, done, sizeof(done)));
        return;
    }
    if (r->segments && puts)
        ok.puts = json_incref(puts);
    else if (r->segments)
        ok.segments = segs ? json_incref(segs) : json_object();
    pub_delta_reply(r->delta, q, &ok);
    if (wsync_pull_reply_write(&ok, reply) != WSYNC_OK)
        answer_error(reply, p, q, "%s", wsync_last_error());
    json_decref(ok.segments);
    json_decref(ok.puts);
}

/* Serve one pull, `q` parsed from `req`; fills `reply`. Whole image or
 * targets, the request becomes a list of puts that the one loop puts
 * (put_list.c); only the list and, with targets, the segment digests of
 * the answer differ. */
static void serve_request(wsync_publisher_t *p, const json_t *req, const wsync_pull_request_t *q, json_t *reply)
{
    pub_request_t r = {.req = q->req, .status = WSYNC_OK};
    pub_treq_t tr = {0};
    pub_put_list_t l = {0};
    pub_conn_t *conn = NULL;
    pub_slot_t *s = NULL;
    uint64_t deadline;
    char why[700];
    int ti = 0;

    if (strcmp(q->layout_digest, p->sl->layout_digest) != 0) {
        answer_error(reply, p, q, "layout digest %s differs from the engine's %s", p->sl->layout_digest,
                     q->layout_digest);
        return;
    }
    /* Test hook (common/base/fault.h): hold the request a while, so a test can
     * kill this rank while an engine waits on it. */
    if (wsync_fault(WSYNC_FAULT_SERVE_DELAY_MS) > 0)
        usleep((useconds_t)wsync_fault(WSYNC_FAULT_SERVE_DELAY_MS) * 1000);
    if ((q->ntargets && pub_targets_resolve(p, q, &tr) != WSYNC_OK) ||
        (q->ntargets ? pub_put_list_targets(p, &tr, q, &l) : pub_put_list_pieces(p, q, &l)) != WSYNC_OK) {
        answer_error(reply, p, q, "%s", wsync_last_error());
        return;
    }
    pthread_mutex_lock(&p->lock);
    if (admit(p, req, q, &s, &ti, &conn, why, sizeof(why)) != WSYNC_OK) {
        pthread_mutex_unlock(&p->lock);
        answer_error(reply, p, q, "%s", why);
        pub_put_list_clear(&l);
        return;
    }
    if (pub_delta_begin(p, q, s, ti, &r.delta) != WSYNC_OK)
        LOG_WARN("trainer rank %d: every piece of version %llu for engine %s rank %d goes full: %s", p->cfg.rank,
                 (unsigned long long)q->version, q->engine, q->local_rank, wsync_last_error());
    r.next = p->serving.requests;
    p->serving.requests = &r;
    deadline = wsync_now_ns() + (uint64_t)(q->timeout_ms > 0 ? q->timeout_ms : 120000) * 1000000ULL;
    wsync_trace("trainer rank %d: serving engine %s rank %d: %zu puts", p->cfg.rank, q->engine, q->local_rank,
                pub_put_list_len(&l));
    pub_put_list_run(p, s, &l, q, &r, ti, conn, deadline);
    wsync_trace("trainer rank %d: engine %s rank %d: puts handed (%zu of them gathered straight into its window)",
                p->cfg.rank, q->engine, q->local_rank, r.ndirect);
    pub_delta_unpin(p, r.delta);
    finish_puts(p, s, &tr, q, &r, ti, conn, deadline);
    wsync_trace("trainer rank %d: engine %s rank %d: puts sent, answering", p->cfg.rank, q->engine, q->local_rank);
    /* Failed: puts may still be queued on this connection; it is dropped
     * (at once unless another pull uses it) so none reaches the engine
     * after this answer. */
    put_conn(p, ti, conn, r.status != WSYNC_OK || r.outstanding > 0);
    {
        pub_request_t **pp;
        for (pp = &p->serving.requests; *pp; pp = &(*pp)->next)
            if (*pp == &r) {
                *pp = r.next;
                break;
            }
    }
    pub_stage_release(p, r.stage); /* no put reads it any more: answered, or the connection dropped */
    pub_delta_release(p, r.delta, ti);
    s->pins--;
    p->serving.pulls_ended++; /* the engine reports what it pulled next: wait_held looks (hold.c) */
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    answer(reply, p, q, &l, &r);
    pub_delta_free(r.delta);
    json_decref(r.segments);
    pub_put_list_clear(&l);
}

/* Parse the request (a malformed one is answered with what is wrong), then
 * serve it; or a peer's request for FP8 block maxima. */
static void serve(void *ctx, const json_t *req, json_t *reply)
{
    wsync_publisher_t *p = ctx;
    wsync_pull_request_t q;
    char msg[400];
    if (json_object_get(req, "fp8_amax")) { /* a peer trainer rank's (fp8_amax.c) */
        pub_fp8_amax_serve(p, json_object_get(req, "fp8_amax"), reply);
        return;
    }
    if (wsync_pull_request_from_json(req, p->sl->plan->nchunks, &q) != WSYNC_OK) { /* targets: checked later */
        snprintf(msg, sizeof(msg), "trainer rank %d: %s", p->cfg.rank, wsync_last_error());
        wsync_pull_reply_write_error(reply, "%s", msg);
        return;
    }
    serve_request(p, req, &q, reply);
    wsync_pull_request_clear(&q);
}

wsync_status_t pub_server_start(wsync_publisher_t *p)
{
    char who[64];
    snprintf(who, sizeof(who), "trainer rank %d", p->cfg.rank);
    WSYNC_CHECK(wsync_pull_port_start(p->cfg.listen, &p->auth, who, serve, p, &p->serving.port));
    p->serving.listen_port = wsync_pull_port_number(p->serving.port);
    return WSYNC_OK;
}

void pub_server_stop(wsync_publisher_t *p)
{
    int i;
    if (p->serving.port == NULL)
        return;
    /* Requests being served see `stopping` (they wait on p->cond) and answer. */
    pthread_mutex_lock(&p->lock);
    __atomic_store_n(&p->serving.stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    wsync_pull_port_stop(p->serving.port);
    p->serving.port = NULL;
    for (i = 0; i < p->serving.ntransports; i++) {
        pub_transport_t *pt = &p->serving.transports[i];
        if (pt->poller_started)
            pthread_join(pt->poller, NULL);
        while (pt->conns)
            drop_conn(p, i, pt->conns);
    }
    pub_delta_cache_free(p);
}
