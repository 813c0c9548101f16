/* delta_land.c: delta pulls on an engine rank (delta_land.h), by the puts
 * of the node plan: the whole image's (put i is piece i) or a node of
 * targets' (TP/EP slices, FP8 codes and scales). Each trainer rank gets its
 * own part of one staging region (a quarter of the bytes it owes this rank,
 * rounded up: a delta pays below that, and a wire that does not fit goes
 * full); its wires land there back to back and its answer says where each
 * one is. */
#include "engine_side/delta_land.h"
#include "engine_side/delta_land_internal.h"

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
    d.delta_wire = r->held.delta_wire_seen > 0 ? r->held.delta_wire_seen : plan_choice_delta_wire();
    d.delta_base_copy = f->p.slot != r->held.slot;
    yes = plan_choice_delta(r->node.links, &d, &delta_s, &full_s);
    LOG_INFO("engine %s rank %d: version %llu: delta auto chose %s: the cost model (%s) gives %.3f ms as deltas "
             "from version %llu (%.2f%% of the bytes on the wire, %s) against %.3f ms full",
             r->engine_id, f->p.me, (unsigned long long)f->p.v, yes ? "deltas" : "full pieces",
             r->node.links->machine, delta_s * 1e3, (unsigned long long)r->held.version, d.delta_wire * 100,
             r->held.delta_wire_seen > 0 ? "as the last delta pull measured" : "at the delta_density setting",
             full_s * 1e3);
    return yes;
}

/* Whether this attempt may ask for deltas: a verified version of the same
 * layout and targets held here, older than the one pulled, whose bytes
 * stay readable (host or GPU memory: wsync's own images; in place with the
 * caller's tensors, host or a sparse GPU image, the image where it holds
 * the bytes and the caller's tensors where they land straight, apply()
 * gathers them; not FP8 bands quantized here), with digests to check
 * against (an identity node: the record's, not late). */
static int may_ask(const fetch_t *f)
{
    const wsync_receiver_t *r = f->p.r;
    if (wsync_setting_int(WSYNC_SET_DELTA) == 2) /* auto | on | off */
        return 0;
    if (f->identity && f->ver.digests == NULL)
        return 0;
    if (r->held.version == 0 || r->held.version >= f->p.v || r->held.layout == NULL ||
        strcmp(r->held.layout->layout_digest, f->p.sl->layout_digest) != 0 || r->held.tl != f->tl ||
        (f->tl && f->tl->naux > 0))
        return 0;
    if (f->p.slot != r->held.slot && r->images.nslots != 2)
        return 0;
    return wsync_setting_int(WSYNC_SET_DELTA) != 0 || r->node.links == NULL || auto_wants(f);
}

/* In place into the caller's tensors (host, or a sparse GPU image): where
 * this rank's base bytes [off, off+len) lie: a destination's in the
 * caller's tensor (written through after the last pull or landed there
 * straight; a sparse image freed its pages, a sparse GPU image has none
 * under them), the rest in the image. *n: how many lie there. */
static char *base_at(const fetch_t *f, uint64_t off, uint64_t len, uint64_t *n)
{
    const recv_dests_t *ds = f->p.r->run.dm;
    const size_t k = recv_dests_after(ds, off);
    if (k < ds->n && ds->d[k].off <= off) {
        const recv_dest_t *d = &ds->d[k];
        *n = d->off + d->size - off < len ? d->off + d->size - off : len;
        return d->ptr + (off - d->off);
    }
    *n = k < ds->n && ds->d[k].off - off < len ? ds->d[k].off - off : len;
    return f->image + off;
}

/* Test hook: flip one byte of put N of the node plan (the whole image:
 * piece N) in the held version, once per process, on the rank it lands
 * on (in the caller's tensor where the base is theirs, split_dests), so
 * the next delta pull applies a wire to a wrong base. */
static void corrupt_held(const fetch_t *f, char *held, int split_dests)
{
    static int done;
    long long i = wsync_fault(WSYNC_FAULT_CORRUPT_HELD);
    const wsync_mem_ops_t *mem = f->p.r->mem;
    const wsync_tput_t *pu;
    char *at, b;
    if (i < 0 || done || (uint64_t)i >= f->np->nputs)
        return;
    pu = &f->np->puts[i];
    if (!recv_pull_is_mine(&f->p, pu->chunk) || pu->len == 0)
        return;
    done = 1;
    at = held + pu->dst_off + pu->len / 2; /* host memory or the GPU's */
    if (split_dests) {                     /* it may lie in the caller's tensor */
        uint64_t n;
        at = base_at(f, pu->dst_off + pu->len / 2, 1, &n);
    }
    if (mem->copy(&b, at, 1) != WSYNC_OK || (b ^= 0x01, mem->copy(at, &b, 1)) != WSYNC_OK)
        return;
    LOG_WARN("test hook: engine %s rank %d flipped a byte of %s %lld of version %llu, the base it holds",
             f->p.r->engine_id, f->p.me, f->tl ? "put" : "piece", i, (unsigned long long)f->p.r->held.version);
}

wsync_status_t recv_delta_begin(fetch_t *f)
{
    const wsync_node_plan_t *np = f->np;
    wsync_receiver_t *r = f->p.r;
    recv_delta_t *d;
    uint64_t at = 0;
    int t;
    size_t i;
    if (!may_ask(f))
        return WSYNC_OK;
    d = calloc(1, sizeof(*d));
    WSYNC_CHECK_ALLOC(d);
    d->chunk_bytes = ((size_t)np->nchunks + 7) / 8;
    d->area_at = calloc((size_t)f->p.world, sizeof(*d->area_at));
    d->area_len = calloc((size_t)f->p.world, sizeof(*d->area_len));
    d->state = calloc(np->nputs + 1, 1);
    d->wlen = calloc(np->nputs + 1, sizeof(*d->wlen));
    d->wat = calloc(np->nputs + 1, sizeof(*d->wat));
    d->wbytes = calloc(np->nputs + 1, sizeof(*d->wbytes));
    d->wdig = calloc(np->nputs + 1, sizeof(*d->wdig));
    d->taken = calloc((size_t)f->p.world, 1);
    d->refetch = calloc((size_t)f->p.world, sizeof(*d->refetch));
    d->want = calloc((size_t)f->p.world * d->chunk_bytes + 1, 1);
    d->pending = calloc((size_t)f->p.world, 1);
    d->failing = calloc((size_t)f->p.world, 1);
    if (!d->failing || !d->area_at || !d->area_len || !d->state || !d->wlen || !d->wat || !d->wbytes || !d->wdig ||
        !d->taken || !d->refetch || !d->want || !d->pending) {
        recv_delta_free(d);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (t = 0; t < f->p.world; t++) {
        uint64_t owed = 0;
        for (i = 0; i < np->rank_nputs[t]; i++) {
            const wsync_tput_t *pu = &np->puts[np->rank_puts[t][i]];
            if (recv_pull_is_mine(&f->p, pu->chunk))
                owed += pu->len;
        }
        d->area_at[t] = at;
        d->area_len[t] = owed ? ((owed / 4 + 4095) & ~4095ULL) + 4096 : 0;
        at += d->area_len[t];
        d->owed += owed;
    }
    d->stage_len = at;
    d->stage = malloc(at ? at : 1); /* only the pages wires land on are touched */
    if (d->stage == NULL) {
        recv_delta_free(d);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for a delta staging region of %llu bytes",
                           (unsigned long long)at);
    }
    d->base = r->held.version;
    d->mem = r->mem;
    d->held = r->images.win[r->held.slot].ptr;
    d->staged = f->p.slot != r->held.slot;
    /* where bytes land straight in the caller's tensors (recv_transport_direct) */
    d->split_dests = !d->staged && (r->mem->kind == WSYNC_MEM_HOST || r->images.gpu_sparse) && r->run.dm &&
                     r->run.dm->in_place;
    corrupt_held(f, r->images.win[r->held.slot].ptr, d->split_dests);
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

/* Whether trainer rank t, reached over `transport`, is asked for deltas:
 * over tcp, owing this rank bytes, keeping the base. */
static int asks_rank(const fetch_t *f, int t, const char *transport)
{
    const recv_delta_t *d = f->delta;
    return d != NULL && d->area_len[t] > 0 && transport && strcmp(transport, "tcp") == 0 &&
           keeps(f, t, f->p.v - d->base);
}

wsync_status_t recv_delta_ask(fetch_t *f, int t, recv_transport_t *rt, json_t *msg)
{
    recv_delta_t *d = f->delta;
    if (d != NULL && d->area_len[t] > 0 && strcmp(rt->ops->name, "tcp") != 0)
        d->nother++;
    if (!asks_rank(f, t, rt->ops->name))
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

/* Ask trainer rank t again for every put of chunk c, in full (sent by
 * recv_delta_poll): they count as missing again. */
static void refetch(fetch_t *f, uint32_t c, int t)
{
    recv_delta_t *d = f->delta;
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t i;
    for (i = ch->first_put; i < ch->first_put + ch->nputs; i++)
        if (f->np->puts[i].src_rank == t) {
            f->p.remaining[c]++;
            d->state[i] = 0;
            d->refetch_bytes += f->np->puts[i].len;
        }
    d->want[(size_t)t * d->chunk_bytes + c / 8] |= (unsigned char)(1u << (c % 8));
    d->pending[t] = 1;
}

/* A node verifying by segments: 1 if put i's bytes, applied, are not the
 * ones the trainer's digest names (or it gave none). */
static int wrong_bytes(const fetch_t *f, uint32_t i, const char *dst)
{
    const recv_delta_t *d = f->delta;
    const wsync_tput_t *pu = &f->np->puts[i];
    uint64_t sum = 0;
    if (!(d->state[i] & P_DIG) || d->mem->digest_sum(dst, pu->len, pu->dst_off, &sum) != WSYNC_OK)
        return 1;
    return wsync_digest_final(sum, pu->len, pu->dst_off) != d->wdig[i];
}

/* In place into the caller's tensors (split_dests), put pu holding bytes
 * of one: the base's bytes gathered into d->split, a buffer of the image's
 * memory (host, or the GPU's), where base_at says they lie (out 0; *buf
 * NULL when the put holds none of the caller's bytes, the image holds them
 * all), or the applied bytes put where the pull lands them (out 1): those
 * that land straight in the caller's tensors (f->direct) there, the rest
 * in the image, which the write-through copies on to the caller's. Copies
 * through the image's memory ops (a GPU's: device copies on this thread's
 * device). Fails for memory or a copy. */
static wsync_status_t split_move(fetch_t *f, const wsync_tput_t *pu, int out, char **buf)
{
    recv_delta_t *d = f->delta;
    const recv_dests_t *ds = f->p.r->run.dm;
    const size_t k = recv_dests_after(ds, pu->dst_off);
    uint64_t at = 0, n;
    *buf = NULL;
    if (k == ds->n || ds->d[k].off >= pu->dst_off + pu->len)
        return WSYNC_OK;
    if (!out && d->split_len < pu->len) {
        void *b = NULL;
        d->mem->free(d->split);
        d->split = NULL;
        d->split_len = 0;
        WSYNC_CHECK(d->mem->alloc(pu->len, &b));
        d->split = b;
        d->split_len = pu->len;
    }
    for (; at < pu->len; at += n) {
        char *p = out ? fetch_mine_at(f, pu->dst_off + at, pu->len - at, &n)
                      : base_at(f, pu->dst_off + at, pu->len - at, &n);
        WSYNC_CHECK(d->mem->copy(out ? p : d->split + at, out ? d->split + at : p, n));
    }
    *buf = d->split;
    return WSYNC_OK;
}

/* Put i's wire landed and placed: onto the base's bytes (copied from the
 * held slot when staged; gathered where they lie, split_move, in place
 * into the caller's tensors: a put that cannot be gathered is refused,
 * never applied in a sparse GPU image that has no memory under the
 * caller's bytes), then it counts as landed. */
static wsync_status_t apply(fetch_t *f, uint32_t i)
{
    recv_delta_t *d = f->delta;
    const wsync_tput_t *pu = &f->np->puts[i];
    const int t = pu->src_rank;
    char *dst = f->image + pu->dst_off, *split = NULL;
    wsync_status_t st = WSYNC_ERR_FORMAT;
    if (d->wlen[i] == d->wbytes[i]) {
        st = d->staged ? d->mem->copy(dst, d->held + pu->dst_off, pu->len) : WSYNC_OK;
        if (st == WSYNC_OK && d->split_dests)
            st = split_move(f, pu, 0, &split);
        dst = split ? split : dst;
        if (st == WSYNC_OK)
            st = wsync_delta_mem_apply(d->mem, &d->dev, dst, pu->len, d->stage + d->wat[i], d->wbytes[i]);
        if (st == WSYNC_OK && split)
            st = split_move(f, pu, 1, &split);
    } else {
        wsync_error(st, "%llu bytes landed, the answer says %llu", (unsigned long long)d->wlen[i],
                    (unsigned long long)d->wbytes[i]);
    }
    if (st != WSYNC_OK) /* it counts as landed; its chunk's check asks for it again (recv_delta_verify) */
        LOG_WARN("engine %s rank %d: %s %u (trainer rank %d) of version %llu: its delta wire from version %llu"
                 "%s%s was refused (%s): re-fetching it in full",
                 f->p.r->engine_id, f->p.me, f->p.ops->unit1, i, t, (unsigned long long)f->p.v,
                 (unsigned long long)d->base, d->relayed ? " through the relay of engine " : "",
                 d->relayed ? f->p.relay.id : "", wsync_last_error());
    d->state[i] = (d->state[i] & P_DIG) | P_APPLIED | (st != WSYNC_OK ? P_BAD : 0);
    if (f->identity)
        f->ver.has_put_sum[i] = 0; /* no put sum covers it: its chunk takes a digest pass */
    else if (st == WSYNC_OK && wrong_bytes(f, i, dst))
        d->state[i] |= P_WRONG; /* said and asked again when its chunk is in (recv_delta_verify) */
    if (st == WSYNC_OK) {
        d->ndelta++;
        d->wire_bytes += d->wbytes[i];
        d->piece_bytes += pu->len;
    }
    f->p.last_landed = wsync_now_ns();
    if (--f->p.remaining[pu->chunk] > 0)
        return WSYNC_OK;
    return f->p.ops->chunk_landed(&f->p, pu->chunk);
}

wsync_status_t recv_delta_landed(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp)
{
    fetch_t *f = container_of(p, fetch_t, p);
    recv_delta_t *d = f->delta;
    const wsync_tput_t *pu = d && id < f->np->nputs ? &f->np->puts[id] : NULL;
    if (pu == NULL || !recv_pull_is_mine(p, pu->chunk) || p->remaining[pu->chunk] == 0 ||
        (d->state[id] & (P_LANDED | P_APPLIED)) || cp->len > pu->len || cp->len < WSYNC_DELTA_HEADER ||
        ((d->relayed ? d->relay_taken : d->taken[pu->src_rank]) && !(d->state[id] & P_PLACED)))
        return wsync_error(WSYNC_ERR_PEER, "unexpected delta wire of %s %u (%llu bytes) from trainer rank %d",
                           p->ops->unit1, id, (unsigned long long)cp->len, cp->peer);
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
    const wsync_node_plan_t *np = f->np;
    const uint64_t area_at = t >= 0 ? d->area_at[t] : 0, area_len = t >= 0 ? d->area_len[t] : d->stage_len;
    char who[200], what[300];
    size_t k, n = t >= 0 ? np->rank_nputs[t] : np->nputs;
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
        if (i >= np->nputs || (t >= 0 && np->puts[i].src_rank != t) || !recv_pull_is_mine(&f->p, np->puts[i].chunk) ||
            (d->state[i] & (P_PLACED | P_APPLIED)) || e->bytes > np->puts[i].len || e->at + e->bytes > area_len) {
            snprintf(what, sizeof(what),
                     "%s answered a delta wire of %s %u (%llu bytes at %llu) that it does not owe "
                     "this rank",
                     who, f->p.ops->unit1, i, (unsigned long long)e->bytes, (unsigned long long)e->at);
            return recv_pull_fail(&f->p, WSYNC_ERR_PEER, what);
        }
        d->state[i] |= P_PLACED | (e->has_digest ? P_DIG : 0);
        d->wat[i] = area_at + e->at; /* in the stage */
        d->wbytes[i] = e->bytes;
        d->wdig[i] = e->digest;
        if (d->state[i] & P_LANDED)
            WSYNC_CHECK(apply(f, i));
    }
    for (k = 0; k < n; k++) { /* a wire it put, not in its answer */
        const uint32_t i = t >= 0 ? np->rank_puts[t][k] : (uint32_t)k;
        if ((d->state[i] & (P_LANDED | P_PLACED)) == P_LANDED) {
            snprintf(what, sizeof(what), "%s put a delta wire of %s %u that its answer does not list", who,
                     f->p.ops->unit1, i);
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
    recv_transport_t *rt;
    json_t *msg = NULL;
    size_t k;
    if (q->started && !recv_request_done(q))
        return WSYNC_OK;
    if (recv_request_failed(q))
        return recv_pull_fail(&f->p, q->status, q->error);
    recv_request_end(q);
    WSYNC_CHECK(recv_transport_ensure(r, f->p.tnames[t], &rt));
    for (k = 0; k < f->np->rank_nputs[t]; k++) { /* under a relay, its first puts here */
        const uint32_t i = f->np->rank_puts[t][k];
        const wsync_tput_t *pu = &f->np->puts[i];
        if (d->want[(size_t)t * d->chunk_bytes + pu->chunk / 8] & (1u << (pu->chunk % 8)))
            WSYNC_CHECK(rt->ops->expect(rt->t, t, rt->region[f->p.slot], pu->dst_off, pu->len,
                                        ((uint64_t)f->p.reqid << 32) | i));
    }
    if (rt->ops->expect_flush)
        rt->ops->expect_flush(rt->t, t);
    WSYNC_CHECK(fetch_request_msg(f, t, rt, d->want + (size_t)t * d->chunk_bytes, &msg));
    WSYNC_CHECK(recv_request_start(q, &r->transports.pull_conns, &r->auth, t, f->p.addrs[t], msg, f->p.deadline));
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
    for (t = 0; t < f->p.world; t++) {
        const recv_request_t *q = &f->p.reqs[t];
        /* relayed, a node of targets asks the trainer ranks its digests alone: no wire to place */
        if (!d->relayed && !d->taken[t] && q->started && recv_request_done(q) && q->status == WSYNC_OK) {
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

/* What put i holds, for a message: the image's tensors (the whole image,
 * identity targets), else this rank's destination tensor. */
static const char *describe(const fetch_t *f, const wsync_tput_t *pu, char *buf, size_t len)
{
    const wsync_dest_t *dt;
    char aux[300];
    if (f->identity || f->tl == NULL) {
        wsync_manifest_describe_range(f->p.sl->manifest, pu->dst_off, pu->dst_off + pu->len, buf, len);
        return buf;
    }
    dt = wsync_target_dest_at(f->tl->tg[f->p.me], pu->dst_off);
    snprintf(buf, len, "tensor '%s'",
             dt ? dt->name : recv_fp8_aux_name(f->tl->tg[f->p.me], f->tl, pu->dst_off, aux, sizeof(aux)));
    return buf;
}

wsync_status_t recv_delta_verify(fetch_t *f, uint32_t c, const uint64_t *sums, int *again)
{
    recv_delta_t *d = f->delta;
    const wsync_node_plan_t *np = f->np;
    const size_t first = np->chunks[c].first_put;
    size_t i;
    int t;
    *again = 0;
    if (d == NULL)
        return WSYNC_OK;
    for (i = first; i < first + np->chunks[c].nputs; i++) {
        const wsync_tput_t *pu = &np->puts[i];
        const int bad = d->state[i] & P_BAD; /* refused: said when it was */
        char what[400];
        if (!(d->state[i] & P_APPLIED) ||
            (!bad && (f->identity ? wsync_digest_final(sums[i - first], pu->len, pu->dst_off) == f->ver.digests[i]
                                  : !(d->state[i] & P_WRONG))))
            continue;
        if (!bad) {
            LOG_WARN("engine %s rank %d: %s %zu (trainer rank %d) applied as a delta from version %llu%s%s failed "
                     "verification against version %llu's digests (%s): re-fetching it in full",
                     f->p.r->engine_id, f->p.me, f->p.ops->unit1, i, pu->src_rank, (unsigned long long)d->base,
                     d->relayed ? " through the relay of engine " : "", d->relayed ? f->p.relay.id : "",
                     (unsigned long long)f->p.v, describe(f, pu, what, sizeof(what)));
            d->ndelta--; /* it comes full after all */
            d->wire_bytes -= d->wbytes[i];
            d->piece_bytes -= pu->len;
        }
        d->nrefetch++;
        d->failed_len += pu->len;
        d->lost += d->wbytes[i];
        d->failing[pu->src_rank] = 1;
        *again = 1;
    }
    for (t = 0; *again && t < f->p.world; t++)
        if (d->failing[t]) {
            d->failing[t] = 0;
            refetch(f, c, t);
        }
    return WSYNC_OK;
}

int recv_delta_asks(const fetch_t *f)
{
    int t;
    for (t = 0; f->delta && t < f->p.world; t++)
        if (asks_rank(f, t, f->p.tnames[t]))
            return 1;
    return 0;
}
