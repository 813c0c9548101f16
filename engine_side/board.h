/* board.h: the node board: shared memory the local ranks of one engine node
 * use to agree on a pull and to signal chunks as they land, plus the service
 * (run by local rank 0) that hands out the board and the ranks' windows over
 * an abstract Unix socket, so nothing is left on disk after a crash. */
#ifndef WSYNC_ENGINE_BOARD_H
#define WSYNC_ENGINE_BOARD_H

#include <pthread.h>
#include <stdint.h>

#include "common/net/auth.h"
#include "common/transport/transport.h"
#include "common/window/window.h"

#define BOARD_MAX_RANKS 64
#define BOARD_MAX_CHUNKS (1u << 18)
#define BOARD_SLOTS 2

typedef struct board_rank {
    int32_t pid;                /* 0: never joined */
    uint32_t epoch;             /* bumps on each (re)join: peers remap its windows */
    uint64_t done_gen;          /* newest generation this rank holds verified */
    uint64_t failed_gen;        /* newest generation this rank failed */
    int32_t device;             /* its GPU ordinal, -1 for host memory (set before pid) */
    int32_t pad;
    char error[256];            /* why, for failed_gen */
} board_rank_t;

/* Written by rank 0 unless noted; read by everyone. Generations number pull
 * attempts, so a retried version never mistakes old "landed" marks for new. */
typedef struct board_shared {
    uint64_t magic;
    uint32_t local_world;
    int32_t leader_pid;
    uint64_t gen;               /* current pull attempt */
    uint32_t gen_seq;           /* bumped with gen: the futex followers sleep on */
    uint32_t pad0;
    uint64_t gen_version;       /* the version it brings */
    uint32_t gen_slot;          /* image slot it lands in */
    uint32_t cur_slot;          /* slot of the held version */
    uint64_t closed_gen;        /* attempts up to this one have ended ... */
    uint64_t closed_ok;         /* ... and this says whether closed_gen succeeded */
    uint64_t held_version;
    board_rank_t ranks[BOARD_MAX_RANKS];            /* each rank writes its own entry */
    uint64_t landed[BOARD_SLOTS][BOARD_MAX_CHUNKS]; /* gen at which the chunk landed (landing rank writes) */
    uint64_t land_gen;                              /* land[] below is for this attempt */
    uint8_t land[BOARD_MAX_CHUNKS];                 /* local rank each chunk lands on (rank 0 writes) */
} board_shared_t;

typedef struct board board_t;

/* Rank 0 creates the board and serves it; other ranks join it (retrying until
 * timeout_ms while rank 0 starts). `name` identifies the node on this host;
 * `device` is the rank's GPU ordinal (-1: host memory). With a token in
 * `auth` (copied), rank 0 lets in only ranks of its uid or that prove it. */
wsync_status_t board_open(const char *name, int local_rank, int local_world, int device, const wsync_auth_t *auth,
                          int timeout_ms, board_t **out);
void board_close(board_t *b);
board_shared_t *board_shared(board_t *b);

/* Publish this rank's window for `slot` (blob + fd for shm, fd -1 otherwise). */
wsync_status_t board_put_window(board_t *b, int slot, const wsync_blob_t *blob, int fd, uint64_t len);
/* Fetch rank `rank`'s window for `slot`; *fd is a new descriptor the caller
 * closes (-1 if none). Waits up to timeout_ms for the rank to publish it. */
wsync_status_t board_get_window(board_t *b, int rank, int slot, int timeout_ms, wsync_blob_t *blob,
                                int *fd, uint64_t *len, uint32_t *epoch);

/* Rank 0 after opening an attempt: wake the ranks sleeping in
 * board_wait_attempt. */
void board_wake_attempt(board_t *b);
/* The attempt sequence to pass to board_wait_attempt (read it before looking
 * at gen). */
uint32_t board_attempt_seq(board_t *b);
/* Sleep until rank 0 opens an attempt after `seq` was read, at most
 * timeout_ms (a shared-memory futex: the follower wakes within microseconds
 * of the leader, and costs nothing while no version comes). */
void board_wait_attempt(board_t *b, uint32_t seq, int timeout_ms);

/* 1 if local rank `rank`'s process is alive (0 when it never joined). */
int board_rank_alive(board_t *b, int rank);
/* For ranks > 0: 1 if rank 0 that served our board is gone (reopen needed). */
int board_leader_gone(board_t *b);

#endif
