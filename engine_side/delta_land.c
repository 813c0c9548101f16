/* delta_land.c: delta pulls on a whole-image engine rank (delta_land.h).
 * Each trainer rank gets its own part of one staging region (a quarter of
 * the bytes it owes this rank, rounded up: a delta pays below that, and a
 * wire that does not fit goes full); its wires land there back to back and
 * its answer says where each one is. */
#include "engine_side/delta_land.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "common/delta/delta.h"
#include "common/delta/delta_mem.h"
#include "common/digest/digest.h"
#include "common/proto/pull_request.h"
#include "engine_side/plan_choice.h"

enum { P_LANDED = 1, P_PLACED = 2, P_APPLIED = 4, P_BAD = 8 }; /* P_BAD: its wire was refused */

typedef struct delta_reg {
    recv_transport_t *rt;
    wsync_region_t *region;
    wsync_blob_t key;
} delta_reg_t;

struct recv_delta {
    uint64_t base;
    const wsync_mem_ops_t *mem; /* where the image is: host memory or a GPU (delta_mem.h) */
    wsync_delta_dev_t *dev;     /* a GPU's buffers for the wires applied there */
    const char *held;           /* the base's bytes: the held slot's image */
    int staged;                 /* the pull lands in the other slot (else in the held bytes) */
    unsigned char *stage;
    uint64_t stage_len;
    uint64_t *area_at, *area_len; /* [world]: each trainer rank's part of the stage */
    delta_reg_t reg[RECV_MAX_TRANSPORTS];
    int nreg;
    unsigned char *state;    /* [npieces] P_* */
    uint64_t *wlen;          /* [npieces]: the wire's length as it landed */
    uint64_t *wat, *wbytes;  /* [npieces]: where the answer placed it */
    unsigned char *taken;    /* [world]: its answer read */
    recv_request_t *refetch; /* [world]: pieces asked again in full */
    unsigned char *want;     /* [world * chunk_bytes]: chunks to ask again */
    unsigned char *pending;  /* [world]: want has chunks not asked yet */
    unsigned char *failing;  /* [world]: a piece of the chunk being checked failed */
    size_t chunk_bytes;
    uint64_t owed;                                      /* bytes of the pieces landing here */
    uint64_t ndelta, wire_bytes, piece_bytes, nrefetch; /* applied: count, wire and piece bytes; failed */
    uint64_t refetch_bytes;                             /* put again in full */
    uint64_t failed_len, lost;                          /* failed pieces: their bytes, their wires' */
    int nkept, nasked;        /* trainer answers that kept the base; requests that named it */
    int nother;               /* requests over another transport than tcp (the local one: a copy beats a delta) */
    int relayed, relay_taken; /* the parent's relay asked for the wires (the whole stage), its answer read */
};

static void delta_free(recv_delta_t *d)
{
    wsync_delta_dev_free(d->mem, d->dev);
    free(d->stage);
    free(d->area_at);
    free(d->area_len);
    free(d->state);
    free(d->wlen);
    free(d->wat);
    free(d->wbytes);
    free(d->taken);
    free(d->refetch);
    free(d->want);
    free(d->pending);
    free(d->failing);
    free(d);
}

/* delta=auto with a links file: the cost model's choice for this rank's
 * pull of this version over tcp (plan_choice_delta), at the wire fraction
 * its last delta pull measured, or before one the delta_density setting's.
 * It costs this node's pull alone, from one trainer host. */
static int auto_wants(const fetch_t *f)
{
    const wsync_receiver_t *r = f->p.r;
    cost_deploy_t d;
    double delta_s, full_s;
    int yes;
    cost_deploy_init(&d, f->plan->world, 1, 1, r->cfg.local_world, f->plan->image_size, f->plan->chunk_size,
                     r->mem->kind == WSYNC_MEM_CUDA ? COST_MEM_GPU : COST_MEM_HOST, COST_NET_TCP);
    d.tcp_conns = (int)wsync_setting_int(WSYNC_SET_TCP_CONNS);
    d.delta_wire = r->delta_wire_seen > 0 ? r->delta_wire_seen : plan_choice_delta_wire();
    d.delta_base_copy = f->p.slot != r->cur_slot;
    yes = plan_choice_delta(r->links, &d, &delta_s, &full_s);
    LOG_INFO("engine %s rank %d: version %llu: delta auto chose %s: the cost model (%s) gives %.3f ms as deltas "
             "from version %llu (%.2f%% of the bytes on the wire, %s) against %.3f ms full",
             r->engine_id, f->p.me, (unsigned long long)f->p.v, yes ? "deltas" : "full pieces", r->links->machine,
             delta_s * 1e3, (unsigned long long)r->held_version, d.delta_wire * 100,
             r->delta_wire_seen > 0 ? "as the last delta pull measured" : "at the delta_density setting",
             full_s * 1e3);
    return yes;
}

/* Whether this attempt may ask for deltas: a verified version of the same
 * layout held here, older than the one pulled, whose bytes stay readable
 * (wsync's own images, host or GPU memory, no caller tensors), straight
 * from the trainers, with digests to check against. */
static int may_ask(const fetch_t *f)
{
    const wsync_receiver_t *r = f->p.r;
    if (wsync_setting_int(WSYNC_SET_DELTA) == 2) /* auto | on | off */
        return 0;
    if (f->ver.digests == NULL || f->dm || r->sparse || r->gpu_sparse || r->cfg.ndests > 0)
        return 0;
    if (r->held_version == 0 || r->held_version >= f->p.v || r->held == NULL ||
        strcmp(r->held->layout_digest, f->p.sl->layout_digest) != 0)
        return 0;
    if (f->p.slot != r->cur_slot && r->nslots != 2)
        return 0;
    return wsync_setting_int(WSYNC_SET_DELTA) != 0 || r->links == NULL || auto_wants(f);
}

/* Test hook: flip one byte of a piece of the held version, once per
 * process, so the next delta pull applies a wire to a wrong base. */
static void corrupt_held(const fetch_t *f, char *held)
{
    static int done;
    long long i = wsync_fault(WSYNC_FAULT_CORRUPT_HELD);
    const wsync_mem_ops_t *mem = f->p.r->mem;
    const wsync_piece_t *pc;
    char *at, b;
    if (i < 0 || done || (uint64_t)i >= f->plan->npieces)
        return;
    pc = &f->plan->pieces[i];
    if (!recv_pull_is_mine(&f->p, pc->chunk) || pc->len == 0)
        return;
    done = 1;
    at = held + pc->offset + pc->len / 2; /* host memory or the GPU's */
    if (mem->copy(&b, at, 1) != WSYNC_OK || (b ^= 0x01, mem->copy(at, &b, 1)) != WSYNC_OK)
        return;
    LOG_WARN("test hook: engine %s rank %d flipped a byte of piece %lld of version %llu, the base it holds",
             f->p.r->engine_id, f->p.me, i, (unsigned long long)f->p.r->held_version);
}

wsync_status_t recv_delta_begin(fetch_t *f)
{
    const wsync_plan_t *plan = f->plan;
    wsync_receiver_t *r = f->p.r;
    recv_delta_t *d;
    uint64_t at = 0;
    int t;
    size_t i;
    if (!may_ask(f))
        return WSYNC_OK;
    d = calloc(1, sizeof(*d));
    WSYNC_CHECK_ALLOC(d);
    d->chunk_bytes = ((size_t)plan->nchunks + 7) / 8;
    d->area_at = calloc((size_t)plan->world, sizeof(*d->area_at));
    d->area_len = calloc((size_t)plan->world, sizeof(*d->area_len));
    d->state = calloc(plan->npieces + 1, 1);
    d->wlen = calloc(plan->npieces + 1, sizeof(*d->wlen));
    d->wat = calloc(plan->npieces + 1, sizeof(*d->wat));
    d->wbytes = calloc(plan->npieces + 1, sizeof(*d->wbytes));
    d->taken = calloc((size_t)plan->world, 1);
    d->refetch = calloc((size_t)plan->world, sizeof(*d->refetch));
    d->want = calloc((size_t)plan->world * d->chunk_bytes + 1, 1);
    d->pending = calloc((size_t)plan->world, 1);
    d->failing = calloc((size_t)plan->world, 1);
    if (!d->failing || !d->area_at || !d->area_len || !d->state || !d->wlen || !d->wat || !d->wbytes ||
        !d->taken || !d->refetch || !d->want || !d->pending) {
        delta_free(d);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (t = 0; t < plan->world; t++) {
        uint64_t owed = 0;
        for (i = 0; i < plan->rank_npieces[t]; i++) {
            const wsync_piece_t *pc = &plan->pieces[plan->rank_pieces[t][i]];
            if (recv_pull_is_mine(&f->p, pc->chunk))
                owed += pc->len;
        }
        d->area_at[t] = at;
        d->area_len[t] = owed ? ((owed / 4 + 4095) & ~4095ULL) + 4096 : 0;
        at += d->area_len[t];
        d->owed += owed;
    }
    d->stage_len = at;
    d->stage = malloc(at ? at : 1); /* only the pages wires land on are touched */
    if (d->stage == NULL) {
        delta_free(d);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for a delta staging region of %llu bytes",
                           (unsigned long long)at);
    }
    d->base = r->held_version;
    d->mem = r->mem;
    d->held = r->win[r->cur_slot].ptr;
    d->staged = f->p.slot != r->cur_slot;
    corrupt_held(f, r->win[r->cur_slot].ptr);
    f->delta = d;
    return WSYNC_OK;
}

/* 0 if trainer rank t's registration in the version record says it keeps
 * fewer bases than `back` versions (delta_bases); 1 if it keeps them, or
 * says nothing (an older trainer: its answer tells). */
static int keeps(const fetch_t *f, int t, uint64_t back)
{
    json_t *arr = NULL, *e;
    size_t i;
    int yes = 1;
    if (recv_trainers(f->p.r, &arr) != WSYNC_OK)
        return 1;
    json_array_foreach(arr, i, e)
    {
        const json_t *k = json_object_get(json_object_get(e, "endpoint"), "delta_bases");
        if (json_integer_value(json_object_get(e, "rank")) == t && json_is_integer(k))
            yes = (uint64_t)json_integer_value(k) >= back;
    }
    json_decref(arr);
    return yes;
}

/* The request `msg` (over rt) names the base and the stage's bytes [at,
 * at + len) for its wires. */
static wsync_status_t ask(recv_delta_t *d, recv_transport_t *rt, uint64_t at, uint64_t len, json_t *msg)
{
    wsync_pull_request_t pr = {0};
    delta_reg_t *g = NULL;
    int k;
    for (k = 0; k < d->nreg; k++)
        if (d->reg[k].rt == rt)
            g = &d->reg[k];
    if (g == NULL) {
        if (d->nreg == RECV_MAX_TRANSPORTS)
            return WSYNC_OK;
        g = &d->reg[d->nreg];
        WSYNC_CHECK(
            rt->ops->reg(rt->t, d->stage, d->stage_len ? d->stage_len : 1, WSYNC_MEM_HOST, &g->region, &g->key));
        g->rt = rt;
        d->nreg++;
    }
    pr.base = d->base;
    pr.delta_key = g->key;
    pr.delta_at = at;
    pr.delta_bytes = len;
    if (wsync_pull_request_delta_to_json(&pr, msg) != 0)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    d->nasked++;
    return WSYNC_OK;
}

wsync_status_t recv_delta_ask(fetch_t *f, int t, recv_transport_t *rt, json_t *msg)
{
    recv_delta_t *d = f->delta;
    if (d != NULL && d->area_len[t] > 0 && strcmp(rt->ops->name, "tcp") != 0)
        d->nother++;
    if (d == NULL || d->area_len[t] == 0 || strcmp(rt->ops->name, "tcp") != 0 || !keeps(f, t, f->p.v - d->base))
        return WSYNC_OK;
    return ask(d, rt, d->area_at[t], d->area_len[t], msg);
}

wsync_status_t recv_delta_ask_relay(fetch_t *f, recv_transport_t *rt, json_t *msg)
{
    recv_delta_t *d = f->delta;
    if (d == NULL || d->stage_len == 0)
        return WSYNC_OK;
    d->relayed = 1;
    return ask(d, rt, 0, d->stage_len, msg);
}

/* Ask trainer rank t again for every piece of chunk c, in full (sent by
 * recv_delta_poll): they count as missing again. */
static void refetch(fetch_t *f, uint32_t c, int t)
{
    recv_delta_t *d = f->delta;
    uint32_t i;
    for (i = f->plan->chunk_first[c]; i < f->plan->chunk_first[c + 1]; i++)
        if (f->plan->pieces[i].src_rank == t) {
            f->p.remaining[c]++;
            d->state[i] = 0;
            d->refetch_bytes += f->plan->pieces[i].len;
        }
    d->want[(size_t)t * d->chunk_bytes + c / 8] |= (unsigned char)(1u << (c % 8));
    d->pending[t] = 1;
}

/* Piece i's wire landed and placed: onto the base's bytes (copied from the
 * held slot when staged), then it counts as landed. */
static wsync_status_t apply(fetch_t *f, uint32_t i)
{
    recv_delta_t *d = f->delta;
    const wsync_piece_t *pc = &f->plan->pieces[i];
    const int t = pc->src_rank;
    char *dst = f->image + pc->offset;
    wsync_status_t st = WSYNC_ERR_FORMAT;
    if (d->wlen[i] == d->wbytes[i]) {
        st = d->staged ? d->mem->copy(dst, d->held + pc->offset, pc->len) : WSYNC_OK;
        if (st == WSYNC_OK)
            st = wsync_delta_mem_apply(d->mem, &d->dev, dst, pc->len, d->stage + d->wat[i], d->wbytes[i]);
    } else {
        wsync_error(st, "%llu bytes landed, the answer says %llu", (unsigned long long)d->wlen[i],
                    (unsigned long long)d->wbytes[i]);
    }
    if (st != WSYNC_OK) /* it counts as landed; its chunk's check asks for it again (recv_delta_verify) */
        LOG_WARN("engine %s rank %d: piece %u (trainer rank %d) of version %llu: its delta wire from version %llu"
                 "%s%s was refused (%s): re-fetching it in full",
                 f->p.r->engine_id, f->p.me, i, t, (unsigned long long)f->p.v, (unsigned long long)d->base,
                 d->relayed ? " through the relay of engine " : "", d->relayed ? f->p.relay.id : "",
                 wsync_last_error());
    d->state[i] = P_APPLIED | (st != WSYNC_OK ? P_BAD : 0);
    f->ver.has_put_sum[i] = 0; /* no put sum covers it: its chunk takes a digest pass */
    if (st == WSYNC_OK) {
        d->ndelta++;
        d->wire_bytes += d->wbytes[i];
        d->piece_bytes += pc->len;
    }
    f->p.last_landed = wsync_now_ns();
    if (--f->p.remaining[pc->chunk] > 0)
        return WSYNC_OK;
    return f->p.ops->chunk_landed(&f->p, pc->chunk);
}

wsync_status_t recv_delta_landed(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp)
{
    fetch_t *f = container_of(p, fetch_t, p);
    recv_delta_t *d = f->delta;
    const wsync_piece_t *pc = d && id < f->plan->npieces ? &f->plan->pieces[id] : NULL;
    if (pc == NULL || !recv_pull_is_mine(p, pc->chunk) || p->remaining[pc->chunk] == 0 ||
        (d->state[id] & (P_LANDED | P_APPLIED)) || cp->len > pc->len || cp->len < WSYNC_DELTA_HEADER ||
        ((d->relayed ? d->relay_taken : d->taken[pc->src_rank]) && !(d->state[id] & P_PLACED)))
        return wsync_error(WSYNC_ERR_PEER, "unexpected delta wire of piece %u (%llu bytes) from trainer rank %d",
                           id, (unsigned long long)cp->len, cp->peer);
    d->state[id] |= P_LANDED;
    d->wlen[id] = cp->len;
    p->last_landed = wsync_now_ns(); /* the relay's answer, which places it, comes after its last put */
    return d->state[id] & P_PLACED ? apply(f, id) : WSYNC_OK;
}

/* Trainer rank t (-1: the parent's relay, which puts any piece anywhere
 * in the stage) answered: where its wires are; those in apply now. */
static wsync_status_t take(fetch_t *f, int t)
{
    recv_delta_t *d = f->delta;
    const wsync_pull_reply_t *rp = t >= 0 ? &f->p.reqs[t].reply : &f->p.relay.req.reply;
    const wsync_plan_t *plan = f->plan;
    const uint64_t area_at = t >= 0 ? d->area_at[t] : 0, area_len = t >= 0 ? d->area_len[t] : d->stage_len;
    char who[200], what[300];
    size_t k, n = t >= 0 ? plan->rank_npieces[t] : plan->npieces;
    if (t >= 0) {
        snprintf(who, sizeof(who), "trainer rank %d", t);
        d->taken[t] = 1;
    } else {
        snprintf(who, sizeof(who), "the relay of engine %s", f->p.relay.id);
        d->relay_taken = 1;
    }
    d->nkept += rp->has_base && rp->base == d->base;
    for (k = 0; k < rp->ndeltas; k++) {
        const wsync_pull_delta_t *e = &rp->deltas[k];
        const uint32_t i = e->piece;
        if (i >= plan->npieces || (t >= 0 && plan->pieces[i].src_rank != t) ||
            !recv_pull_is_mine(&f->p, plan->pieces[i].chunk) || (d->state[i] & (P_PLACED | P_APPLIED)) ||
            e->bytes > plan->pieces[i].len || e->at + e->bytes > area_len) {
            snprintf(what, sizeof(what),
                     "%s answered a delta wire of piece %u (%llu bytes at %llu) that it does not owe "
                     "this rank",
                     who, i, (unsigned long long)e->bytes, (unsigned long long)e->at);
            return recv_pull_fail(&f->p, WSYNC_ERR_PEER, what);
        }
        d->state[i] |= P_PLACED;
        d->wat[i] = area_at + e->at; /* in the stage */
        d->wbytes[i] = e->bytes;
        if (d->state[i] & P_LANDED)
            WSYNC_CHECK(apply(f, i));
    }
    for (k = 0; k < n; k++) { /* a wire it put, not in its answer */
        const uint32_t i = t >= 0 ? plan->rank_pieces[t][k] : (uint32_t)k;
        if ((d->state[i] & (P_LANDED | P_PLACED)) == P_LANDED) {
            snprintf(what, sizeof(what), "%s put a delta wire of piece %u that its answer does not list", who, i);
            return recv_pull_fail(&f->p, WSYNC_ERR_PEER, what);
        }
    }
    return WSYNC_OK;
}

/* Send the re-fetches waiting (one request per trainer rank at a time). */
static wsync_status_t send_refetch(fetch_t *f, int t)
{
    recv_delta_t *d = f->delta;
    wsync_receiver_t *r = f->p.r;
    recv_request_t *q = &d->refetch[t];
    wsync_pull_request_t pr;
    recv_transport_t *rt;
    size_t k;
    if (q->started && !recv_request_done(q))
        return WSYNC_OK;
    if (recv_request_failed(q))
        return recv_pull_fail(&f->p, q->status, q->error);
    recv_request_end(q);
    WSYNC_CHECK(recv_transport_ensure(r, f->p.tnames[t], &rt));
    for (k = 0; k < f->plan->rank_npieces[t]; k++) { /* under a relay, its first puts here */
        const wsync_piece_t *pc = &f->plan->pieces[f->plan->rank_pieces[t][k]];
        if (d->want[(size_t)t * d->chunk_bytes + pc->chunk / 8] & (1u << (pc->chunk % 8)))
            WSYNC_CHECK(rt->ops->expect(rt->t, t, rt->region[f->p.slot], pc->offset, pc->len,
                                        ((uint64_t)f->p.reqid << 32) | f->plan->rank_pieces[t][k]));
    }
    if (rt->ops->expect_flush)
        rt->ops->expect_flush(rt->t, t);
    recv_pull_request_init(&pr, r, f->p.v, f->p.reqid, rt, f->p.slot, f->p.sl->layout_digest, f->p.deadline);
    pr.chunks = d->want + (size_t)t * d->chunk_bytes;
    pr.chunk_bytes = d->chunk_bytes;
    WSYNC_CHECK(recv_request_start(q, &r->pull_conns, &r->auth, t, f->p.addrs[t], wsync_pull_request_to_json(&pr),
                                   f->p.deadline));
    memset(d->want + (size_t)t * d->chunk_bytes, 0, d->chunk_bytes);
    d->pending[t] = 0;
    return WSYNC_OK;
}

wsync_status_t recv_delta_poll(fetch_t *f, int *progressed)
{
    recv_delta_t *d = f->delta;
    int t;
    if (d == NULL)
        return WSYNC_OK;
    if (d->relayed && !d->relay_taken && f->p.relay.on && recv_request_done(&f->p.relay.req) &&
        f->p.relay.req.status == WSYNC_OK) {
        *progressed = 1;
        WSYNC_CHECK(take(f, -1));
    }
    for (t = 0; t < f->plan->world; t++) {
        const recv_request_t *q = &f->p.reqs[t];
        if (!d->taken[t] && q->started && recv_request_done(q) && q->status == WSYNC_OK) {
            *progressed = 1;
            WSYNC_CHECK(take(f, t));
        }
        if (recv_request_failed(&d->refetch[t]))
            return recv_pull_fail(&f->p, d->refetch[t].status, d->refetch[t].error);
        if (d->pending[t])
            WSYNC_CHECK(send_refetch(f, t));
    }
    return WSYNC_OK;
}

wsync_status_t recv_delta_relay_gone(recv_pull_t *p)
{
    fetch_t *f = container_of(p, fetch_t, p);
    recv_delta_t *d = f->delta;
    uint32_t i;
    int k;
    if (d == NULL)
        return WSYNC_OK;
    for (k = 0; k < d->nreg; k++) /* before the transports close; the trainer ranks' requests register it again */
        d->reg[k].rt->ops->dereg(d->reg[k].region);
    d->nreg = 0;
    for (k = 0; k < f->plan->world; k++) {
        recv_request_abort(&d->refetch[k]); /* its chunks are asked again in full with the rest */
        recv_request_end(&d->refetch[k]);
        d->pending[k] = 0;
    }
    memset(d->want, 0, (size_t)f->plan->world * d->chunk_bytes);
    for (i = 0; i < f->plan->npieces; i++) { /* the pieces of chunks still missing come again */
        const wsync_piece_t *pc = &f->plan->pieces[i];
        if (!recv_pull_is_mine(p, pc->chunk) || p->remaining[pc->chunk] == 0)
            continue;
        if ((d->state[i] & (P_APPLIED | P_BAD)) == P_APPLIED) {
            d->ndelta--;
            d->wire_bytes -= d->wbytes[i];
            d->piece_bytes -= pc->len;
        }
        d->state[i] = 0;
    }
    d->relayed = d->relay_taken = 0;
    return WSYNC_OK;
}

wsync_status_t recv_delta_verify(fetch_t *f, uint32_t c, const uint64_t *sums, int *again)
{
    recv_delta_t *d = f->delta;
    const wsync_plan_t *plan = f->plan;
    const uint32_t first = plan->chunk_first[c];
    uint32_t i;
    *again = 0;
    if (d == NULL)
        return WSYNC_OK;
    for (i = first; i < plan->chunk_first[c + 1]; i++) {
        const wsync_piece_t *pc = &plan->pieces[i];
        const int bad = d->state[i] & P_BAD; /* refused: said when it was */
        char what[200];
        if (!(d->state[i] & P_APPLIED) ||
            (!bad && wsync_digest_final(sums[i - first], pc->len, pc->offset) == f->ver.digests[i]))
            continue;
        if (!bad) {
            wsync_manifest_describe_range(f->p.sl->manifest, pc->offset, pc->offset + pc->len, what, sizeof(what));
            LOG_WARN("engine %s rank %d: piece %u (trainer rank %d) applied as a delta from version %llu failed "
                     "verification against version %llu's digests (%s): re-fetching it in full",
                     f->p.r->engine_id, f->p.me, i, pc->src_rank, (unsigned long long)d->base,
                     (unsigned long long)f->p.v, what);
            d->ndelta--; /* it comes full after all */
            d->wire_bytes -= d->wbytes[i];
            d->piece_bytes -= pc->len;
        }
        d->nrefetch++;
        d->failed_len += pc->len;
        d->lost += d->wbytes[i];
        d->failing[pc->src_rank] = 1;
        *again = 1;
    }
    for (i = 0; *again && i < (uint32_t)plan->world; i++)
        if (d->failing[i]) {
            d->failing[i] = 0;
            refetch(f, c, (int)i);
        }
    return WSYNC_OK;
}

void recv_delta_end(fetch_t *f, wsync_status_t st)
{
    recv_delta_t *d = f->delta;
    char a[32], b[32], c[32];
    uint64_t on_wire;
    int t, k;
    if (d == NULL)
        return;
    for (t = 0; t < f->plan->world; t++) {
        if (st != WSYNC_OK)
            recv_request_abort(&d->refetch[t]);
        recv_request_end(&d->refetch[t]);
    }
    for (k = 0; k < d->nreg; k++)
        d->reg[k].rt->ops->dereg(d->reg[k].region);
    /* The pieces that went full, the wires, and what was put again. */
    on_wire = d->owed - d->piece_bytes - d->failed_len + d->wire_bytes + d->lost + d->refetch_bytes;
    if (st == WSYNC_OK && d->nkept == 0 && d->nasked == 0 && d->nother > 0) /* the usual way there: debug */
        LOG_DEBUG("engine %s rank %d: version %llu: every piece came full: %d trainer ranks are reached by a "
                  "transport other than tcp (deltas go over tcp; the local transport's copy beats them)",
                  f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v, d->nother);
    else if (st == WSYNC_OK && d->nkept == 0)
        LOG_INFO("engine %s rank %d: version %llu: no %s keeps version %llu as a delta base (%s): every "
                 "piece came full",
                 f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v, d->relayed ? "relay" : "trainer rank",
                 (unsigned long long)d->base,
                 d->nasked ? "their answers said so" : "their registrations say so, none was asked");
    else if (st == WSYNC_OK)
        LOG_INFO("engine %s rank %d: version %llu: %llu pieces as deltas from version %llu (%s of wires for %s of "
                 "pieces); on the wire %llu of %llu bytes (%.1f%%, %s); %llu re-fetched in full after a failed "
                 "check",
                 f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v, (unsigned long long)d->ndelta,
                 (unsigned long long)d->base, wsync_fmt_size(d->wire_bytes, a, sizeof(a)),
                 wsync_fmt_size(d->piece_bytes, b, sizeof(b)), (unsigned long long)on_wire,
                 (unsigned long long)d->owed, d->owed ? 100.0 * (double)on_wire / (double)d->owed : 0.0,
                 wsync_fmt_size(on_wire, c, sizeof(c)), (unsigned long long)d->nrefetch);
    if (st == WSYNC_OK && d->ndelta > 0 && d->owed > 0) /* what delta=auto costs the next pull at */
        f->p.r->delta_wire_seen = (double)(d->owed - d->piece_bytes + d->wire_bytes) / (double)d->owed;
    if (st == WSYNC_OK)
        f->p.r->delta_last = (wsync_report_delta_t){.pieces = d->ndelta,
                                                    .wire_bytes = d->wire_bytes,
                                                    .piece_bytes = d->piece_bytes,
                                                    .refetched = d->nrefetch};
    delta_free(d);
    f->delta = NULL;
}

void wsync_receiver_last_delta(const wsync_receiver_t *r, wsync_pull_delta_stats_t *out)
{
    *out = (wsync_pull_delta_stats_t){.version = r->held_version,
                                      .pieces = r->delta_last.pieces,
                                      .wire_bytes = r->delta_last.wire_bytes,
                                      .piece_bytes = r->delta_last.piece_bytes,
                                      .refetched = r->delta_last.refetched};
}
