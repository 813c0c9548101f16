/* release.c: freeing a sparse image's pages during a pull (release.h). */
#include <stdlib.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/util.h"
#include "engine_side/release.h"

wsync_status_t recv_release_begin(recv_release_t *rl, wsync_receiver_t *r, const board_attempt_t *a, uint32_t nchunks)
{
    *rl = (recv_release_t){.dm = r->run.dm,
                           .win = &r->images.win[a->slot],
                           .board = r->board,
                           .slot = a->slot,
                           .gen = a->gen};
    rl->on = r->run.dm && r->run.dm->in_place && r->images.win[a->slot].sparse &&
             !recv_transport_pins(&r->transports) && !recv_node_relays(&r->node);
    if (!rl->on)
        return WSYNC_OK;
    rl->held = calloc((size_t)nchunks + 1, sizeof(*rl->held));
    WSYNC_CHECK_ALLOC(rl->held);
    wsync_window_release(rl->win, 0, r->images.len);
    return WSYNC_OK;
}

void recv_release_range(const recv_release_t *rl, uint64_t off, uint64_t len)
{
    if (rl->on)
        recv_dests_release(rl->dm, rl->win, off, len);
}

int recv_release_landed(recv_release_t *rl, uint32_t c, int readers)
{
    if (!rl->on)
        return 0;
    if (readers == 0)
        return 1;
    rl->held[rl->nheld++] = (recv_held_t){c, readers};
    return 0;
}

void recv_release_poll(recv_release_t *rl, void (*free_chunk)(void *arg, uint32_t c), void *arg)
{
    uint32_t k, keep = 0;
    for (k = 0; k < rl->nheld; k++) {
        const recv_held_t *h = &rl->held[k];
        if (board_copied(rl->board, rl->slot, h->chunk, rl->gen) < h->readers)
            rl->held[keep++] = *h;
        else
            free_chunk(arg, h->chunk);
    }
    rl->nheld = keep;
}

void recv_release_drain(recv_release_t *rl, wsync_receiver_t *r, void (*free_chunk)(void *arg, uint32_t c),
                        void *arg, uint64_t deadline)
{
    uint64_t last_check = 0;
    for (recv_release_poll(rl, free_chunk, arg); rl->nheld > 0; recv_release_poll(rl, free_chunk, arg)) {
        uint64_t now = wsync_now_ns();
        if (now > deadline)
            return;
        if (now - last_check > 20000000ULL) {
            last_check = now;
            if (recv_check_peers(r, rl->gen) != WSYNC_OK)
                return; /* not this rank's failure: the peer's reports it */
        }
        usleep(200);
    }
}

void recv_release_end(recv_release_t *rl)
{
    free(rl->held);
    rl->held = NULL;
    rl->nheld = 0;
}
