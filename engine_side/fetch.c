/* fetch.c: the one fetch engine: the data part of one pull attempt
 * on an engine rank whose node holds targets (engine layouts), or the whole
 * image, which is the identity target (fetch_whole.c: its node plan is the
 * version's plan on rank 0's landing map), as phases:
 *   join      wait for rank 0's landing map and check it is the node plan
 *             this rank derived (the whole image: build the plan from it);
 *             map the peers' windows (pull.h, as the watch, its messages
 *             and the relay's fall back);
 *   prepare   the chunks landing here, and those landing elsewhere that
 *             hold bytes this rank copies;
 *   request   (fetch_request.c) in place into the caller's tensors on the host, the bytes
 *             no other rank reads land straight in them (the transports'
 *             redirect, recv_transport_direct); expect every put landing
 *             here; ask every trainer rank (each also answers with the
 *             digests of this rank's segments it owns; the whole image asks
 *             only the ranks with pieces landing here; each asks for
 *             deltas where delta_land.h may);
 *   then, until every chunk this rank needs is in:
 *   land      take the transports' completions (pull_land.c); a chunk
 *             whose last put landed gets its copies inside this rank, then
 *             is marked landed;
 *   fan out   copy, out of the landing rank's window, what this rank needs
 *             of each chunk the board says landed elsewhere (as jobs of
 *             the fan-out ring, chunk_fanout.h); a chunk the whole image's
 *             map lands on every rank of one GPU lands here too;
 *   watch     trainer answers, peers, the deadline (pull_watch.c);
 *   release   in place into the caller's tensors on the host, the image
 *             is a sparse window: a chunk's pages are freed once written
 *             through, and, for bytes landed here, once every rank that
 *             copies them out marked the chunk copied on the board, so a
 *             rank holds its tensors plus the chunks in flight;
 *   verify    every put this rank holds against the trainers' put digests
 *             (their answers), with the sums kept as chunks landed and the
 *             rest summed in one call (target_puts.h); where the plan does
 *             not allow it, every segment of this rank's target against the
 *             trainer's digest; in place with the caller's destination tensors, their
 *             bytes are the ones digested (each chunk was written through
 *             to them when it was complete here: chunk_complete).
 * A chunk is marked landed before it is verified: every rank verifies its
 * own destination bytes, so a corrupted byte is caught on every rank that
 * holds it, before the node reports ready. A node of identity targets (the
 * whole image as targets: fetch_identity_node, and the whole image itself)
 * verifies instead each chunk as it lands or is copied in against the
 * record's piece digests (chunk_verify.h: fused put sums, late digests,
 * delta wires through landed_check) and marks it landed once verified. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/digest/digest.h"
#include "common/base/log.h"
#include "common/proto/pull_request.h"
#include "common/base/util.h"
#include "engine_side/delta_land.h"
#include "engine_side/fetch_internal.h"

/* Rank 0's landing map is the node plan this rank derived (the whole
 * image's node plan is built from it). */
static wsync_status_t ops_check_landing(recv_pull_t *p)
{
    fetch_t *f = container_of(p, fetch_t, p);
    const uint8_t *land = p->land;
    uint32_t c;
    if (f->tl == NULL)
        return fetch_whole_plan(f);
    for (c = 0; c < f->np->nchunks; c++)
        if (land[c] != f->np->chunks[c].land_rank)
            return wsync_error(WSYNC_ERR_CONFLICT,
                               "engine %s rank %d: local rank 0's plan lands chunk %u on rank %d, this rank's on "
                               "%d: "
                               "the local ranks disagree on the targets (give every rank the same --tp and "
                               "--rules)",
                               f->p.r->engine_id, f->p.me, c, land[c], f->np->chunks[c].land_rank);
    return WSYNC_OK;
}

/* 1 if some copy of chunk c goes to this rank. */
static int copies_to_me(const fetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++)
        if (f->np->copies[k].to_rank == f->p.me)
            return 1;
    return 0;
}

static wsync_status_t fetch_prepare(fetch_t *f)
{
    const wsync_node_plan_t *np = f->np;
    size_t nseg = f->tl ? f->tl->seg->nputs : 0, maxputs = 1;
    uint32_t c;
    WSYNC_CHECK(recv_pull_alloc(&f->p));
    for (c = 0; c < np->nchunks; c++)
        maxputs = np->chunks[c].nputs > maxputs ? np->chunks[c].nputs : maxputs;
    if (f->identity) {
        WSYNC_CHECK(recv_verify_begin(&f->ver, &f->p, np->nputs, maxputs, f->record, f->late));
        WSYNC_CHECK(recv_groups_begin(&f->grp, f->dm, np->nchunks));
    } else {
        WSYNC_CHECK(recv_tputs_begin(&f->tp, np, f->p.me, !f->p.r->images.gpu_sparse));
        if (f->tp.on)
            WSYNC_CHECK(recv_verify_begin(&f->ver, &f->p, np->nputs, maxputs, NULL, 0));
    }
    f->digests = calloc(nseg + 1, sizeof(*f->digests));
    f->have = calloc(nseg + 1, 1);
    f->none = calloc((np->nchunks + 7) / 8 + 1, 1);
    if (!f->digests || !f->have || !f->none)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    for (c = 0; c < np->nchunks; c++)
        if (fetch_lands_here(f, c)) {
            f->p.remaining[c] = (uint32_t)np->chunks[c].nputs;
            f->p.mine[c / 8] |= (unsigned char)(1u << (c % 8));
            f->p.nland++;
        } else if (copies_to_me(f, c)) {
            f->p.pending[f->p.npending++] = c;
        }
    f->p.nwant = f->p.nland + f->p.npending;
    return recv_trainer_addrs(f->p.r, f->p.world, f->p.addrs, f->p.tnames);
}

static wsync_status_t fetch_request(fetch_t *f)
{
    wsync_receiver_t *r = f->p.r;
    /* (not on a whole GPU image of an identity node: its group jobs write
     * whole destinations through, dests_jobs.c) */
    const int groups_whole = f->identity && r->mem->kind == WSYNC_MEM_CUDA && !r->images.gpu_sparse;
    int t, relayed = 0;
    /* (not while this node relays: its relay serves out of the ranks' images) */
    /* a sparse GPU image: the bytes other ranks copy land straight too (they
     * read them out of its fan-out window, fetch_fan_publish); the whole image:
     * a lone rank's, whose image no other rank reads */
    if (f->tl)
        WSYNC_CHECK(recv_transport_direct(r, f->p.slot, f->p.tnames, f->p.world,
                                          !recv_node_relays(&r->node) && !groups_whole,
                                          r->images.gpu_sparse ? NULL : f->np, &f->direct, &f->ndirect));
    else
        WSYNC_CHECK(
            recv_transport_direct(r, f->p.slot, f->p.tnames, f->p.world,
                                  f->dm && r->cfg.local_world == 1 && !recv_node_relays(&r->node) && !groups_whole,
                                  NULL, &f->direct, &f->ndirect));
    f->p.reqid = recv_new_reqid(f->p.reqid);
    f->p.last_landed = wsync_now_ns();
    WSYNC_CHECK(recv_delta_begin(f)); /* before the relay's request, which may name the base too */
    WSYNC_CHECK(fetch_relay_request(f, &relayed));
    /* else by segment (target_puts.h); an attempt that asks deltas checks
     * its applied puts against the digests the trainers answer with
     * (delta_land.h: only requests over tcp ask them) */
    f->tp.on = f->tp.on && !relayed && !recv_delta_asks(f) &&
               (f->ndirect > 0 || !(r->run.dm && r->run.dm->in_place)); /* target_puts.h: in place, direct */
    /* relayed, the whole image and identity targets ask no trainer rank (the record holds their digests) */
    for (t = 0; t < f->p.world && ((f->tl && !f->identity) || !relayed); t++)
        WSYNC_CHECK(fetch_request_rank(f, t, relayed));
    wsync_trace("engine %s rank %d: %srequests sent", r->engine_id, f->p.me, f->tl ? "target " : "");
    return WSYNC_OK;
}

/* Chunk c is complete in this rank's image (landed here and copied inside
 * it, or copied out of the landing rank's window). In place with the
 * caller's destination tensors, its bytes are written through to them
 * (dests.h); verification then digests the caller's bytes. */
static wsync_status_t chunk_complete(fetch_t *f, uint32_t c)
{
    return recv_dests_chunk_in(f->p.r->mem, f->p.r->run.dm, f->np, c, f->p.me, f->image, f->direct, f->ndirect);
}

static void fetch_release(fetch_t *f)
{
    recv_release_poll(&f->rl, fetch_release_landed, f);
}

static int ops_unit_at(const recv_pull_t *p, uint32_t id, uint32_t *chunk, uint64_t *len)
{
    const wsync_node_plan_t *np = container_of(p, fetch_t, p)->np;
    if (id >= np->nputs)
        return 0;
    *chunk = np->puts[id].chunk;
    *len = np->puts[id].len;
    return 1;
}

/* Chunk c landed here (verified, on an identity node): its copies inside
 * this rank, written through, published to the fan-out window, marked
 * landed. */
static wsync_status_t landed_done(fetch_t *f, uint32_t c)
{
    WSYNC_CHECK(fetch_copy_chunk(f, c, f->p.me, 0, NULL, 0));
    if (f->grp.dm == NULL) /* else its group wrote it through */
        WSYNC_CHECK(chunk_complete(f, c));
    WSYNC_CHECK(fetch_fan_publish(f, c));
    if (f->np->chunks[c].land_rank == f->p.me) /* the copy other GPUs' ranks read */
        board_mark_landed(f->p.r->board, f->p.slot, c, f->p.gen);
    fetch_landed_release(f, c);
    fetch_relay_verified(f, c);
    if (f->p.nlanded++ == 0 || f->p.nlanded == f->p.nland)
        wsync_trace("engine %s rank %d: chunk %u landed%s (%u of %u)", f->p.r->engine_id, f->p.me, c,
                    f->identity ? " and verified" : "", f->p.nlanded, f->p.nland);
    f->p.ndone++;
    return WSYNC_OK;
}

/* Chunk c's last put landed here: on an identity node verified first
 * (chunk_verify.h: its puts' sums, or one digest pass), then landed_done;
 * else its puts applied as delta wires first (delta_land.h: a failed one
 * asked again, the chunk not done), then landed_done, then, verifying by
 * put, its sums kept (target_puts.h: summed once written through, in
 * place). */
static wsync_status_t ops_chunk_landed(recv_pull_t *p, uint32_t c)
{
    fetch_t *f = container_of(p, fetch_t, p);
    int again = 0;
    if (f->land_delay_ms > 0)
        usleep((useconds_t)f->land_delay_ms * 1000);
    if (f->identity)
        return f->grp.dm ? fetch_identity_group(f, c, f->p.me) : recv_verify_landed(p, &f->ver, c, f->image);
    if (f->delta)
        WSYNC_CHECK(recv_delta_verify(f, c, NULL, &again));
    if (again)
        return WSYNC_OK;
    WSYNC_CHECK(landed_done(f, c));
    return f->tp.on ? recv_tputs_landed(&f->tp, p, &f->ver, c, f->p.r->mem, f->dm, f->image) : WSYNC_OK;
}

/* Chunk c's copies out of its landing rank's window are done. */
static wsync_status_t copied_in(fetch_t *f, uint32_t c)
{
    if (f->tp.on) /* the copies' bytes here, summed by put at the check */
        recv_tputs_copied(&f->tp, c);
    board_mark_copied(f->p.r->board, f->p.slot, c, f->p.gen);
    if (f->grp.dm == NULL) /* else its group wrote it through */
        WSYNC_CHECK(chunk_complete(f, c));
    fetch_release_copied_in(f, c);
    fetch_relay_verified(f, c);
    if (++f->p.ndone - f->p.nlanded == 1 || f->p.ndone == f->p.nwant)
        wsync_trace("engine %s rank %d: chunk %u copied in from local rank %d (%u of %u)", f->p.r->engine_id,
                    f->p.me, c, f->np->chunks[c].land_rank, f->p.ndone - f->p.nlanded, f->p.nwant - f->p.nland);
    return WSYNC_OK;
}

/* Copy what this rank needs of chunks that landed on other ranks, whichever
 * landed first, as jobs of the fan-out ring (chunk_fanout.h: a chunk's
 * copies go once the ring has room for all of them); a sparse GPU image's
 * copies (copy_sparse), and a chunk of more copies than the ring holds, are
 * done at once. */
static wsync_status_t fetch_fan_out(fetch_t *f, int *progressed)
{
    uint32_t k, keep = 0;
    for (k = 0; k < f->p.npending; k++) {
        uint32_t c = f->p.pending[k];
        const int from = f->np->chunks[c].land_rank;
        const size_t n = fetch_copies_from(f, c, from);
        const int jobs = !f->p.r->images.gpu_sparse && n > 0 && n <= RECV_FAN_INFLIGHT;
        if ((f->grp.dm ? recv_groups_room(&f->grp) == 0 : jobs && (size_t)recv_fan_room(&f->fan) < n) ||
            !board_is_landed(f->p.r->board, f->p.slot, c, f->p.gen)) {
            f->p.pending[keep++] = c;
            continue;
        }
        if (f->grp.dm) { /* an identity node in place with the caller's tensors */
            WSYNC_CHECK(fetch_identity_group(f, c, from));
            *progressed = 1;
            continue;
        }
        /* an identity node's one copy of the chunk digests its pieces as it goes */
        const size_t nrg = f->identity && jobs ? recv_verify_ranges(&f->p, &f->ver, c, f->image) : 0;
        WSYNC_CHECK(fetch_copy_chunk(f, c, from, jobs, f->ver.rg, nrg));
        if (f->p.npending == 1) /* the last chunk this rank copies in */
            wsync_trace("engine %s rank %d: last copy in queued: chunk %u from local rank %d", f->p.r->engine_id,
                        f->p.me, c, from);
        if (!jobs)
            WSYNC_CHECK(f->identity ? fetch_identity_copied(f, c) : copied_in(f, c));
        *progressed = 1;
    }
    f->p.npending = keep;
    return WSYNC_OK;
}

/* The fan-out ring's finished jobs, oldest first: a chunk whose last copy
 * finished is in (on an identity node, once its pieces' digests match). */
static wsync_status_t fetch_reap(fetch_t *f, int *progressed)
{
    if (f->grp.dm)
        return recv_groups_reap(&f->grp, &f->p, &f->ver, progressed);
    for (;;) {
        uint64_t none[1]; /* the copies have no digests but on an identity node */
        uint64_t *sums = f->identity ? f->ver.sums : none;
        uint32_t c = 0;
        int done = 0, last = 0;
        WSYNC_CHECK(recv_fan_reap(&f->fan, f->p.r->mem, &c, &last, sums, &done));
        if (!done)
            return WSYNC_OK;
        if (last)
            WSYNC_CHECK(f->identity ? recv_verify_summed(&f->p, &f->ver, c, 0, sums) : copied_in(f, c));
        *progressed = 1;
    }
}

/* Every trainer rank's answer: the digests of the segments it owns (an
 * identity node verified each chunk against the record: its answers are
 * checked for a failure alone). */
static wsync_status_t fetch_collect(fetch_t *f)
{
    const wsync_node_plan_t *seg = f->tl ? f->tl->seg : NULL;
    size_t i;
    int t;
    if (seg == NULL) /* the whole image: verified against the record; failed answers ended the watch */
        return WSYNC_OK;
    for (t = 0; t < f->p.world; t++) {
        const wsync_pull_reply_t *rep = &f->p.reqs[t].reply;
        size_t k;
        if (f->identity && !f->p.reqs[t].started) /* asked nothing: no puts of it land here */
            continue;
        while (!recv_request_done(&f->p.reqs[t])) { /* woken by the answer */
            fetch_release(f);
            WSYNC_CHECK(recv_pull_watch(&f->p));
            recv_request_wait(&f->p.reqs[t], 5);
        }
        if (f->p.reqs[t].status != WSYNC_OK)
            return wsync_error(f->p.reqs[t].status, "%s", f->p.reqs[t].error);
        f->tl->defs_sent[t] = 1;
        for (k = 0; k < rep->nsegments && !f->identity; k++) {
            uint32_t id = rep->segment_ids[k];
            if (id >= seg->nputs || seg->puts[id].src_rank != t)
                return wsync_error(WSYNC_ERR_PEER,
                                   "trainer rank %d answered a digest for segment %u, which %s of this rank's %zu "
                                   "segments",
                                   t, id, id >= seg->nputs ? "is none" : "it does not own", seg->nputs);
            f->digests[id] = rep->segment_digests[k];
            f->have[id] = 1;
        }
        WSYNC_CHECK(recv_tputs_answer(&f->tp, t, rep));
    }
    for (i = 0; i < seg->nputs && !f->identity && !f->tp.on; i++)
        if (!f->have[i])
            return wsync_error(WSYNC_ERR_PEER,
                               "trainer rank %d sent no digest for segment %zu of this rank's target",
                               seg->puts[i].src_rank, i);
    return WSYNC_OK;
}

/* ---- what the shared phases (pull.h) ask of a node of targets ---- */

static size_t ops_chunk_units(const recv_pull_t *p, uint32_t c, size_t *first)
{
    const wsync_tchunk_t *ch = &container_of(p, fetch_t, p)->np->chunks[c];
    *first = ch->first_put;
    return ch->nputs;
}

static uint64_t ops_unit_off(const recv_pull_t *p, size_t u)
{
    return container_of(p, fetch_t, p)->np->puts[u].dst_off;
}

/* On an identity node: chunk c verified (chunk_verify.h). */
static wsync_status_t ops_chunk_verified(recv_pull_t *p, uint32_t c, int landed)
{
    fetch_t *f = container_of(p, fetch_t, p);
    return landed ? landed_done(f, c) : copied_in(f, c);
}

/* On an identity node, or verifying by put: the sum its put brought along. */
static void ops_unit_landed(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp)
{
    fetch_t *f = container_of(p, fetch_t, p);
    if (f->identity || f->tp.on)
        recv_verify_unit_landed(&f->ver, id, cp);
}

/* On an identity node: the sums the relay's puts brought along count no more. */
static void ops_chunk_reasked(recv_pull_t *p, uint32_t c)
{
    fetch_t *f = container_of(p, fetch_t, p);
    if (f->identity || f->tp.on)
        recv_verify_reasked(&f->ver, f->np->chunks[c].first_put, f->np->chunks[c].nputs);
}

/* On an identity node: late digests that never came. */
static void ops_waiting_more(const recv_pull_t *p, char *out, size_t len)
{
    const fetch_t *f = container_of(p, fetch_t, p);
    if (f->identity)
        recv_verify_waiting(p, &f->ver, out, len);
}

static int ops_unit_src(const recv_pull_t *p, size_t u)
{
    return container_of(p, fetch_t, p)->np->puts[u].src_rank;
}

static int ops_land_rank(const recv_pull_t *p, uint32_t c)
{
    return container_of(p, fetch_t, p)->np->chunks[c].land_rank;
}

/* Chunks differ in size here: the share of them in, of the image. */
static uint64_t ops_bytes_in(const recv_pull_t *p)
{
    const uint64_t len = p->tl ? p->tl->image_len : p->sl->plan->image_size;
    return p->nwant ? len * p->ndone / p->nwant : 0;
}

/* An identity node: puts applied as delta wires checked before the
 * chunk's digests (delta_land.h). */
static wsync_status_t ops_landed_check(recv_pull_t *p, uint32_t c, const uint64_t *sums, int *again)
{
    fetch_t *f = container_of(p, fetch_t, p);
    *again = 0;
    return f->delta ? recv_delta_verify(f, c, sums, again) : WSYNC_OK;
}

/* After a relay was given up: the chunks still missing, and the digests
 * (the trainer ranks' earlier requests asked for digests alone). */
static wsync_status_t ops_request_rank(recv_pull_t *p, int t)
{
    return fetch_request_rank(container_of(p, fetch_t, p), t, 0);
}

/* One table; the whole image's differs in its messages' nouns (its puts
 * are the record's pieces) and in what a relay fall back asks again (the
 * trainer ranks were asked nothing: only those with missing pieces). */
#define TF_OPS                                                                                             \
    .unit_at = ops_unit_at, .unit_off = ops_unit_off, .chunk_verified = ops_chunk_verified,                \
    .unit_landed = ops_unit_landed, .chunk_landed = ops_chunk_landed, .chunk_units = ops_chunk_units,      \
    .unit_src = ops_unit_src, .land_rank = ops_land_rank, .check_landing = ops_check_landing,              \
    .bytes_in = ops_bytes_in, .waiting_more = ops_waiting_more, .chunk_reasked = ops_chunk_reasked,        \
    .request_rank = ops_request_rank, .delta_landed = recv_delta_landed, .landed_check = ops_landed_check, \
    .relay_gone = recv_delta_relay_gone
static const recv_pull_ops_t fetch_ops = {.unit = "puts", .unit1 = "put", .reask_all = 1, TF_OPS};
static const recv_pull_ops_t whole_ops = {.unit = "pieces", .unit1 = "piece", .reask_all = 0, TF_OPS};

static void fetch_end(fetch_t *f, wsync_status_t st)
{
    recv_fan_end(&f->fan, f->p.r->mem);    /* waits: no copy outlives the attempt */
    recv_groups_end(&f->grp, f->p.r->mem); /* waits likewise */
    recv_verify_end(&f->ver);
    recv_tputs_end(&f->tp);
    recv_dests_drain(f->p.r->mem, f->p.r->run.dm); /* write-through copies still queued (a failed pull) */
    if (st != WSYNC_OK && f->tl)
        memset(f->tl->defs_sent, 0, (size_t)f->p.world); /* a trainer may have restarted: send them again */
    recv_delta_end(f, st);                               /* its staging region goes before the transports may */
    recv_pull_free(&f->p, st);
    wsync_node_plan_free(f->whole_np);
    free(f->digests);
    free(f->have);
    free(f->none);
    recv_release_end(&f->rl);
    free(f->direct);
}

wsync_status_t recv_fetch(wsync_receiver_t *r, const board_attempt_t *a, const wsync_sync_layout_t *sl,
                          recv_tlayout_t *tl, const uint64_t *digests, int late, uint64_t deadline)
{
    fetch_t f = {.p = {.ops = tl ? &fetch_ops : &whole_ops,
                       .r = r,
                       .sl = sl,
                       .tl = tl,
                       .gen = a->gen,
                       .v = a->version,
                       .deadline = deadline,
                       .slot = a->slot,
                       .me = r->cfg.local_rank,
                       .world = sl->world,
                       .nchunks = tl ? tl->np->nchunks : sl->plan->nchunks},
                 .tl = tl,
                 .np = tl ? tl->np : NULL, /* the whole image's: built at the join */
                 .plan = sl->plan,
                 .image = r->images.win[a->slot].ptr,
                 .dm = r->run.dm && r->run.dm->in_place ? r->run.dm : NULL,
                 /* Test hook (common/base/fault.h): slow the landing of each chunk so a
                   * test can kill a rank in the middle of a pull. */
                 .land_delay_ms = (int)wsync_fault(WSYNC_FAULT_LAND_DELAY_MS),
                 .record = digests,
                 .late = late};
    wsync_status_t st = recv_pull_join(&f.p);

    if (st != WSYNC_OK) { /* nothing else to undo yet */
        wsync_node_plan_free(f.whole_np);
        return st;
    }
    f.identity = fetch_identity_node(&f);
    /* Nothing lands in this slot before its requests go out: from here its
     * relay serves only what this version verified (or landed) here. */
    if (r->node.relay && (tl == NULL || tl->hint_world == 0))
        st = fetch_relay_serve(&f);
    if (st == WSYNC_OK)
        st = recv_release_begin(&f.rl, r, a, f.np->nchunks);
    if (st == WSYNC_OK)
        st = fetch_prepare(&f);
    if (st == WSYNC_OK)
        st = fetch_request(&f);
    while (st == WSYNC_OK && f.p.ndone < f.p.nwant) {
        int progressed = 0, got = 0;
        const int summed = f.identity && recv_verify_all_summed(&f.p, &f.ver); /* late digests to wait for */
        st = recv_pull_land(&f.p, f.p.npending > 0 || f.fan.n > 0 || f.grp.ninflight > 0 || summed, &progressed,
                            &got);
        if (st == WSYNC_OK)
            st = fetch_fan_out(&f, &progressed);
        if (st == WSYNC_OK)
            st = fetch_reap(&f, &progressed);
        if (st == WSYNC_OK && f.identity)
            st = recv_verify_late_poll(&f.p, &f.ver, &progressed);
        if (st == WSYNC_OK)
            st = recv_delta_poll(&f, &progressed);
        fetch_release(&f);
        if (st == WSYNC_OK)
            st = recv_pull_watch(&f.p);
        if (st == WSYNC_OK && !progressed && got == 0 &&
            (summed || f.p.npending > 0 || f.fan.n > 0 || f.grp.ninflight > 0 || r->transports.ntr != 1))
            usleep(summed ? 50 : 200);
    }
    if (st == WSYNC_OK && tl)
        wsync_trace("engine %s rank %d: every chunk landed or copied in", r->engine_id, f.p.me);
    if (st == WSYNC_OK)
        st = fetch_collect(&f);
    if (st == WSYNC_OK && tl)
        wsync_trace("engine %s rank %d: every %s landed and every trainer's answer in", r->engine_id, f.p.me,
                    f.p.ops->unit1);
    if (st == WSYNC_OK && !f.identity)
        st = f.tp.on ? recv_tputs_check(&f.tp, &f.p, tl, r->mem, f.dm, f.image)
                     : recv_tlayout_verify(r, tl, f.image, f.digests, f.p.v);
    if (st == WSYNC_OK && !f.identity && f.tp.on) /* in place: the bytes written through */
        st = recv_dests_verify_writes(r->mem, f.dm, f.np, f.p.me, f.image, f.direct, f.ndirect);
    if (st == WSYNC_OK && tl) /* FP8 bands whose rows came from two trainer ranks (fp8_land.c) */
        st = recv_fp8_land(r, tl, sl->manifest, f.image, f.p.v);
    if (st == WSYNC_OK && tl)
        wsync_trace("engine %s rank %d: every %s of its target verified", r->engine_id, f.p.me,
                    f.identity ? "chunk (identity targets: against the record)"
                    : f.tp.on  ? "put"
                               : "segment");
    if (st == WSYNC_OK)
        recv_release_drain(&f.rl, r, fetch_release_landed, &f, deadline);
    fetch_end(&f, st);
    return st;
}
