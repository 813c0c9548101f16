/* release.h: freeing a sparse image's pages during one pull attempt (in
 * place into the caller's tensors on the host: window.h's sparse windows,
 * dests.h's recv_dests_release). A chunk's bytes copied into this rank go
 * once written through; a chunk that landed here is held until every rank
 * that copies bytes out of it has marked it copied on the node board
 * (board_mark_copied), then freed by the fetch's callback (the ranges the
 * node plan puts and copies: fetch_copy.c). */
#ifndef WSYNC_ENGINE_RELEASE_H
#define WSYNC_ENGINE_RELEASE_H

#include "engine_side/receiver_internal.h"

typedef struct recv_held {
    uint32_t chunk;
    int readers; /* ranks that copy out of it */
} recv_held_t;

typedef struct recv_release {
    int on; /* the image is sparse and may be freed (else every call does nothing) */
    const recv_dests_t *dm;
    const wsync_window_t *win;
    board_t *board;
    int slot;
    uint64_t gen;
    recv_held_t *held; /* chunks landed here, kept for their readers */
    uint32_t nheld;
} recv_release_t;

/* For attempt `a` of `nchunks` chunks: on when in place into the caller's
 * tensors with a sparse image, no transport pinning it and no relay
 * serving out of it; then the whole image is freed first (the last
 * version lives in the caller's tensors; no reader of the last attempt
 * is left). */
wsync_status_t recv_release_begin(recv_release_t *rl, wsync_receiver_t *r, const board_attempt_t *a,
                                  uint32_t nchunks);
/* Free image bytes [off, off+len) inside destinations (written through). */
void recv_release_range(const recv_release_t *rl, uint64_t off, uint64_t len);
/* Chunk c landed here and is written through: 1 if it may go now (no
 * readers), else it is held for `readers` ranks and 0. */
int recv_release_landed(recv_release_t *rl, uint32_t c, int readers);
/* Free (through free_chunk) the held chunks every reader copied. */
void recv_release_poll(recv_release_t *rl, void (*free_chunk)(void *arg, uint32_t c), void *arg);
/* At the end of a pull this rank finished: free the held chunks as their
 * readers copy them, until none is left, a peer failed or died, or the
 * deadline (what is left goes when the next attempt begins). */
void recv_release_drain(recv_release_t *rl, wsync_receiver_t *r, void (*free_chunk)(void *arg, uint32_t c),
                        void *arg, uint64_t deadline);
void recv_release_end(recv_release_t *rl);

#endif
