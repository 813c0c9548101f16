/* pull_join.c: an attempt's join on any engine rank (pull.h): local rank
 * 0's landing map, the peers' windows, the local peers' health; and the
 * shared part of the attempt's state (its request id), allocated and
 * ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/util.h"
#include "engine_side/pull.h"

wsync_status_t recv_map_peers(wsync_receiver_t *r, int slot, uint64_t deadline, const recv_tlayout_t *tl)
{
    int p;
    for (p = 0; p < r->cfg.local_world; p++) {
        peer_map_t *pm = &r->images.peers[p][slot];
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
        if (!pm->fan && len < (tl ? tl->tg[p]->image_size : r->images.len)) {
            if (fd >= 0)
                close(fd);
            return wsync_error(WSYNC_ERR_CONFLICT, "local rank %d's image is %llu bytes, need %llu", p,
                               (unsigned long long)len,
                               (unsigned long long)(tl ? tl->tg[p]->image_size : r->images.len));
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

/* Wait for local rank 0's landing map of attempt `gen`; fails when rank 0
 * ended the attempt or died, or at the deadline. */
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

/* A local rank of this node that died or failed attempt `gen` ends it here
 * too. */
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

uint32_t recv_new_reqid(uint32_t old)
{
    uint32_t id;
    do
        id = (uint32_t)(((uint64_t)rand() << 16 ^ (uint64_t)wsync_now_ns() ^ (uint64_t)getpid() << 8) & 0x7fffffff);
    while (id == 0 || id == old);
    return id;
}

wsync_status_t recv_pull_join(recv_pull_t *p)
{
    WSYNC_CHECK(recv_wait_landing(p->r, p->gen, p->deadline, &p->land));
    if (p->ops->check_landing)
        WSYNC_CHECK(p->ops->check_landing(p));
    return recv_map_peers(p->r, p->slot, p->deadline, p->tl);
}

wsync_status_t recv_pull_alloc(recv_pull_t *p)
{
    p->remaining = calloc(p->nchunks + 1, sizeof(*p->remaining));
    p->mine = calloc((p->nchunks + 7) / 8 + 1, 1);
    p->pending = calloc(p->nchunks + 1, sizeof(*p->pending));
    p->reqs = calloc((size_t)p->world, sizeof(*p->reqs));
    p->addrs = calloc((size_t)p->world, sizeof(*p->addrs));
    p->tnames = calloc((size_t)p->world, sizeof(*p->tnames));
    if (!p->remaining || !p->mine || !p->pending || !p->reqs || !p->addrs || !p->tnames)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    return WSYNC_OK;
}

void recv_pull_free(recv_pull_t *p, wsync_status_t st)
{
    int t;
    recv_relay_pull_end(&p->relay);
    if (st != WSYNC_OK)
        recv_transport_reset(p->r); /* stale puts of this attempt can no longer land */
    for (t = 0; p->reqs && t < p->world; t++) {
        if (st != WSYNC_OK) /* a silent peer's request ends now, not at the deadline */
            recv_request_abort(&p->reqs[t]);
        recv_request_end(&p->reqs[t]);
    }
    free(p->remaining);
    free(p->mine);
    free(p->pending);
    free(p->reqs);
    free(p->addrs);
    free(p->tnames);
    p->remaining = p->pending = NULL;
    p->mine = NULL;
    p->reqs = NULL;
}
