/* relay_serve.c: one request to an engine node's relay (relay.h), served on
 * its own sender: a tcp transport opened for it, the slot's memory
 * registered, one connection to the asking rank; each chunk landing on that
 * rank is put as soon as it is ready here, in chunk order (as delta wires
 * where the asker names a base the other slot holds: relay_delta.h), and
 * the answer comes once every put was handed to the network. A slot reused
 * meanwhile (the node pulls the next version into it) ends the request
 * with an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "common/proto/pull_reply.h"
#include "common/proto/pull_request.h"
#include "common/transport/transport.h"
#include "engine_side/board.h"
#include "engine_side/relay_delta.h"
#include "engine_side/relay_internal.h"

/* The sender id the receiver sees in its completions (trainer ranks use
 * 0..W-1): only ever named in messages. */
#define RELAY_SENDER_ID 1000000

/* One request being served. */
typedef struct relay_req {
    recv_relay_t *rl;
    wsync_pull_request_t q;
    int slot, src; /* the slot, and the local rank whose image it reads */
    int base_slot; /* the slot holding the base the asker named, pinned; -1: none (every piece full) */
    relay_delta_t *delta;
    uint32_t epoch;
    const wsync_transport_ops_t *ops;
    wsync_transport_t *t;
    wsync_region_t *region;
    wsync_conn_t *conn;
    size_t nput, nsent;
    uint64_t bytes, deadline;
    unsigned char *sent; /* [nchunks]: chunk put */
    char error[300];
} relay_req_t;

/* Takes what the transport finished; a failed put fails the request. */
static int reap(relay_req_t *rq, int timeout_ms)
{
    wsync_completion_t comps[64];
    int n = 0, i;
    if (rq->ops->poll(rq->t, comps, 64, &n, timeout_ms) != WSYNC_OK) {
        snprintf(rq->error, sizeof(rq->error), "%s", wsync_last_error());
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (comps[i].kind == WSYNC_COMPLETION_ERROR) {
            snprintf(rq->error, sizeof(rq->error), "put failed: %s", comps[i].message);
            return -1;
        }
        if (comps[i].kind == WSYNC_COMPLETION_SENT)
            rq->nsent++;
    }
    return 0;
}

/* Puts chunk c's spans (ready here). */
static int put_chunk(relay_req_t *rq, const relay_slot_t *s, uint32_t c)
{
    uint32_t i;
    for (i = s->chunk_first[c]; i < s->chunk_first[c + 1]; i++) {
        const relay_span_t *pc = &s->spans[i];
        uint64_t wl = pc->len;
        int sent = 0;
        if (pc->len == 0)
            continue;
        if (rq->delta) /* as its delta wire, when it pays (relay_delta.h) */
            sent = relay_delta_put(rq->delta, rq->ops, rq->conn, &rq->q, s->win[rq->src], pc->off, pc->len, pc->id,
                                   pc->width, s->targets != NULL, &wl);
        if (sent == 0 && rq->ops->put(rq->conn, rq->region, pc->off, &rq->q.key, pc->off, pc->len,
                                      ((uint64_t)rq->q.req << 32) | pc->id) != WSYNC_OK)
            sent = -1;
        if (sent < 0) {
            snprintf(rq->error, sizeof(rq->error), "put failed: %s", wsync_last_error());
            return -1;
        }
        rq->nput++;
        rq->bytes += wl;
    }
    return 0;
}

/* Chunk c may be forwarded: verified in local rank 0's image (whole image),
 * or marked landed on the board by the rank it lands on (engine layouts:
 * not verified yet, which every rank does at the end; the asker verifies
 * what it gets all the same). */
static int chunk_ready(const relay_slot_t *s, int slot, uint32_t c)
{
    return s->board ? board_is_landed(s->board, slot, c, s->gen) : s->verified[c];
}

/* Every chunk landing on the asking rank, each as soon as it is ready here
 * (under rl->lock, dropped while putting and waiting). */
static int put_all(relay_req_t *rq)
{
    recv_relay_t *rl = rq->rl;
    relay_slot_t *s = &rl->slots[rq->slot];
    uint32_t c, left = 0;
    for (c = 0; c < s->nchunks; c++)
        left += wsync_pull_request_lands(&rq->q, c) ? 1 : 0;
    while (left > 0) {
        struct timespec ts;
        int put = 0;
        if (rl->stopping || s->epoch != rq->epoch) {
            snprintf(rq->error, sizeof(rq->error), "%s",
                     rl->stopping ? "the relay is stopping" : "the node started pulling another version into it");
            return -1;
        }
        if (wsync_now_ns() >= rq->deadline) {
            snprintf(rq->error, sizeof(rq->error), "%u chunks were not verified here within the request's timeout",
                     left);
            return -1;
        }
        for (c = 0; c < s->nchunks; c++) {
            if (rq->sent[c] || !wsync_pull_request_lands(&rq->q, c) || !chunk_ready(s, rq->slot, c))
                continue;
            rq->sent[c] = 1;
            left--;
            put = 1;
            /* The slot is pinned: its pieces and bytes stay while unlocked. */
            pthread_mutex_unlock(&rl->lock);
            if (put_chunk(rq, s, c) != 0) {
                pthread_mutex_lock(&rl->lock);
                return -1;
            }
            pthread_mutex_lock(&rl->lock);
        }
        if (put) {
            if (rq->ops->put_flush)
                rq->ops->put_flush(rq->conn);
            continue;
        }
        pthread_mutex_unlock(&rl->lock);
        if (reap(rq, 0) != 0) {
            pthread_mutex_lock(&rl->lock);
            return -1;
        }
        pthread_mutex_lock(&rl->lock);
        wsync_abstime_after_ms(&ts, s->board ? 1 : 20); /* landed marks are polled, verified ones signalled */
        pthread_cond_timedwait(&rl->cond, &rl->lock, &ts);
    }
    return 0;
}

/* Opens the request's sender and connects to the asking rank (no lock held):
 * one connection, so the chunks it forwards arrive one after another, each
 * at the link's whole rate, and the asker can forward each in turn; over
 * several connections they would arrive several at a time, each at a share
 * of the rate, and every hop of a chain would wait for the slowest of them
 * (the tcp_conns setting, when given, still wins). */
static int open_sender(relay_req_t *rq, const relay_slot_t *s)
{
    wsync_transport_config_t cfg = {.device = rq->rl->kind == WSYNC_MEM_CUDA ? rq->rl->device : -1,
                                    .conns_per_peer = 1,
                                    .timeout_ms = wsync_connect_timeout_ms(0),
                                    .auth = &rq->rl->auth};
    wsync_blob_t key;
    if (wsync_transport_get("tcp", &cfg, &rq->ops) != WSYNC_OK || rq->ops->open(&cfg, &rq->t) != WSYNC_OK ||
        rq->ops->reg(rq->t, s->win[rq->src], s->win_len[rq->src], rq->rl->kind, &rq->region, &key) != WSYNC_OK ||
        rq->ops->connect(rq->t, &rq->q.addr, RELAY_SENDER_ID, &rq->conn) != WSYNC_OK) {
        snprintf(rq->error, sizeof(rq->error), "%s", wsync_last_error());
        return -1;
    }
    return 0;
}

static void close_sender(relay_req_t *rq)
{
    if (rq->conn)
        rq->ops->disconnect(rq->conn); /* no put reads the slot after this */
    relay_delta_release(rq->delta, rq->ops);
    if (rq->region)
        rq->ops->dereg(rq->region);
    if (rq->t)
        rq->ops->close(rq->t);
}

/* The asker's node holds what this one does: the whole image, or the same
 * targets on the same local ranks (so the same node plan: the same puts at
 * the same offsets); sets the image it reads. 0, or -1 with rq->error. */
static int same_targets(relay_req_t *rq, const relay_slot_t *s)
{
    const wsync_pull_request_t *q = &rq->q;
    uint32_t c;
    rq->src = 0;
    if (s->targets == NULL && q->ntargets == 0)
        return 0;
    if (s->targets == NULL || q->ntargets != s->L || memcmp(q->targets, s->targets, (size_t)s->L * 33) != 0 ||
        q->hint_world != 0) {
        snprintf(rq->error, sizeof(rq->error),
                 "this node holds %s, the asker's %d local ranks hold %s%s: a relay serves nodes with the same "
                 "targets only",
                 s->targets ? "other targets" : "the whole image", q->local_ranks,
                 q->ntargets ? "targets" : "the whole image", q->hint_world ? " by a colocated landing hint" : "");
        return -1;
    }
    if (wsync_pull_request_check_chunks(q, s->nchunks) != WSYNC_OK) {
        snprintf(rq->error, sizeof(rq->error), "%s", wsync_last_error());
        return -1;
    }
    for (c = 0; c < s->nchunks; c++)
        if (wsync_pull_request_lands(q, c) && s->land[c] != q->local_rank) {
            snprintf(rq->error, sizeof(rq->error),
                     "chunk %u lands on local rank %d here, the asker's plan lands it "
                     "on %d",
                     c, s->land[c], q->local_rank);
            return -1;
        }
    rq->src = q->local_rank;
    return 0;
}

/* rl->lock held: the other slot when it holds the base the asker names, of
 * the same layout and targets (the same node plan), every chunk the asker
 * gets verified there (a node of targets: verified on every rank), in host
 * or GPU memory alike (both slots are the node's images of one kind),
 * delta_bases not 0 (relay_delta.h); else -1. */
static int find_base(const recv_relay_t *rl, const relay_req_t *rq, const relay_slot_t *s)
{
    const wsync_pull_request_t *q = &rq->q;
    int b = relay_find_slot(rl, q->base);
    uint32_t c;
    if (q->base == 0 || q->base >= q->version || q->delta_bytes < WSYNC_DELTA_HEADER ||
        wsync_setting_int(WSYNC_SET_DELTA_BASES) == 0 || b < 0 ||
        (rl->slots[b].targets == NULL) != (s->targets == NULL) || rl->slots[b].L != s->L ||
        (s->targets && memcmp(rl->slots[b].targets, s->targets, (size_t)s->L * 33) != 0) ||
        rl->slots[b].nchunks != s->nchunks || strcmp(rl->slots[b].ldig, s->ldig) != 0)
        return -1;
    for (c = 0; c < s->nchunks; c++)
        if (wsync_pull_request_lands(q, c) && !rl->slots[b].verified[c])
            return -1;
    return b;
}

/* Checks the request against the slot holding its version and pins it;
 * rl->lock held. 0, or -1 with rq->error set. */
static int pin_slot(relay_req_t *rq)
{
    recv_relay_t *rl = rq->rl;
    char held[64];
    relay_slot_t *s;
    rq->slot = relay_find_slot(rl, rq->q.version);
    if (rq->slot < 0) {
        relay_held_versions(rl, held, sizeof(held));
        snprintf(rq->error, sizeof(rq->error), "does not hold version %llu (holds: %s)",
                 (unsigned long long)rq->q.version, held);
        return -1;
    }
    s = &rl->slots[rq->slot];
    if (strcmp(rq->q.layout_digest, s->ldig) != 0) {
        snprintf(rq->error, sizeof(rq->error), "layout digest %s differs from the asker's %s", s->ldig,
                 rq->q.layout_digest);
        return -1;
    }
    if (same_targets(rq, s) != 0)
        return -1;
    rq->sent = calloc(s->nchunks + 1, 1);
    if (rq->sent == NULL) {
        snprintf(rq->error, sizeof(rq->error), "out of memory");
        return -1;
    }
    rq->epoch = s->epoch;
    s->pins++;
    rq->base_slot = find_base(rl, rq, s);
    if (rq->base_slot >= 0)
        rl->slots[rq->base_slot].pins++; /* its bytes stay until the wires are encoded (serve_pinned) */
    return 0;
}

static int serve_pinned(relay_req_t *rq)
{
    recv_relay_t *rl = rq->rl;
    relay_slot_t *s = &rl->slots[rq->slot];
    int rc;
    pthread_mutex_unlock(&rl->lock);
    rc = open_sender(rq, s);
    if (rc == 0 && rq->base_slot >= 0 &&
        relay_delta_begin(&rq->q, rq->q.base, rl->slots[rq->base_slot].win[rq->src], rl->kind, rl->device, rq->ops,
                          rq->t, &rq->delta) != WSYNC_OK)
        LOG_WARN("engine %s's relay: version %llu to engine %s rank %d goes in full pieces: %s", rl->engine_id,
                 (unsigned long long)rq->q.version, rq->q.engine, rq->q.local_rank, wsync_last_error());
    pthread_mutex_lock(&rl->lock);
    if (rc == 0)
        rc = put_all(rq);
    if (rq->base_slot >= 0) { /* every wire is in the request's buffer: the base is read no more */
        rl->slots[rq->base_slot].pins--;
        rq->base_slot = -1;
        pthread_cond_broadcast(&rl->cond);
    }
    pthread_mutex_unlock(&rl->lock);
    while (rc == 0 && rq->nsent < rq->nput) {
        if (wsync_now_ns() >= rq->deadline) {
            snprintf(rq->error, sizeof(rq->error), "puts did not complete in time");
            rc = -1;
        } else {
            rc = reap(rq, 20);
        }
    }
    close_sender(rq);
    pthread_mutex_lock(&rl->lock);
    return rc;
}

/* rl->lock held: the slot of version v, waiting for the node to begin
 * pulling it for up to relay_stall_ms (a node asked by its child before it
 * saw the version itself), or -1. */
static int wait_version(recv_relay_t *rl, uint64_t v)
{
    uint64_t end = wsync_now_ns() + (uint64_t)wsync_setting_int(WSYNC_SET_RELAY_STALL_MS) * 1000000ULL;
    int s;
    while ((s = relay_find_slot(rl, v)) < 0 && !rl->stopping && wsync_now_ns() < end) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 20);
        pthread_cond_timedwait(&rl->cond, &rl->lock, &ts);
    }
    return s;
}

void relay_serve_request(void *ctx, const json_t *req, json_t *reply)
{
    relay_req_t rq = {.rl = ctx, .base_slot = -1};
    recv_relay_t *rl = rq.rl;
    uint64_t v = (uint64_t)json_integer_value(json_object_get(req, "version"));
    uint32_t nchunks;
    int s, rc = -1;

    pthread_mutex_lock(&rl->lock);
    s = wait_version(rl, v);
    nchunks = s >= 0 ? rl->slots[s].nchunks : 0;
    pthread_mutex_unlock(&rl->lock);
    if (wsync_pull_request_from_json(req, nchunks, &rq.q) != WSYNC_OK) {
        snprintf(rq.error, sizeof(rq.error), "%s", wsync_last_error());
        goto answer;
    }
    if (strcmp(rq.q.transport, "tcp") != 0) {
        snprintf(rq.error, sizeof(rq.error), "relays put over tcp only (asked: %s)", rq.q.transport);
        goto answer;
    }
    rq.deadline = wsync_now_ns() + (uint64_t)(rq.q.timeout_ms > 0 ? rq.q.timeout_ms : 120000) * 1000000ULL;
    pthread_mutex_lock(&rl->lock);
    if ((rc = pin_slot(&rq)) == 0) {
        rc = serve_pinned(&rq);
        rl->slots[rq.slot].pins--;
        pthread_cond_broadcast(&rl->cond);
    }
    pthread_mutex_unlock(&rl->lock);
answer:
    if (rc == 0) {
        wsync_pull_reply_t ok = {.pieces = rq.nput, .bytes = rq.bytes};
        relay_delta_reply(rq.delta, &rq.q, &ok);
        if (wsync_pull_reply_write(&ok, reply) != WSYNC_OK)
            wsync_pull_reply_write_error(reply, "relay of engine %s: %s", rl->engine_id, wsync_last_error());
    } else {
        wsync_pull_reply_write_error(reply, "relay of engine %s at %s, version %llu, engine %s rank %d: %s",
                                     rl->engine_id, rl->addr, (unsigned long long)v, rq.q.engine, rq.q.local_rank,
                                     rq.error);
    }
    relay_delta_end(rq.delta, rl->engine_id, &rq.q);
    free(rq.sent);
    wsync_pull_request_clear(&rq.q);
}
