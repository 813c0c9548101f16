/* fetch.c: the data part of one pull attempt on one engine rank, as phases:
 *   join      wait for the landing map, map the peers' windows;
 *   prepare   split the chunks into those landing here and those to copy;
 *   request   expect every piece landing here, ask each trainer rank that
 *             owns some of them to put them;
 *   then, until every chunk of this rank's image is verified, in turn:
 *   land      take the transports' completions; a chunk whose last piece
 *             landed is verified and marked landed on the board (against
 *             the sums its puts brought along where every one did: the
 *             local transport's copy inside one GPU digests what it writes,
 *             so those bytes are not read a second time);
 *   fan out   queue a copy (and its digests) of each chunk that landed on
 *             another rank, as soon as the board says it did (a chunk the
 *             map lands on every rank of its landing rank's GPU lands here
 *             too when this rank shares that GPU: no fan-out);
 *   reap      verify finished copies;
 *   watch     trainer answers, peers, the deadline.
 * In place with the caller's destination tensors (dests.h), a chunk that
 * landed here or is copied in from a peer goes out as a group of jobs
 * instead: copies into the caller's tensors and the digests of the caller's
 * bytes; it counts (and, landed here, is marked landed) once the group
 * verified. With a sparse image (release.h) each chunk's pages go once
 * every rank holds it: landed here, once every other rank marked it copied.
 * All state of the attempt is in one fetch_t; fetch_end undoes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/log.h"
#include "common/digest/digest.h"
#include "common/proto/pull_request.h"
#include "common/base/util.h"
#include "engine_side/fetch_internal.h"
#include "engine_side/relay.h"

wsync_status_t recv_map_peers(wsync_receiver_t *r, int slot, uint64_t deadline, const recv_tlayout_t *tl)
{
    int p;
    for (p = 0; p < r->cfg.local_world; p++) {
        peer_map_t *pm = &r->peers[p][slot];
        uint32_t epoch = board_rank_epoch(r->board, p);
        wsync_blob_t blob;
        uint64_t len;
        int fd = -1, left;
        wsync_status_t st;
        if (p == r->cfg.local_rank)
            continue;
        if (pm->ptr && pm->epoch == epoch)
            continue;
        if (pm->ptr) {
            r->win_ops->unmap(pm->ptr, pm->len);
            pm->ptr = NULL;
        }
        left = (int)((deadline - wsync_now_ns()) / 1000000ULL);
        WSYNC_CHECK(board_get_window(r->board, p, slot, left > 0 ? left : 1, &blob, &fd, &len, &epoch));
        /* a sparse GPU image's rank exports its fan-out window (gpu_sparse.c) */
        pm->fan = tl && len < tl->tg[p]->image_size && len == tl->fan[p].len;
        if (!pm->fan && len < (tl ? tl->tg[p]->image_size : r->image_len)) {
            if (fd >= 0)
                close(fd);
            return wsync_error(WSYNC_ERR_CONFLICT, "local rank %d's image is %llu bytes, need %llu", p,
                               (unsigned long long)len,
                               (unsigned long long)(tl ? tl->tg[p]->image_size : r->image_len));
        }
        st = r->win_ops->map(&blob, fd, len, &pm->ptr);
        if (fd >= 0)
            close(fd);
        WSYNC_CHECK(st);
        pm->len = len;
        pm->epoch = epoch;
    }
    return WSYNC_OK;
}

/* Pieces first..first+n-1, whose sums are `sums`, against the published
 * digests. */
static wsync_status_t check_pieces(const fetch_t *f, uint32_t first, size_t n, const uint64_t *sums)
{
    const wsync_plan_t *p = f->plan;
    size_t k;
    for (k = 0; k < n; k++) {
        const wsync_piece_t *pc = &p->pieces[first + k];
        uint32_t i = first + (uint32_t)k;
        uint64_t d = wsync_digest_final(sums[k], pc->len, pc->offset);
        char what[200];
        if (d == f->digests[i])
            continue;
        wsync_manifest_describe_range(f->sl->manifest, pc->offset, pc->offset + pc->len, what, sizeof(what));
        return wsync_error(WSYNC_ERR_DIGEST,
                           "version %llu, piece %u (bytes %llu..%llu, %s, from trainer rank %d) failed "
                           "verification on engine %s rank %d: digest %016llx, published %016llx",
                           (unsigned long long)f->v, i, (unsigned long long)pc->offset,
                           (unsigned long long)(pc->offset + pc->len), what, pc->src_rank, f->r->engine_id, f->me,
                           (unsigned long long)d, (unsigned long long)f->digests[i]);
    }
    return WSYNC_OK;
}

static uint32_t chunk_npieces(const wsync_plan_t *p, uint32_t c)
{
    return p->chunk_first[c + 1] - p->chunk_first[c];
}

/* The digest ranges of chunk `c`'s pieces in the image (into f->rg); their count. */
static size_t chunk_ranges(fetch_t *f, uint32_t c)
{
    const wsync_plan_t *p = f->plan;
    uint32_t i;
    size_t n = 0;
    for (i = p->chunk_first[c]; i < p->chunk_first[c + 1]; i++, n++)
        f->rg[n] = (wsync_digest_range_t){.ptr = f->image + p->pieces[i].offset,
                                          .len = p->pieces[i].len,
                                          .off = p->pieces[i].offset};
    return n;
}

/* The sums of every piece of chunk `c` in the image (into f->sums), with
 * one wait. */
static wsync_status_t sum_chunk(fetch_t *f, uint32_t c)
{
    size_t n = chunk_ranges(f, c);
    return f->r->mem->digest_many(f->rg, n, f->sums);
}

/* 1 if every piece of chunk c came with the sum of the bytes its put wrote. */
static int chunk_has_put_sums(const fetch_t *f, uint32_t c)
{
    uint32_t i;
    for (i = f->plan->chunk_first[c]; i < f->plan->chunk_first[c + 1]; i++)
        if (!f->has_put_sum[i])
            return 0;
    return 1;
}

/* Wait for local rank 0's landing map of attempt `gen`; fails when rank 0
 * ended the attempt or died, or at the deadline. Shared by both fetches. */
wsync_status_t recv_wait_landing(wsync_receiver_t *r, uint64_t gen, uint64_t deadline, const uint8_t **out)
{
    int me = r->cfg.local_rank;
    for (;;) {
        if ((*out = board_landing(r->board, gen)) != NULL)
            return WSYNC_OK;
        if (board_attempt_outcome(r->board, gen) != BOARD_ATTEMPT_OPEN)
            return wsync_error(WSYNC_ERR_PEER, "engine %s: local rank 0 ended the pull before it started",
                               r->engine_id);
        if (me != 0 && board_leader_gone(r->board))
            return wsync_error(WSYNC_ERR_PEER, "engine %s: local rank 0 died", r->engine_id);
        if (recv_cancelled(r))
            return wsync_cancel_error("waiting for local rank 0's landing map");
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "engine %s rank %d: local rank 0 posted no landing map in time",
                               r->engine_id, me);
        usleep(100);
    }
}

/* The rank chunk c lands on (and is copied from by ranks that fan it out). */
static int land_rank(const fetch_t *f, uint32_t c)
{
    return f->land[c] & BOARD_LAND_RANK;
}

/* 1 if chunk c lands on this rank: it is the landing rank, or shares its
 * GPU where the map says every rank there lands the chunk. */
static int lands_here(const fetch_t *f, uint32_t c)
{
    const int p = land_rank(f, c);
    return p == f->me || ((f->land[c] & BOARD_LAND_GPU) &&
                          board_rank_device(f->r->board, p) == board_rank_device(f->r->board, f->me));
}

/* The node's side of the attempt: its landing map, the peers' windows. */
static wsync_status_t fetch_join(fetch_t *f)
{
    WSYNC_CHECK(recv_wait_landing(f->r, f->gen, f->deadline, &f->land)); /* rank 0 checked the chunk count */
    return recv_map_peers(f->r, f->slot, f->deadline, NULL);
}

static wsync_status_t fetch_prepare(fetch_t *f)
{
    const wsync_plan_t *plan = f->plan;
    uint32_t c, maxp = 1;
    for (c = 0; c < plan->nchunks; c++)
        if (chunk_npieces(plan, c) > maxp)
            maxp = chunk_npieces(plan, c);
    f->remaining = calloc(plan->nchunks + 1, sizeof(*f->remaining));
    f->mine = calloc((plan->nchunks + 7) / 8 + 1, 1);
    f->pending = calloc(plan->nchunks + 1, sizeof(*f->pending));
    f->rg = calloc(maxp, sizeof(*f->rg));
    f->sums = calloc(maxp, sizeof(*f->sums));
    f->reqs = calloc((size_t)plan->world, sizeof(*f->reqs));
    f->addrs = calloc((size_t)plan->world, sizeof(*f->addrs));
    f->tnames = calloc((size_t)plan->world, sizeof(*f->tnames));
    f->put_sum = calloc(plan->npieces + 1, sizeof(*f->put_sum));
    f->has_put_sum = calloc(plan->npieces + 1, 1);
    if (!f->remaining || !f->mine || !f->pending || !f->rg || !f->sums || !f->reqs || !f->addrs || !f->tnames ||
        !f->put_sum || !f->has_put_sum)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    if (f->dm) {
        f->groups = calloc(plan->nchunks + 1, sizeof(*f->groups));
        f->inflight = calloc(plan->nchunks + 1, sizeof(*f->inflight));
        if (!f->groups || !f->inflight)
            return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    for (c = 0; c < plan->nchunks; c++)
        if (lands_here(f, c)) {
            f->remaining[c] = chunk_npieces(plan, c);
            f->mine[c / 8] |= (unsigned char)(1u << (c % 8));
            f->nland++;
        } else {
            f->pending[f->npending++] = c;
        }
    return recv_trainer_addrs(f->r, plan->world, f->addrs, f->tnames);
}

/* Expect trainer rank t's pieces of the chunks asked for here (those landing
 * here; after a relay was given up, those still missing), and ask it to put
 * them. */
wsync_status_t fetch_request_rank(fetch_t *f, int t)
{
    wsync_receiver_t *r = f->r;
    const wsync_plan_t *plan = f->plan;
    recv_transport_t *rt;
    size_t k, n = 0;
    for (k = 0; k < plan->rank_npieces[t]; k++)
        if (is_mine(f, plan->pieces[plan->rank_pieces[t][k]].chunk))
            n++;
    if (n == 0)
        return WSYNC_OK;
    WSYNC_CHECK(recv_transport_ensure(r, f->tnames[t], &rt));
    for (k = 0; k < plan->rank_npieces[t]; k++) {
        const wsync_piece_t *pc = &plan->pieces[plan->rank_pieces[t][k]];
        if (!is_mine(f, pc->chunk))
            continue;
        WSYNC_CHECK(rt->ops->expect(rt->t, t, rt->region[f->slot], pc->offset, pc->len,
                                    ((uint64_t)f->reqid << 32) | pc->id));
    }
    if (rt->ops->expect_flush)
        rt->ops->expect_flush(rt->t, t);
    if (f->addrs[t][0] == '\0')
        return wsync_error(WSYNC_ERR_NOT_FOUND, "trainer rank %d is not registered at the control endpoint", t);
    return recv_request_start(&f->reqs[t], &r->pull_conns, &r->auth, t, f->addrs[t], fetch_pull_json(f, rt),
                              f->deadline);
}

json_t *fetch_pull_json(const fetch_t *f, const recv_transport_t *rt)
{
    wsync_pull_request_t pr;
    recv_pull_request_init(&pr, f->r, f->v, f->reqid, rt, f->slot, f->sl->layout_digest, f->deadline);
    pr.chunks = f->mine;
    pr.chunk_bytes = (f->plan->nchunks + 7) / 8;
    pr.in_order = f->rl.on && f->ndirect == 0;
    return wsync_pull_request_to_json(&pr);
}

uint32_t recv_new_reqid(uint32_t old)
{
    uint32_t id;
    do
        id = (uint32_t)(((uint64_t)rand() << 16 ^ (uint64_t)wsync_now_ns() ^ (uint64_t)getpid() << 8) & 0x7fffffff);
    while (id == 0 || id == old);
    return id;
}

static wsync_status_t fetch_request(fetch_t *f)
{
    int t, relayed = 0;
    f->reqid = recv_new_reqid(f->reqid);
    f->last_landed = wsync_now_ns();
    /* A lone rank: no other rank reads its image, so every destination byte
     * but the ends may land straight in the caller's tensors (not while
     * this node relays: its relay serves out of the image). */
    WSYNC_CHECK(recv_transport_direct(f->r, f->slot, f->tnames, f->plan->world,
                                      f->dm && f->r->cfg.local_world == 1 && !recv_node_relays(f->r), NULL,
                                      &f->direct, &f->ndirect));
    WSYNC_CHECK(fetch_relay_request(f, &relayed));
    for (t = 0; t < f->plan->world && !relayed; t++)
        WSYNC_CHECK(fetch_request_rank(f, t));
    wsync_trace("engine %s rank %d: requests sent", f->r->engine_id, f->me);
    return WSYNC_OK;
}

static uint64_t chunk_len(const wsync_plan_t *plan, uint32_t c)
{
    uint64_t off = (uint64_t)c * plan->chunk_size;
    return off + plan->chunk_size > plan->image_size ? plan->image_size - off : plan->chunk_size;
}

/* In place with destinations: chunk c's write-through and digests, from the
 * image (it landed here) or from the landing rank's window. */
static wsync_status_t group_start(fetch_t *f, uint32_t c, int landed)
{
    const char *src = landed ? f->image : f->r->peers[land_rank(f, c)][f->slot].ptr;
    size_t np = chunk_ranges(f, c);
    recv_dgroup_t *g = &f->groups[c];
    wsync_status_t st = recv_dgroup_start(g, f->r->mem, f->dm, f->image, src, (uint64_t)c * f->plan->chunk_size,
                                          chunk_len(f->plan, c), f->rg, np, landed && f->ndirect > 0);
    if (st != WSYNC_OK) {
        recv_dgroup_end(g, f->r->mem);
        return st;
    }
    g->chunk = c;
    g->landed = landed;
    f->inflight[f->ninflight++] = c;
    f->nfan += !landed;
    return WSYNC_OK;
}

/* A sparse image's chunk c (recv_release_poll's callback). */
static void release_chunk(void *arg, uint32_t c)
{
    const fetch_t *f = arg;
    recv_release_range(&f->rl, (uint64_t)c * f->plan->chunk_size, chunk_len(f->plan, c));
}

/* A chunk this rank holds verified (landed here: marked landed on the board). */
static void chunk_done(fetch_t *f, uint32_t c, int landed)
{
    if (!landed)
        board_mark_copied(f->r->board, f->slot, c, f->gen); /* read out of the landing rank's window */
    if (!landed || (land_rank(f, c) == f->me && recv_release_landed(&f->rl, c, f->r->cfg.local_world - 1)))
        release_chunk(f, c);
    if (f->r->relay) /* local rank 0 of a relaying node: other nodes may have it now */
        relay_chunk_verified(f->r->relay, f->slot, c);
    if (landed) {
        if (land_rank(f, c) == f->me) /* the copy other GPUs' ranks read */
            board_mark_landed(f->r->board, f->slot, c, f->gen);
        if (f->nlanded++ == 0 || f->nlanded == f->nland || f->nlanded % 32 == 0)
            wsync_trace("engine %s rank %d: chunk %u landed and verified (%u of %u)", f->r->engine_id, f->me, c,
                        f->nlanded, f->nland);
    } else if (++f->ncopied == f->plan->nchunks - f->nland) {
        wsync_trace("engine %s rank %d: fan-out copies done and verified", f->r->engine_id, f->me);
    } else if (f->ncopied % 32 == 0) {
        wsync_trace("engine %s rank %d: %u fan-out copies verified", f->r->engine_id, f->me, f->ncopied);
    }
    f->ndone++;
}

/* Chunk c's pieces summed to `sums` (landed here, or copied in): compared
 * with the digests now, or, while late digests are not in yet, kept until
 * they are (fetch_late); only a compared chunk is done. */
static wsync_status_t chunk_summed(fetch_t *f, uint32_t c, int landed, const uint64_t *sums)
{
    uint32_t first = f->plan->chunk_first[c], n = chunk_npieces(f->plan, c);
    if (f->digests) {
        WSYNC_CHECK(check_pieces(f, first, n, sums));
        chunk_done(f, c, landed);
        return WSYNC_OK;
    }
    memmove(f->late_sum + first, sums, n * sizeof(*sums));
    f->wlanded[c] = (unsigned char)landed;
    f->waiting[f->nwaiting++] = c;
    return WSYNC_OK;
}

/* Late digests: once they are in, every chunk waiting for them compared. */
static wsync_status_t fetch_late(fetch_t *f, int *progressed)
{
    const uint64_t *d = NULL;
    uint32_t k, n = f->nwaiting;
    int in = 0;
    if (f->late == NULL || f->digests)
        return WSYNC_OK;
    WSYNC_CHECK(recv_late_poll(f->late, &d, &in));
    if (!in)
        return WSYNC_OK;
    f->digests = d;
    wsync_trace("engine %s rank %d: late digests of version %llu in, %u chunks waited for them", f->r->engine_id,
                f->me, (unsigned long long)f->v, n);
    f->nwaiting = 0;
    for (k = 0; k < n; k++) {
        uint32_t c = f->waiting[k];
        WSYNC_CHECK(chunk_summed(f, c, f->wlanded[c], f->late_sum + f->plan->chunk_first[c]));
    }
    *progressed = 1;
    return WSYNC_OK;
}

/* Every chunk of this rank's image has its sums: compared, or waiting for
 * late digests. */
static int all_summed(const fetch_t *f)
{
    return f->ndone + f->nwaiting >= f->plan->nchunks;
}

/* Verify the groups that finished. */
static wsync_status_t reap_groups(fetch_t *f, int *progressed)
{
    wsync_status_t st = WSYNC_OK;
    uint32_t k, keep = 0;
    for (k = 0; k < f->ninflight; k++) {
        uint32_t c = f->inflight[k];
        recv_dgroup_t *g = &f->groups[c];
        int done = 0, landed = g->landed;
        if (st == WSYNC_OK)
            st = recv_dgroup_poll(g, f->r->mem, f->sums, &done);
        if (!done) {
            f->inflight[keep++] = c; /* running (or left for fetch_end) */
            continue;
        }
        recv_dgroup_end(g, f->r->mem);
        f->nfan -= !landed;
        *progressed = 1;
        if (st == WSYNC_OK)
            st = chunk_summed(f, c, landed, f->sums);
    }
    f->ninflight = keep;
    return st;
}

/* One completion: a piece of this attempt landed here (or a put failed). */
static wsync_status_t land_one(fetch_t *f, const wsync_completion_t *cp)
{
    const wsync_plan_t *plan = f->plan;
    uint32_t id = (uint32_t)cp->tag;
    const wsync_piece_t *pc;
    /* Errors of no put of this attempt (a port scan, a sender of an
     * abandoned attempt) are not ours to fail on; a real sender's failure
     * also reaches us through its answer to the request. */
    if (cp->kind == WSYNC_COMPLETION_ERROR && cp->tag != ~0ULL && (uint32_t)(cp->tag >> 32) == f->reqid)
        return wsync_error(cp->status ? cp->status : WSYNC_ERR_PEER, "%s", cp->message);
    if (cp->kind != WSYNC_COMPLETION_LANDED || (uint32_t)(cp->tag >> 32) != f->reqid)
        return WSYNC_OK; /* not of this attempt */
    if (id >= plan->npieces || !is_mine(f, plan->pieces[id].chunk) || f->remaining[plan->pieces[id].chunk] == 0 ||
        cp->len != plan->pieces[id].len)
        return wsync_error(WSYNC_ERR_PEER, "unexpected piece %u (%llu bytes) from trainer rank %d", id,
                           (unsigned long long)cp->len, cp->peer);
    pc = &plan->pieces[id];
    /* The put's key is its region offset, the piece's image offset here. */
    f->put_sum[id] = cp->sum;
    f->has_put_sum[id] = cp->has_sum != 0;
    if (--f->remaining[pc->chunk] > 0)
        return WSYNC_OK;
    if (f->land_delay_ms > 0)
        usleep((useconds_t)f->land_delay_ms * 1000);
    if (f->dm)
        return group_start(f, pc->chunk, 1); /* marked landed once verified */
    if (chunk_has_put_sums(f, pc->chunk))
        return chunk_summed(f, pc->chunk, 1, f->put_sum + plan->chunk_first[pc->chunk]);
    WSYNC_CHECK(sum_chunk(f, pc->chunk));
    return chunk_summed(f, pc->chunk, 1, f->sums);
}

/* Pieces arriving here, over each transport in use (only a lone transport
 * may block waiting, or it would starve the other). */
static wsync_status_t fetch_land(fetch_t *f, int *progressed, int *got)
{
    wsync_receiver_t *r = f->r;
    wsync_completion_t comps[POLL_BATCH];
    int k, i, n = 0;
    for (k = 0; k < r->ntr && f->ndone < f->plan->nchunks; k++) {
        WSYNC_CHECK(
            r->tr[k].ops->poll(r->tr[k].t, comps, POLL_BATCH, &n,
                               f->npending > 0 || f->fn > 0 || f->ninflight > 0 || r->ntr > 1 || all_summed(f) ? 0
                                                                                                               : 5));
        *got += n;
        for (i = 0; i < n; i++) {
            WSYNC_CHECK(land_one(f, &comps[i]));
            if (comps[i].kind == WSYNC_COMPLETION_LANDED && (uint32_t)(comps[i].tag >> 32) == f->reqid) {
                *progressed = 1;
                f->last_landed = wsync_now_ns();
            }
        }
    }
    return WSYNC_OK;
}

/* Copy chunks that landed on other ranks, whichever landed first (a slow
 * source must not hold up the others), each copy and its digests queued as
 * a job, FANOUT_INFLIGHT at a time so the copy engine runs them back to back. */
static wsync_status_t fetch_fan_out(fetch_t *f, int *progressed)
{
    const wsync_plan_t *plan = f->plan;
    uint32_t k, keep = 0;
    for (k = 0; k < f->npending; k++) {
        uint32_t cc = f->pending[k];
        uint64_t off = (uint64_t)cc * plan->chunk_size;
        uint64_t len = chunk_len(plan, cc);
        fan_job_t *fj = &f->fan[(f->fh + f->fn) % FANOUT_INFLIGHT];
        size_t np;
        if ((f->dm ? f->nfan : (uint32_t)f->fn) == FANOUT_INFLIGHT ||
            !board_is_landed(f->r->board, f->slot, cc, f->gen)) {
            f->pending[keep++] = cc;
            continue;
        }
        if (f->dm) {
            wsync_status_t st = group_start(f, cc, 0);
            if (st != WSYNC_OK) {
                for (; k < f->npending; k++) /* cc and the rest stay pending */
                    f->pending[keep++] = f->pending[k];
                f->npending = keep;
                return st;
            }
            *progressed = 1;
            continue;
        }
        np = chunk_ranges(f, cc);
        fj->chunk = cc;
        WSYNC_CHECK(f->r->mem->copy_digest_start(f->image + off,
                                                 (char *)f->r->peers[land_rank(f, cc)][f->slot].ptr + off, len,
                                                 f->rg, np, &fj->job));
        f->fn++;
        *progressed = 1;
    }
    f->npending = keep;
    return WSYNC_OK;
}

/* Verify the copies that finished, oldest first. */
static wsync_status_t fetch_reap(fetch_t *f, int *progressed)
{
    if (f->dm)
        return reap_groups(f, progressed);
    while (f->fn > 0) {
        fan_job_t *fj = &f->fan[f->fh];
        uint32_t cc = fj->chunk;
        int done = 0;
        WSYNC_CHECK(f->r->mem->job_poll(fj->job, 0, f->sums, &done));
        if (!done)
            break;
        f->r->mem->job_free(fj->job);
        fj->job = NULL;
        f->fh = (f->fh + 1) % FANOUT_INFLIGHT;
        f->fn--;
        WSYNC_CHECK(chunk_summed(f, cc, 0, f->sums));
        *progressed = 1;
    }
    return WSYNC_OK;
}

/* A local rank of this node that died or failed attempt `gen` ends it here
 * too. Shared by both fetches. */
wsync_status_t recv_check_peers(wsync_receiver_t *r, uint64_t gen)
{
    char why[300];
    int p;
    if (recv_cancelled(r))
        return wsync_cancel_error("pull");
    for (p = 0; p < r->cfg.local_world; p++) {
        if (p == r->cfg.local_rank)
            continue;
        if (!board_rank_alive(r->board, p))
            return wsync_error(WSYNC_ERR_PEER, "local rank %d of engine %s is not running", p, r->engine_id);
        if (board_rank_failed(r->board, p, gen, why, sizeof(why)))
            return wsync_error(WSYNC_ERR_PEER, "local rank %d failed: %s", p, why);
    }
    return WSYNC_OK;
}

/* For a timed-out attempt: whom it still waited for, so a stalled or lost
 * peer is named: trainer ranks whose pieces of this rank's chunks never came,
 * local ranks whose chunks had not landed, trainer ranks that had not
 * answered the request. */
static void waiting_for(const fetch_t *f, char *out, size_t len)
{
    const wsync_plan_t *plan = f->plan;
    uint8_t seen[BOARD_MAX_RANKS] = {0};
    size_t n = 0;
    uint32_t k, c;
    int t, first = 1;
    out[0] = '\0';
    for (t = 0; t < plan->world; t++) {
        int missing = 0;
        for (c = 0; c < plan->nchunks && !missing; c++)
            if (f->remaining[c] > 0)
                for (k = plan->chunk_first[c]; k < plan->chunk_first[c + 1]; k++)
                    if (plan->pieces[k].src_rank == t)
                        missing = 1;
        if (missing) {
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%d",
                                  first ? "; pieces missing from trainer "
                                          "rank "
                                        : ", ",
                                  t);
            first = 0;
        }
    }
    first = 1;
    for (k = 0; f->land && k < f->npending; k++)
        if (land_rank(f, f->pending[k]) < BOARD_MAX_RANKS && !seen[land_rank(f, f->pending[k])]++) {
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%d",
                                  first ? "; still waiting for chunks "
                                          "landing on local rank "
                                        : ", ",
                                  land_rank(f, f->pending[k]));
            first = 0;
        }
    if (!first)
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, " (stalled or stopped?)");
    if (f->relay.on)
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, "; pieces come from the relay of engine %s at %s",
                              f->relay.id, f->relay.addr);
    if (f->late && f->digests == NULL) {
        char who[160];
        recv_late_missing(f->late, who, sizeof(who));
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              "; %u chunks summed and waiting for the late digests of %s, which never came "
                              "(announced before its digests: it stopped or failed after announcing?)",
                              f->nwaiting, who);
    }
    first = 1;
    for (t = 0; t < plan->world; t++)
        if (f->reqs[t].started && !recv_request_done(&f->reqs[t])) {
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%d",
                                  first ? "; no answer yet from trainer "
                                          "rank "
                                        : ", ",
                                  t);
            first = 0;
        }
}

/* Trainer answers (every poll), peers and the deadline (every 50 ms). */
/* The attempt ends with `st`: `what` happened, and what was missing. */
static wsync_status_t fetch_fail(const fetch_t *f, wsync_status_t st, const char *what)
{
    char why[400];
    waiting_for(f, why, sizeof(why));
    return wsync_error(st, "%s; version %llu: %u of %u chunks verified on engine %s rank %d%s", what,
                       (unsigned long long)f->v, f->ndone, f->plan->nchunks, f->r->engine_id, f->me, why);
}

static wsync_status_t fetch_watch(fetch_t *f)
{
    char who[300];
    int t;
    WSYNC_CHECK(fetch_relay_watch(f));
    for (t = 0; t < f->plan->world; t++)
        if (recv_request_failed(&f->reqs[t])) /* a peer gone: the attempt cannot finish */
            return fetch_fail(f, f->reqs[t].status, f->reqs[t].error);
    if (wsync_now_ns() - f->last_check <= 50000000ULL)
        return WSYNC_OK;
    f->last_check = wsync_now_ns();
    recv_progress_bytes(f->r->progress, (uint64_t)f->ndone * f->plan->chunk_size < f->plan->image_size
                                            ? (uint64_t)f->ndone * f->plan->chunk_size
                                            : f->plan->image_size);
    WSYNC_CHECK(recv_check_peers(f->r, f->gen));
    if (f->last_check > f->last_landed && f->last_check - f->last_landed >= RECV_REPLACED_CHECK_NS &&
        f->last_check - f->last_reg_check >= RECV_REPLACED_CHECK_NS) {
        f->last_reg_check = f->last_check;
        if (recv_trainer_replaced(f->r, f->reqs, f->plan->world, f->last_check - f->last_landed, who, sizeof(who)))
            return fetch_fail(f, WSYNC_ERR_PEER, who);
    }
    if (f->last_check > f->deadline) {
        char why[400];
        waiting_for(f, why, sizeof(why));
        return wsync_error(WSYNC_ERR_TIMEOUT,
                           "version %llu: %u of %u chunks verified on engine %s rank %d when the timeout passed%s",
                           (unsigned long long)f->v, f->ndone, f->plan->nchunks, f->r->engine_id, f->me, why);
    }
    return WSYNC_OK;
}

static void fetch_end(fetch_t *f, wsync_status_t st)
{
    int t;
    uint32_t k;
    for (; f->fn > 0; f->fn--, f->fh = (f->fh + 1) % FANOUT_INFLIGHT)
        f->r->mem->job_free(f->fan[f->fh].job); /* waits: the copy must not outlive the attempt */
    for (k = 0; k < f->ninflight; k++)
        recv_dgroup_end(&f->groups[f->inflight[k]], f->r->mem); /* waits likewise */
    free(f->groups);
    free(f->inflight);
    recv_release_end(&f->rl);
    free(f->direct);
    fetch_relay_end(f);
    if (st != WSYNC_OK)
        recv_transport_reset(f->r); /* stale puts of this attempt can no longer land */
    for (t = 0; f->reqs && t < f->plan->world; t++) {
        if (st != WSYNC_OK) /* a silent peer's request ends now, not at the deadline */
            recv_request_abort(&f->reqs[t]);
        recv_request_end(&f->reqs[t]);
    }
    free(f->remaining);
    free(f->mine);
    free(f->pending);
    free(f->rg);
    free(f->sums);
    free(f->reqs);
    free(f->addrs);
    free(f->tnames);
    free(f->put_sum);
    free(f->has_put_sum);
    if (f->late) {
        recv_late_end(f->late); /* frees the digests f->digests may point to */
        free(f->late);
    }
    free(f->late_sum);
    free(f->waiting);
    free(f->wlanded);
}

/* Late digests: the thread that waits for them, and room for the sums of
 * the chunks that come first. */
static wsync_status_t late_begin(fetch_t *f)
{
    const wsync_plan_t *plan = f->plan;
    f->late = calloc(1, sizeof(*f->late));
    f->late_sum = calloc(plan->npieces + 1, sizeof(*f->late_sum));
    f->waiting = calloc(plan->nchunks + 1, sizeof(*f->waiting));
    f->wlanded = calloc(plan->nchunks + 1, 1);
    if (!f->late || !f->late_sum || !f->waiting || !f->wlanded) {
        free(f->late);
        f->late = NULL;
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    if (recv_late_start(f->late, f->r->control_url, f->r->token, f->sl, f->v, f->deadline) != WSYNC_OK) {
        free(f->late);
        f->late = NULL;
        return WSYNC_ERR_NOMEM;
    }
    wsync_trace("engine %s rank %d: version %llu was announced before its digests: landing while they come",
                f->r->engine_id, f->me, (unsigned long long)f->v);
    return WSYNC_OK;
}

wsync_status_t recv_fetch(wsync_receiver_t *r, const board_attempt_t *a, const wsync_sync_layout_t *sl,
                          const uint64_t *digests, int late, uint64_t deadline)
{
    fetch_t f = {.r = r,
                 .sl = sl,
                 .plan = sl->plan,
                 .digests = late ? NULL : digests,
                 .gen = a->gen,
                 .v = a->version,
                 .deadline = deadline,
                 .slot = a->slot,
                 .me = r->cfg.local_rank,
                 .image = r->win[a->slot].ptr,
                 .dm = r->cur_dm && r->cur_dm->in_place ? r->cur_dm : NULL,
                 /* Test hook (common/base/fault.h): slow the landing of each chunk so a
                  * test can kill a rank in the middle of a pull. */
                 .land_delay_ms = (int)wsync_fault(WSYNC_FAULT_LAND_DELAY_MS)};
    wsync_status_t st;

    /* Nothing lands in this slot before its requests go out: from here its
     * relay serves only chunks of this version verified here. */
    if (r->relay)
        relay_slot_begin(r->relay, a->slot, r->win[a->slot].ptr, r->image_len, a->version, sl->plan,
                         sl->layout_digest);
    WSYNC_CHECK(fetch_join(&f)); /* nothing to undo yet */
    st = late ? late_begin(&f) : WSYNC_OK;
    if (st == WSYNC_OK && f.dm)
        st = recv_release_begin(&f.rl, r, a, f.plan->nchunks);
    if (st == WSYNC_OK)
        st = fetch_prepare(&f);
    if (st == WSYNC_OK)
        st = fetch_request(&f);
    while (st == WSYNC_OK && f.ndone < f.plan->nchunks) {
        int progressed = 0, got = 0;
        st = fetch_land(&f, &progressed, &got);
        if (st == WSYNC_OK)
            st = fetch_fan_out(&f, &progressed);
        if (st == WSYNC_OK)
            st = fetch_reap(&f, &progressed);
        if (st == WSYNC_OK)
            st = fetch_late(&f, &progressed);
        recv_release_poll(&f.rl, release_chunk, &f);
        if (st == WSYNC_OK)
            st = fetch_watch(&f);
        if (st == WSYNC_OK && !progressed && got == 0) {
            if (all_summed(&f))
                usleep(50); /* only the late digests to wait for: seen within 50 us */
            else if (f.npending > 0 || f.fn > 0 || f.ninflight > 0 || r->ntr != 1)
                usleep(200);
        }
    }
    if (st == WSYNC_OK)
        recv_release_drain(&f.rl, r, release_chunk, &f, deadline);
    fetch_end(&f, st);
    return st;
}
