/* fetch_targets.c: the data part of one pull attempt on an engine rank whose
 * node holds targets (engine layouts), as phases:
 *   join      wait for rank 0's landing map and check it is the node plan
 *             this rank derived; map the peers' windows (pull.h, shared
 *             with fetch.c, as the watch, its messages and the relay's
 *             fall back);
 *   prepare   the chunks landing here, and those landing elsewhere that
 *             hold bytes this rank copies;
 *   request   in place into the caller's tensors on the host, the bytes
 *             no other rank reads land straight in them (the transports'
 *             redirect, recv_transport_direct); expect every put landing
 *             here; ask every trainer rank (each also answers with the
 *             digests of this rank's segments it owns);
 *   then, until every chunk this rank needs is in:
 *   land      take the transports' completions (pull_land.c); a chunk
 *             whose last put landed gets its copies inside this rank, then
 *             is marked landed;
 *   fan out   copy, out of the landing rank's window, what this rank needs
 *             of each chunk the board says landed elsewhere;
 *   watch     trainer answers, peers, the deadline (pull_watch.c);
 *   release   in place into the caller's tensors on the host, the image
 *             is a sparse window: a chunk's pages are freed once written
 *             through, and, for bytes landed here, once every rank that
 *             copies them out marked the chunk copied on the board, so a
 *             rank holds its tensors plus the chunks in flight;
 *   verify    every segment of this rank's target against the trainer's
 *             digest (the answers of every trainer rank); in place with the
 *             caller's destination tensors, their bytes are the ones
 *             digested (each chunk was written through to them when it was
 *             complete here: chunk_complete).
 * A chunk is marked landed before it is verified: every rank verifies its
 * own destination bytes, so a corrupted byte is caught on every rank that
 * holds it, before the node reports ready. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/base/log.h"
#include "common/proto/pull_request.h"
#include "common/base/util.h"
#include "engine_side/fetch_targets_internal.h"

/* Rank 0's landing map is the node plan this rank derived. */
static wsync_status_t ops_check_landing(recv_pull_t *p)
{
    const tfetch_t *f = container_of(p, tfetch_t, p);
    const uint8_t *land = p->land;
    uint32_t c;
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
static int copies_to_me(const tfetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++)
        if (f->np->copies[k].to_rank == f->p.me)
            return 1;
    return 0;
}

static wsync_status_t tf_prepare(tfetch_t *f)
{
    const wsync_node_plan_t *np = f->np;
    size_t nseg = f->tl->seg->nputs;
    uint32_t c;
    WSYNC_CHECK(recv_pull_alloc(&f->p));
    f->digests = calloc(nseg + 1, sizeof(*f->digests));
    f->have = calloc(nseg + 1, 1);
    f->none = calloc((np->nchunks + 7) / 8 + 1, 1);
    if (!f->digests || !f->have || !f->none)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    for (c = 0; c < np->nchunks; c++)
        if (np->chunks[c].land_rank == f->p.me) {
            f->p.remaining[c] = (uint32_t)np->chunks[c].nputs;
            f->p.mine[c / 8] |= (unsigned char)(1u << (c % 8));
            f->p.nland++;
        } else if (copies_to_me(f, c)) {
            f->p.pending[f->p.npending++] = c;
        }
    f->p.nwant = f->p.nland + f->p.npending;
    return recv_trainer_addrs(f->p.r, f->p.world, f->p.addrs, f->p.tnames);
}

wsync_status_t tf_add_targets(tfetch_t *f, int t, wsync_pull_request_t *pr)
{
    const int L = f->p.r->cfg.local_world;
    int k;
    pr->ntargets = L;
    pr->targets = calloc((size_t)L, sizeof(*pr->targets));
    WSYNC_CHECK_ALLOC(pr->targets);
    if (t >= 0 && !f->tl->defs_sent[t]) {
        pr->target_defs = json_object();
        WSYNC_CHECK_ALLOC(pr->target_defs);
    }
    for (k = 0; k < L; k++) {
        const wsync_target_t *tg = f->tl->tg[k];
        memcpy(pr->targets[k], tg->digest_hex, 33);
        if (pr->target_defs && json_object_get(pr->target_defs, tg->digest_hex) == NULL) {
            json_t *j = NULL;
            WSYNC_CHECK(wsync_target_to_json(tg, f->p.sl->manifest, &j));
            json_object_set_new(pr->target_defs, tg->digest_hex, j);
        }
    }
    return WSYNC_OK;
}

wsync_status_t tf_request_rank(tfetch_t *f, int t, int digests_only)
{
    wsync_receiver_t *r = f->p.r;
    const wsync_node_plan_t *np = f->np;
    wsync_pull_request_t pr;
    recv_transport_t *rt;
    wsync_status_t st;
    size_t k;
    json_t *msg;
    WSYNC_CHECK(recv_transport_ensure(r, f->p.tnames[t], &rt));
    for (k = 0; k < np->rank_nputs[t]; k++) {
        const wsync_tput_t *pu = &np->puts[np->rank_puts[t][k]];
        if (pu->land_rank == f->p.me && !digests_only && recv_pull_is_mine(&f->p, pu->chunk))
            WSYNC_CHECK(rt->ops->expect(rt->t, t, rt->region[f->p.slot], pu->dst_off, pu->len,
                                        ((uint64_t)f->p.reqid << 32) | pu->id));
    }
    if (rt->ops->expect_flush)
        rt->ops->expect_flush(rt->t, t);
    if (f->p.addrs[t][0] == '\0')
        return wsync_error(WSYNC_ERR_NOT_FOUND, "trainer rank %d is not registered at the control endpoint", t);
    recv_pull_request_init(&pr, r, f->p.v, f->p.reqid, rt, f->p.slot, f->p.sl->layout_digest, f->p.deadline);
    pr.chunks = digests_only ? f->none : f->p.mine;
    pr.chunk_bytes = (np->nchunks + 7) / 8;
    st = tf_add_targets(f, t, &pr);
    pr.in_order = f->rl.on && f->ndirect == 0; /* else only edges and fan-out bytes pass through the image */
    pr.hint_world = f->tl->hint_world;
    pr.colo = f->tl->colo;
    pr.ncolo = f->tl->ncolo;
    msg = st == WSYNC_OK ? wsync_pull_request_to_json(&pr) : NULL;
    pr.chunks = NULL; /* ours, not the request's */
    pr.colo = pr.ncolo = NULL;
    pr.hint_world = 0;
    wsync_pull_request_clear(&pr);
    WSYNC_CHECK(st);
    return recv_request_start(&f->p.reqs[t], &f->p.r->pull_conns, &f->p.r->auth, t, f->p.addrs[t], msg,
                              f->p.deadline);
}

static wsync_status_t tf_request(tfetch_t *f)
{
    int t, relayed = 0;
    /* (not while this node relays: its relay serves out of the ranks' images) */
    /* a sparse GPU image: the bytes other ranks copy land straight too (they
     * read them out of its fan-out window, fan_publish) */
    WSYNC_CHECK(recv_transport_direct(f->p.r, f->p.slot, f->p.tnames, f->p.world, !recv_node_relays(f->p.r),
                                      f->p.r->gpu_sparse ? NULL : f->np, &f->direct, &f->ndirect));
    f->p.reqid = recv_new_reqid(f->p.reqid);
    f->p.last_landed = wsync_now_ns();
    WSYNC_CHECK(tf_relay_request(f, &relayed));
    for (t = 0; t < f->p.world; t++)
        WSYNC_CHECK(tf_request_rank(f, t, relayed));
    wsync_trace("engine %s rank %d: target requests sent", f->p.r->engine_id, f->p.me);
    return WSYNC_OK;
}

/* Local rank 0 of a relaying node: from now on its relay serves the puts
 * of this attempt out of the ranks' images (the peers' windows are mapped
 * here by tf_join). Not for a node planned with a colocated landing hint:
 * no node elsewhere has its plan. */
static wsync_status_t tf_serve(tfetch_t *f)
{
    wsync_receiver_t *r = f->p.r;
    const int L = r->cfg.local_world;
    char(*digests)[33] = calloc((size_t)L, 33);
    void *win[BOARD_MAX_RANKS];
    size_t len[BOARD_MAX_RANKS];
    relay_targets_t t = {.np = f->np, .L = L, .win = win, .win_len = len, .board = r->board, .gen = f->p.gen};
    int k;
    WSYNC_CHECK_ALLOC(digests);
    for (k = 0; k < L; k++) {
        memcpy(digests[k], f->tl->tg[k]->digest_hex, 33);
        win[k] = k == f->p.me ? (void *)f->image : r->peers[k][f->p.slot].ptr;
        len[k] = k == f->p.me ? r->image_len : r->peers[k][f->p.slot].len;
    }
    t.targets = (const char(*)[33])digests;
    relay_slot_begin_targets(r->relay, f->p.slot, f->p.v, f->p.sl->layout_digest, &t);
    free(digests);
    return WSYNC_OK;
}

/* A sparse GPU image (gpu_sparse.c): image bytes [off, off+len) of this
 * rank lie in the caller's tensor of the direct span holding off, else in
 * the image (the words across destination edges off the 8-byte grid).
 * Returns where off lies; *n how many bytes from it on lie there too. */
static char *mine_at(const tfetch_t *f, uint64_t off, uint64_t len, uint64_t *n)
{
    const size_t lo = recv_span_after(f->direct, f->ndirect, off);
    if (lo < f->ndirect && f->direct[lo].off <= off) {
        const wsync_redirect_t *d = &f->direct[lo];
        *n = d->off + d->len - off < len ? d->off + d->len - off : len;
        return (char *)d->ptr + (off - d->off);
    }
    *n = lo < f->ndirect && f->direct[lo].off - off < len ? f->direct[lo].off - off : len;
    return f->image + off;
}

/* A sparse GPU image: `len` bytes to this rank's image offset `to` from
 * `src` (another rank's window), or, src NULL, from this rank's own offset
 * `from`; each side where mine_at says it lies. */
static wsync_status_t copy_sparse(tfetch_t *f, uint64_t to, const char *src, uint64_t from, uint64_t len)
{
    while (len > 0) {
        uint64_t n, m;
        char *dst = mine_at(f, to, len, &n);
        const char *s = src;
        if (src == NULL) {
            s = mine_at(f, from, n, &m);
            n = m;
        }
        WSYNC_CHECK(f->p.r->mem->copy(dst, s, n));
        to += n;
        from += n;
        if (src)
            src += n;
        len -= n;
    }
    return WSYNC_OK;
}

/* The copies of chunk c into this rank that come from rank `from` (out of
 * its fan-out window when its image is a sparse GPU one; with one here,
 * straight into the caller's tensors). */
static wsync_status_t copy_chunk(tfetch_t *f, uint32_t c, int from)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    const peer_map_t *pm = &f->p.r->peers[from][f->p.slot];
    const char *src = from == f->p.me ? f->image : pm->ptr;
    const int fan = from != f->p.me && pm->fan;
    size_t k;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++) {
        const wsync_tcopy_t *cp = &f->np->copies[k];
        uint64_t at;
        if (cp->to_rank != f->p.me || cp->from_rank != from)
            continue;
        at = fan ? recv_fanmap_at(&f->tl->fan[from], cp->from_off) : cp->from_off;
        if (f->p.r->gpu_sparse)
            WSYNC_CHECK(copy_sparse(f, cp->to_off, from == f->p.me ? NULL : src + at, cp->from_off, cp->len));
        else
            WSYNC_CHECK(f->p.r->mem->copy(f->image + cp->to_off, src + at, cp->len));
    }
    return WSYNC_OK;
}

/* A sparse GPU image: the bytes of chunk c the other ranks copy out of this
 * one, into its fan-out window (what it exports), before c is marked landed. */
static wsync_status_t fan_publish(tfetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    char *fan = f->p.r->gpu_fan[f->p.slot].ptr;
    size_t k;
    for (k = ch->first_copy; f->p.r->gpu_sparse && k < ch->first_copy + ch->ncopies; k++) {
        const wsync_tcopy_t *cp = &f->np->copies[k];
        uint64_t off = cp->from_off, left = cp->len, n;
        char *dst;
        if (cp->from_rank != f->p.me || cp->to_rank == f->p.me)
            continue;
        dst = fan + recv_fanmap_at(&f->tl->fan[f->p.me], cp->from_off);
        for (; left > 0; off += n, dst += n, left -= n) {
            const char *s = mine_at(f, off, left, &n);
            WSYNC_CHECK(f->p.r->mem->copy(dst, s, n));
        }
    }
    return WSYNC_OK;
}

/* Chunk c is complete in this rank's image (landed here and copied inside
 * it, or copied out of the landing rank's window). In place with the
 * caller's destination tensors, its bytes are written through to them
 * (dests.h); verification then digests the caller's bytes. */
static wsync_status_t chunk_complete(tfetch_t *f, uint32_t c)
{
    return recv_dests_chunk_in(f->p.r->mem, f->p.r->cur_dm, f->np, c, f->p.me, f->image, f->direct, f->ndirect);
}

/* ---- release: the pages of a sparse image ---- */

/* How many other ranks copy bytes of chunk c out of this rank's image. */
static int chunk_readers(const tfetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    uint64_t seen = 0;
    int n = 0;
    size_t k;
    for (k = ch->first_copy; k < ch->first_copy + ch->ncopies; k++) {
        const wsync_tcopy_t *cp = &f->np->copies[k];
        if (cp->from_rank == f->p.me && cp->to_rank != f->p.me && !(seen >> cp->to_rank & 1)) {
            seen |= 1ULL << cp->to_rank;
            n++;
        }
    }
    return n;
}

/* Chunk c's bytes copied into this rank (written through already). */
static void release_copied_in(const tfetch_t *f, uint32_t c)
{
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k;
    for (k = ch->first_copy; f->rl.on && k < ch->first_copy + ch->ncopies; k++)
        if (f->np->copies[k].to_rank == f->p.me)
            recv_release_range(&f->rl, f->np->copies[k].to_off, f->np->copies[k].len);
}

/* Chunk c's puts that landed here (recv_release_poll's callback). */
static void release_landed(void *arg, uint32_t c)
{
    const tfetch_t *f = arg;
    const wsync_tchunk_t *ch = &f->np->chunks[c];
    size_t k;
    for (k = ch->first_put; k < ch->first_put + ch->nputs; k++)
        if (f->np->puts[k].land_rank == f->p.me)
            recv_release_range(&f->rl, f->np->puts[k].dst_off, f->np->puts[k].len);
}

static void tf_release(tfetch_t *f)
{
    recv_release_poll(&f->rl, release_landed, f);
}

/* A chunk that landed here is complete: what was copied into this rank
 * goes now, what landed once every reader copied it. */
static void landed_complete(tfetch_t *f, uint32_t c)
{
    release_copied_in(f, c);
    if (recv_release_landed(&f->rl, c, chunk_readers(f, c)))
        release_landed(f, c);
}

static int ops_unit_at(const recv_pull_t *p, uint32_t id, uint32_t *chunk, uint64_t *len)
{
    const wsync_node_plan_t *np = container_of(p, tfetch_t, p)->np;
    if (id >= np->nputs)
        return 0;
    *chunk = np->puts[id].chunk;
    *len = np->puts[id].len;
    return 1;
}

/* Chunk c's last put landed here: its copies inside this rank, written
 * through, published to the fan-out window, marked landed. */
static wsync_status_t ops_chunk_landed(recv_pull_t *p, uint32_t c)
{
    tfetch_t *f = container_of(p, tfetch_t, p);
    WSYNC_CHECK(copy_chunk(f, c, f->p.me));
    WSYNC_CHECK(chunk_complete(f, c));
    WSYNC_CHECK(fan_publish(f, c));
    board_mark_landed(f->p.r->board, f->p.slot, c, f->p.gen);
    landed_complete(f, c);
    if (f->p.nlanded++ == 0 || f->p.nlanded == f->p.nland)
        wsync_trace("engine %s rank %d: chunk %u landed (%u of %u)", f->p.r->engine_id, f->p.me, c, f->p.nlanded,
                    f->p.nland);
    f->p.ndone++;
    return WSYNC_OK;
}

static wsync_status_t tf_fan_out(tfetch_t *f, int *progressed)
{
    uint32_t k, keep = 0;
    for (k = 0; k < f->p.npending; k++) {
        uint32_t c = f->p.pending[k];
        if (!board_is_landed(f->p.r->board, f->p.slot, c, f->p.gen)) {
            f->p.pending[keep++] = c;
            continue;
        }
        WSYNC_CHECK(copy_chunk(f, c, f->np->chunks[c].land_rank));
        board_mark_copied(f->p.r->board, f->p.slot, c, f->p.gen);
        WSYNC_CHECK(chunk_complete(f, c));
        release_copied_in(f, c);
        f->p.ndone++;
        *progressed = 1;
    }
    f->p.npending = keep;
    return WSYNC_OK;
}

/* Every trainer rank's answer: the digests of the segments it owns. */
static wsync_status_t tf_collect(tfetch_t *f)
{
    const wsync_node_plan_t *seg = f->tl->seg;
    size_t i;
    int t;
    for (t = 0; t < f->p.world; t++) {
        const wsync_pull_reply_t *rep = &f->p.reqs[t].reply;
        size_t k;
        while (!recv_request_done(&f->p.reqs[t])) {
            tf_release(f);
            WSYNC_CHECK(recv_pull_watch(&f->p));
            usleep(200);
        }
        if (f->p.reqs[t].status != WSYNC_OK)
            return wsync_error(f->p.reqs[t].status, "%s", f->p.reqs[t].error);
        f->tl->defs_sent[t] = 1;
        for (k = 0; k < rep->nsegments; k++) {
            uint32_t id = rep->segment_ids[k];
            if (id >= seg->nputs || seg->puts[id].src_rank != t)
                return wsync_error(WSYNC_ERR_PEER,
                                   "trainer rank %d answered a digest for segment %u, which %s of this rank's %zu "
                                   "segments",
                                   t, id, id >= seg->nputs ? "is none" : "it does not own", seg->nputs);
            f->digests[id] = rep->segment_digests[k];
            f->have[id] = 1;
        }
    }
    for (i = 0; i < seg->nputs; i++)
        if (!f->have[i])
            return wsync_error(WSYNC_ERR_PEER,
                               "trainer rank %d sent no digest for segment %zu of this rank's target",
                               seg->puts[i].src_rank, i);
    return WSYNC_OK;
}

/* ---- what the shared phases (pull.h) ask of a node of targets ---- */

static size_t ops_chunk_units(const recv_pull_t *p, uint32_t c, size_t *first)
{
    const wsync_tchunk_t *ch = &container_of(p, tfetch_t, p)->np->chunks[c];
    *first = ch->first_put;
    return ch->nputs;
}

static int ops_unit_src(const recv_pull_t *p, size_t u)
{
    return container_of(p, tfetch_t, p)->np->puts[u].src_rank;
}

static int ops_land_rank(const recv_pull_t *p, uint32_t c)
{
    return container_of(p, tfetch_t, p)->np->chunks[c].land_rank;
}

/* Chunks differ in size here: the share of them in, of the image. */
static uint64_t ops_bytes_in(const recv_pull_t *p)
{
    return p->nwant ? container_of(p, tfetch_t, p)->tl->image_len * p->ndone / p->nwant : 0;
}

/* After a relay was given up: the chunks still missing, and the digests
 * (the trainer ranks' earlier requests asked for digests alone). */
static wsync_status_t ops_request_rank(recv_pull_t *p, int t)
{
    return tf_request_rank(container_of(p, tfetch_t, p), t, 0);
}

static const recv_pull_ops_t tf_ops = {.unit = "puts",
                                       .unit1 = "put",
                                       .unit_at = ops_unit_at,
                                       .chunk_landed = ops_chunk_landed,
                                       .chunk_units = ops_chunk_units,
                                       .unit_src = ops_unit_src,
                                       .land_rank = ops_land_rank,
                                       .check_landing = ops_check_landing,
                                       .bytes_in = ops_bytes_in,
                                       .request_rank = ops_request_rank,
                                       .reask_all = 1};

static void tf_end(tfetch_t *f, wsync_status_t st)
{
    recv_dests_drain(f->p.r->mem, f->p.r->cur_dm); /* write-through copies still queued (a failed pull) */
    if (st != WSYNC_OK)
        memset(f->tl->defs_sent, 0, (size_t)f->p.world); /* a trainer may have restarted: send them again */
    recv_pull_free(&f->p, st);
    free(f->digests);
    free(f->have);
    free(f->none);
    recv_release_end(&f->rl);
    free(f->direct);
}

wsync_status_t recv_fetch_targets(wsync_receiver_t *r, const board_attempt_t *a, const wsync_sync_layout_t *sl,
                                  recv_tlayout_t *tl, uint64_t deadline)
{
    tfetch_t f = {.p = {.ops = &tf_ops,
                        .r = r,
                        .sl = sl,
                        .tl = tl,
                        .gen = a->gen,
                        .v = a->version,
                        .deadline = deadline,
                        .slot = a->slot,
                        .me = r->cfg.local_rank,
                        .world = sl->world,
                        .nchunks = tl->np->nchunks},
                  .tl = tl,
                  .np = tl->np,
                  .image = r->win[a->slot].ptr};
    wsync_status_t st;

    WSYNC_CHECK(recv_pull_join(&f.p));
    if (r->relay && tl->hint_world == 0)
        WSYNC_CHECK(tf_serve(&f));
    st = recv_release_begin(&f.rl, r, a, f.np->nchunks);
    if (st == WSYNC_OK)
        st = tf_prepare(&f);
    if (st == WSYNC_OK)
        st = tf_request(&f);
    while (st == WSYNC_OK && f.p.ndone < f.p.nwant) {
        int progressed = 0, got = 0;
        st = recv_pull_land(&f.p, f.p.npending > 0, &progressed, &got);
        if (st == WSYNC_OK)
            st = tf_fan_out(&f, &progressed);
        tf_release(&f);
        if (st == WSYNC_OK)
            st = recv_pull_watch(&f.p);
        if (st == WSYNC_OK && !progressed && got == 0 && (f.p.npending > 0 || r->ntr != 1))
            usleep(200);
    }
    if (st == WSYNC_OK)
        st = tf_collect(&f);
    if (st == WSYNC_OK)
        st = recv_tlayout_verify(r, tl, f.image, f.digests, f.p.v);
    if (st == WSYNC_OK) /* FP8 bands whose rows came from two trainer ranks (fp8_land.c) */
        st = recv_fp8_land(r, tl, sl->manifest, f.image, f.p.v);
    if (st == WSYNC_OK)
        wsync_trace("engine %s rank %d: every segment of its target verified", r->engine_id, f.p.me);
    if (st == WSYNC_OK)
        recv_release_drain(&f.rl, r, release_landed, &f, deadline);
    tf_end(&f, st);
    return st;
}
