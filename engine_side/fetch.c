/* fetch.c: the data part of one pull attempt on one engine rank, as phases:
 *   join      wait for the landing map, map the peers' windows (pull.h,
 *             shared with fetch_targets.c, as the watch and its messages);
 *   prepare   split the chunks into those landing here and those to copy;
 *   request   expect every piece landing here, ask each trainer rank that
 *             owns some of them to put them;
 *   then, until every chunk of this rank's image is verified, in turn:
 *   land      take the transports' completions (pull_land.c); a chunk
 *             whose last piece landed is verified (chunk_verify.h) and marked landed on the board (against
 *             the sums its puts brought along where every one did: the
 *             local transport's copy inside one GPU digests what it writes,
 *             so those bytes are not read a second time);
 *   fan out   queue a copy (and its digests) of each chunk that landed on
 *             another rank, as soon as the board says it did (a chunk the
 *             map lands on every rank of its landing rank's GPU lands here
 *             too when this rank shares that GPU: no fan-out);
 *   reap      verify finished copies;
 *   watch     trainer answers, the relay, peers, the deadline (pull.h);
 *             late digests (chunk_verify.c) are polled beside it.
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
#include "engine_side/delta_land.h"
#include "engine_side/fetch_internal.h"
#include "engine_side/relay.h"

static uint32_t chunk_npieces(const wsync_plan_t *p, uint32_t c)
{
    return p->chunk_first[c + 1] - p->chunk_first[c];
}

/* The rank chunk c lands on (and is copied from by ranks that fan it out). */
static int land_rank(const fetch_t *f, uint32_t c)
{
    return f->p.land[c] & BOARD_LAND_RANK;
}

/* 1 if chunk c lands on this rank: it is the landing rank, or shares its
 * GPU where the map says every rank there lands the chunk. */
static int lands_here(const fetch_t *f, uint32_t c)
{
    const int p = land_rank(f, c);
    return p == f->p.me || ((f->p.land[c] & BOARD_LAND_GPU) &&
                            board_rank_device(f->p.r->board, p) == board_rank_device(f->p.r->board, f->p.me));
}

static wsync_status_t fetch_prepare(fetch_t *f)
{
    const wsync_plan_t *plan = f->plan;
    uint32_t c, maxp = 1;
    for (c = 0; c < plan->nchunks; c++)
        if (chunk_npieces(plan, c) > maxp)
            maxp = chunk_npieces(plan, c);
    WSYNC_CHECK(recv_pull_alloc(&f->p));
    WSYNC_CHECK(recv_verify_begin(&f->ver, &f->p, plan->npieces, maxp, f->digests, f->late));
    WSYNC_CHECK(recv_groups_begin(&f->grp, f->dm, plan->nchunks));
    for (c = 0; c < plan->nchunks; c++)
        if (lands_here(f, c)) {
            f->p.remaining[c] = chunk_npieces(plan, c);
            f->p.mine[c / 8] |= (unsigned char)(1u << (c % 8));
            f->p.nland++;
        } else {
            f->p.pending[f->p.npending++] = c;
        }
    return recv_trainer_addrs(f->p.r, plan->world, f->p.addrs, f->p.tnames);
}

/* Expect trainer rank t's pieces of the chunks asked for here (those landing
 * here; after a relay was given up, those still missing), and ask it to put
 * them. */
wsync_status_t fetch_request_rank(recv_pull_t *p, int t)
{
    fetch_t *f = container_of(p, fetch_t, p);
    wsync_receiver_t *r = f->p.r;
    const wsync_plan_t *plan = f->plan;
    recv_transport_t *rt;
    wsync_status_t st;
    json_t *msg;
    size_t k, n = 0;
    for (k = 0; k < plan->rank_npieces[t]; k++)
        if (recv_pull_is_mine(&f->p, plan->pieces[plan->rank_pieces[t][k]].chunk))
            n++;
    if (n == 0)
        return WSYNC_OK;
    WSYNC_CHECK(recv_transport_ensure(r, f->p.tnames[t], &rt));
    for (k = 0; k < plan->rank_npieces[t]; k++) {
        const wsync_piece_t *pc = &plan->pieces[plan->rank_pieces[t][k]];
        if (!recv_pull_is_mine(&f->p, pc->chunk))
            continue;
        WSYNC_CHECK(rt->ops->expect(rt->t, t, rt->region[f->p.slot], pc->offset, pc->len,
                                    ((uint64_t)f->p.reqid << 32) | pc->id));
    }
    if (rt->ops->expect_flush)
        rt->ops->expect_flush(rt->t, t);
    if (f->p.addrs[t][0] == '\0')
        return wsync_error(WSYNC_ERR_NOT_FOUND, "trainer rank %d is not registered at the control endpoint", t);
    msg = fetch_pull_json(f, rt);
    if (msg && (st = recv_delta_ask(f, t, rt, msg)) != WSYNC_OK) { /* the base and where its wires go */
        json_decref(msg);
        return st;
    }
    return recv_request_start(&f->p.reqs[t], &r->pull_conns, &r->auth, t, f->p.addrs[t], msg, f->p.deadline);
}

json_t *fetch_pull_json(const fetch_t *f, const recv_transport_t *rt)
{
    wsync_pull_request_t pr;
    recv_pull_request_init(&pr, f->p.r, f->p.v, f->p.reqid, rt, f->p.slot, f->p.sl->layout_digest, f->p.deadline);
    pr.chunks = f->p.mine;
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
    f->p.reqid = recv_new_reqid(f->p.reqid);
    f->p.last_landed = wsync_now_ns();
    /* A lone rank: no other rank reads its image, so every destination byte
     * but the ends may land straight in the caller's tensors (not while
     * this node relays: its relay serves out of the image). */
    WSYNC_CHECK(recv_transport_direct(f->p.r, f->p.slot, f->p.tnames, f->plan->world,
                                      f->dm && f->p.r->cfg.local_world == 1 && !recv_node_relays(f->p.r), NULL,
                                      &f->direct, &f->ndirect));
    WSYNC_CHECK(fetch_relay_request(f, &relayed));
    if (!relayed)
        WSYNC_CHECK(recv_delta_begin(f));
    for (t = 0; t < f->plan->world && !relayed; t++)
        WSYNC_CHECK(fetch_request_rank(&f->p, t));
    wsync_trace("engine %s rank %d: requests sent", f->p.r->engine_id, f->p.me);
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
    const char *src = landed ? f->image : f->p.r->peers[land_rank(f, c)][f->p.slot].ptr;
    return recv_groups_start(&f->grp, &f->p, &f->ver, f->image, src, (uint64_t)c * f->plan->chunk_size,
                             chunk_len(f->plan, c), c, landed, landed && f->ndirect > 0);
}

/* A sparse image's chunk c (recv_release_poll's callback). */
static void release_chunk(void *arg, uint32_t c)
{
    const fetch_t *f = arg;
    recv_release_range(&f->rl, (uint64_t)c * f->plan->chunk_size, chunk_len(f->plan, c));
}

/* A chunk this rank holds verified (landed here: marked landed on the board;
 * the ops' chunk_verified, chunk_verify.h). */
static wsync_status_t ops_chunk_verified(recv_pull_t *p, uint32_t c, int landed)
{
    fetch_t *f = container_of(p, fetch_t, p);
    if (!landed)
        board_mark_copied(f->p.r->board, f->p.slot, c, f->p.gen); /* read out of the landing rank's window */
    if (!landed || (land_rank(f, c) == f->p.me && recv_release_landed(&f->rl, c, f->p.r->cfg.local_world - 1)))
        release_chunk(f, c);
    if (f->p.r->relay) /* local rank 0 of a relaying node: other nodes may have it now */
        relay_chunk_verified(f->p.r->relay, f->p.slot, c);
    if (landed) {
        if (land_rank(f, c) == f->p.me) /* the copy other GPUs' ranks read */
            board_mark_landed(f->p.r->board, f->p.slot, c, f->p.gen);
        if (f->p.nlanded++ == 0 || f->p.nlanded == f->p.nland || f->p.nlanded % 32 == 0)
            wsync_trace("engine %s rank %d: chunk %u landed and verified (%u of %u)", f->p.r->engine_id, f->p.me,
                        c, f->p.nlanded, f->p.nland);
    } else if (++f->ncopied == f->plan->nchunks - f->p.nland) {
        wsync_trace("engine %s rank %d: fan-out copies done and verified", f->p.r->engine_id, f->p.me);
    } else if (f->ncopied % 32 == 0) {
        wsync_trace("engine %s rank %d: %u fan-out copies verified", f->p.r->engine_id, f->p.me, f->ncopied);
    }
    f->p.ndone++;
    return WSYNC_OK;
}

/* Pieces applied as delta wires checked before the chunk's digests. */
static wsync_status_t ops_landed_check(recv_pull_t *p, uint32_t c, const uint64_t *sums, int *again)
{
    fetch_t *f = container_of(p, fetch_t, p);
    *again = 0;
    return f->delta ? recv_delta_verify(f, c, sums, again) : WSYNC_OK;
}

/* A piece of this attempt landed here: the put's key is its region offset,
 * the piece's image offset here; the sum of the bytes it wrote, if it
 * brought one along. */
static int ops_unit_at(const recv_pull_t *p, uint32_t id, uint32_t *chunk, uint64_t *len)
{
    const wsync_plan_t *plan = container_of(p, fetch_t, p)->plan;
    if (id >= plan->npieces)
        return 0;
    *chunk = plan->pieces[id].chunk;
    *len = plan->pieces[id].len;
    return 1;
}

static void ops_unit_landed(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp)
{
    recv_verify_unit_landed(&container_of(p, fetch_t, p)->ver, id, cp);
}

static uint64_t ops_unit_off(const recv_pull_t *p, size_t u)
{
    return container_of(p, fetch_t, p)->plan->pieces[u].offset;
}

/* Chunk c's last piece landed: verified (against its puts' sums where every
 * one brought one), or written through to the caller's tensors first. */
static wsync_status_t ops_chunk_landed(recv_pull_t *p, uint32_t c)
{
    fetch_t *f = container_of(p, fetch_t, p);
    if (f->land_delay_ms > 0)
        usleep((useconds_t)f->land_delay_ms * 1000);
    if (f->dm)
        return group_start(f, c, 1); /* marked landed once verified */
    return recv_verify_landed(&f->p, &f->ver, c, f->image);
}

/* Copy chunks that landed on other ranks, whichever landed first (a slow
 * source must not hold up the others), each copy and its digests queued as
 * a job of the fan-out ring (chunk_fanout.h). */
static wsync_status_t fetch_fan_out(fetch_t *f, int *progressed)
{
    const wsync_plan_t *plan = f->plan;
    uint32_t k, keep = 0;
    for (k = 0; k < f->p.npending; k++) {
        uint32_t cc = f->p.pending[k];
        uint64_t off = (uint64_t)cc * plan->chunk_size;
        uint64_t len = chunk_len(plan, cc);
        size_t np;
        if ((f->dm ? recv_groups_room(&f->grp) : recv_fan_room(&f->fan)) == 0 ||
            !board_is_landed(f->p.r->board, f->p.slot, cc, f->p.gen)) {
            f->p.pending[keep++] = cc;
            continue;
        }
        if (f->dm) {
            wsync_status_t st = group_start(f, cc, 0);
            if (st != WSYNC_OK) {
                for (; k < f->p.npending; k++) /* cc and the rest stay pending */
                    f->p.pending[keep++] = f->p.pending[k];
                f->p.npending = keep;
                return st;
            }
            *progressed = 1;
            continue;
        }
        np = recv_verify_ranges(&f->p, &f->ver, cc, f->image);
        WSYNC_CHECK(recv_fan_start(&f->fan, f->p.r->mem, cc, 1, f->image + off,
                                   (char *)f->p.r->peers[land_rank(f, cc)][f->p.slot].ptr + off, len, f->ver.rg, np));
        *progressed = 1;
    }
    f->p.npending = keep;
    return WSYNC_OK;
}

/* Verify the copies that finished, oldest first. */
static wsync_status_t fetch_reap(fetch_t *f, int *progressed)
{
    if (f->dm)
        return recv_groups_reap(&f->grp, &f->p, &f->ver, progressed);
    for (;;) {
        uint32_t cc = 0;
        int done = 0, last;
        WSYNC_CHECK(recv_fan_reap(&f->fan, f->p.r->mem, &cc, &last, f->ver.sums, &done));
        if (!done)
            return WSYNC_OK;
        WSYNC_CHECK(recv_verify_summed(&f->p, &f->ver, cc, 0, f->ver.sums));
        *progressed = 1;
    }
}

/* ---- what the shared phases (pull.h) ask of the whole image ---- */

static size_t ops_chunk_units(const recv_pull_t *p, uint32_t c, size_t *first)
{
    const fetch_t *f = container_of(p, fetch_t, p);
    *first = f->plan->chunk_first[c];
    return chunk_npieces(f->plan, c);
}

static int ops_unit_src(const recv_pull_t *p, size_t u)
{
    return container_of(p, fetch_t, p)->plan->pieces[u].src_rank;
}

static int ops_land_rank(const recv_pull_t *p, uint32_t c)
{
    return land_rank(container_of(p, fetch_t, p), c);
}

static uint64_t ops_bytes_in(const recv_pull_t *p)
{
    const wsync_plan_t *plan = container_of(p, fetch_t, p)->plan;
    uint64_t in = (uint64_t)p->ndone * plan->chunk_size;
    return in < plan->image_size ? in : plan->image_size;
}

/* The sums the relay's puts brought along count no more. */
static void ops_chunk_reasked(recv_pull_t *p, uint32_t c)
{
    fetch_t *f = container_of(p, fetch_t, p);
    recv_verify_reasked(&f->ver, f->plan->chunk_first[c], chunk_npieces(f->plan, c));
}

/* Late digests that never came (appended to a failure). */
static void ops_waiting_more(const recv_pull_t *p, char *out, size_t len)
{
    recv_verify_waiting(p, &container_of(p, fetch_t, p)->ver, out, len);
}

static const recv_pull_ops_t fetch_ops = {.unit = "pieces",
                                          .unit1 = "piece",
                                          .unit_at = ops_unit_at,
                                          .unit_off = ops_unit_off,
                                          .chunk_verified = ops_chunk_verified,
                                          .unit_landed = ops_unit_landed,
                                          .chunk_landed = ops_chunk_landed,
                                          .chunk_units = ops_chunk_units,
                                          .unit_src = ops_unit_src,
                                          .land_rank = ops_land_rank,
                                          .bytes_in = ops_bytes_in,
                                          .waiting_more = ops_waiting_more,
                                          .chunk_reasked = ops_chunk_reasked,
                                          .request_rank = fetch_request_rank,
                                          .delta_landed = recv_delta_landed,
                                          .landed_check = ops_landed_check};

static void fetch_end(fetch_t *f, wsync_status_t st)
{
    recv_fan_end(&f->fan, f->p.r->mem);
    recv_groups_end(&f->grp, f->p.r->mem); /* waits likewise */
    recv_release_end(&f->rl);
    free(f->direct);
    recv_delta_end(f, st); /* its staging region goes before the transports may */
    recv_pull_free(&f->p, st);
    recv_verify_end(&f->ver);
}

wsync_status_t recv_fetch(wsync_receiver_t *r, const board_attempt_t *a, const wsync_sync_layout_t *sl,
                          const uint64_t *digests, int late, uint64_t deadline)
{
    fetch_t f = {.p = {.ops = &fetch_ops,
                       .r = r,
                       .sl = sl,
                       .gen = a->gen,
                       .v = a->version,
                       .deadline = deadline,
                       .slot = a->slot,
                       .me = r->cfg.local_rank,
                       .world = sl->plan->world,
                       .nchunks = sl->plan->nchunks,
                       .nwant = sl->plan->nchunks},
                 .plan = sl->plan,
                 .digests = digests,
                 .late = late,
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
    WSYNC_CHECK(recv_pull_join(&f.p)); /* nothing to undo yet; rank 0 checked the chunk count */
    st = f.dm ? recv_release_begin(&f.rl, r, a, f.plan->nchunks) : WSYNC_OK;
    if (st == WSYNC_OK)
        st = fetch_prepare(&f);
    if (st == WSYNC_OK)
        st = fetch_request(&f);
    while (st == WSYNC_OK && f.p.ndone < f.p.nwant) {
        int progressed = 0, got = 0;
        st = recv_pull_land(&f.p,
                            f.p.npending > 0 || f.fan.n > 0 || f.grp.ninflight > 0 ||
                                recv_verify_all_summed(&f.p, &f.ver),
                            &progressed, &got);
        if (st == WSYNC_OK)
            st = fetch_fan_out(&f, &progressed);
        if (st == WSYNC_OK)
            st = fetch_reap(&f, &progressed);
        if (st == WSYNC_OK)
            st = recv_verify_late_poll(&f.p, &f.ver, &progressed);
        if (st == WSYNC_OK)
            st = recv_delta_poll(&f, &progressed);
        recv_release_poll(&f.rl, release_chunk, &f);
        if (st == WSYNC_OK)
            st = recv_pull_watch(&f.p);
        if (st == WSYNC_OK && !progressed && got == 0) {
            if (recv_verify_all_summed(&f.p, &f.ver))
                usleep(50); /* only the late digests to wait for: seen within 50 us */
            else if (f.p.npending > 0 || f.fan.n > 0 || f.grp.ninflight > 0 || r->ntr != 1)
                usleep(200);
        }
    }
    if (st == WSYNC_OK)
        recv_release_drain(&f.rl, r, release_chunk, &f, deadline);
    fetch_end(&f, st);
    return st;
}
