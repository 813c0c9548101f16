/* fetch_relay_puts.c: the puts of an engine rank from its parent node
 * under relay:F (relay_tree.h says who that is), and local rank 0 of a
 * relaying node serving them. The parent must hold the same targets on the
 * same local ranks: the same node plan, so each put lands at the offset it
 * has there. The relay sends every put landing here; the trainer ranks are
 * asked, with an empty chunk map, for the digests of this rank's segments
 * alone, so every byte is still checked against the trainers' digests (a
 * node of identity targets asks them nothing: it verifies against the
 * record). The whole image (the identity target) asks its relay for the
 * pieces of its chunks, and the trainer ranks nothing: the record holds
 * its digests; its relay serves a chunk once it is verified here. Either
 * asks its relay for deltas from the version it holds where it may
 * (delta_land.h, relay_delta.h). A relay that fails (it refuses a node of
 * other targets, dies, or does not hold the version), or lands nothing here
 * for relay_stall_ms, is given up and named (recv_pull_relay_watch,
 * fetch_relay.c): every trainer rank is then asked again, for the chunks
 * still missing and the digests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/proto/pull_request.h"
#include "common/base/util.h"
#include "engine_side/delta_land.h"
#include "engine_side/fetch_internal.h"
#include "engine_side/relay.h"

/* The request the relay gets: the one a trainer rank would, without the
 * targets' definitions (a relay plans nothing: it compares digests); the
 * whole image's names no targets. */
static wsync_status_t relay_json(fetch_t *f, recv_transport_t *rt, json_t **out)
{
    wsync_pull_request_t pr;
    wsync_status_t st;
    recv_pull_request_init(&pr, f->p.r, f->p.v, f->p.reqid, rt, f->p.slot, f->p.sl->layout_digest, f->p.deadline);
    pr.chunks = f->p.mine;
    pr.chunk_bytes = (f->np->nchunks + 7) / 8;
    pr.in_order = f->tl == NULL && f->rl.on && f->ndirect == 0;
    st = f->tl ? fetch_add_targets(f, -1, &pr) : WSYNC_OK;
    *out = st == WSYNC_OK ? wsync_pull_request_to_json(&pr) : NULL;
    pr.chunks = NULL; /* ours, not the request's */
    wsync_pull_request_clear(&pr);
    if (st == WSYNC_OK && *out) /* a rank holding a base: deltas from the relay (delta_land.h) */
        st = recv_delta_ask_relay(f, rt, *out);
    if (st != WSYNC_OK)
        json_decref(*out);
    WSYNC_CHECK(st);
    return *out ? WSYNC_OK : wsync_error(WSYNC_ERR_NOMEM, "out of memory");
}

wsync_status_t fetch_relay_request(fetch_t *f, int *asked)
{
    wsync_receiver_t *r = f->p.r;
    recv_transport_t *rt;
    json_t *msg;
    *asked = 0;
    /* A node planned with a colocated landing hint has trainer ranks on its
     * GPUs: it pulls from them. */
    if ((f->tl && f->tl->hint_world != 0) ||
        !recv_relay_parent(r, f->p.v, f->p.world, f->np->network_bytes, f->np->chunk_bytes, f->p.relay.id,
                           sizeof(f->p.relay.id), f->p.relay.addr, sizeof(f->p.relay.addr)))
        return WSYNC_OK;
    WSYNC_CHECK(recv_transport_ensure(r, "tcp", &rt));
    WSYNC_CHECK(relay_json(f, rt, &msg));
    WSYNC_CHECK(recv_relay_pull_send(&f->p.relay, r, msg, f->p.deadline));
    *asked = 1;
    wsync_trace("engine %s rank %d: version %llu from the relay of engine %s at %s%s", r->engine_id, f->p.me,
                (unsigned long long)f->p.v, f->p.relay.id, f->p.relay.addr,
                f->tl ? " (digests from the trainer ranks)" : "");
    return WSYNC_OK;
}

/* Local rank 0 of a relaying node: from now on its relay serves the puts
 * of this attempt out of the ranks' images (the peers' windows are mapped
 * here by the join). Not for a node planned with a colocated landing hint:
 * no node elsewhere has its plan. */
wsync_status_t fetch_relay_serve(fetch_t *f)
{
    wsync_receiver_t *r = f->p.r;
    const int L = r->cfg.local_world;
    char(*digests)[33] = NULL;
    void *win[BOARD_MAX_RANKS] = {f->image};
    size_t len[BOARD_MAX_RANKS] = {r->images.len};
    relay_serve_t t = {.np = f->np, .L = 1, .win = win, .win_len = len, .manifest = f->p.sl->manifest};
    int k;
    if (f->tl) { /* targets: each put out of the image of the rank it lands on */
        digests = calloc((size_t)L, 33);
        WSYNC_CHECK_ALLOC(digests);
        for (k = 0; k < L; k++) {
            memcpy(digests[k], f->tl->tg[k]->digest_hex, 33);
            win[k] = k == f->p.me ? (void *)f->image : r->images.peers[k][f->p.slot].ptr;
            len[k] = k == f->p.me ? r->images.len : r->images.peers[k][f->p.slot].len;
        }
        t.L = L;
        t.targets = (const char(*)[33])digests;
        t.board = r->board;
        t.gen = f->p.gen;
    } /* the whole image: out of this rank's, chunk by chunk once verified */
    relay_slot_begin(r->node.relay, f->p.slot, f->p.v, f->p.sl->layout_digest, &t);
    free(digests);
    return WSYNC_OK;
}

void fetch_relay_verified(fetch_t *f, uint32_t c)
{
    if (f->tl == NULL && f->p.r->node.relay) /* local rank 0 of a relaying node: other nodes may have it now */
        relay_chunk_verified(f->p.r->node.relay, f->p.slot, c);
}
