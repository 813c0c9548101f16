/* board.h: the node board: shared memory the local ranks of one engine node
 * use to agree on a pull and to signal chunks as they land, plus the service
 * (run by local rank 0) that hands out the board and the ranks' windows over
 * an abstract Unix socket, so nothing is left on disk after a crash.
 *
 * The board's memory is opaque: only board.c touches it. Who writes what:
 *
 *   what                          written by            ordering
 *   attempt (gen, version, slot)  local rank 0, open    version and slot plain, then gen with
 *                                                       release; readers load gen with acquire
 *                                                       before version and slot
 *   attempt outcome (closed)      local rank 0, close   outcome and held slot plain, then
 *                                                       closed_gen with release; readers acquire
 *   landing map of an attempt     local rank 0          the map plain, then land_gen (release)
 *   "chunk c landed in slot s"    the chunk's landing   one 64-bit store of the attempt's gen
 *                                 rank                  (release) after its bytes are verified;
 *                                                       a reader that sees it (acquire) sees
 *                                                       the bytes in the landing rank's window
 *   "chunk c of slot s copied     each rank that copies one atomic add (release) after
 *    out by one more rank"        out of it             its copy; the landing rank reads
 *                                                       (acquire) before it frees the pages
 *   rank p's pid, epoch, device   rank p, on (re)join   device plain, then pid and epoch (release)
 *   rank p done / failed at gen   rank p                error text plain, then failed_gen
 *                                                       (release); done_gen (release)
 *   rank p's image slots (1 or 2) rank p, at set-up     one store (release); reset on (re)join
 *
 * Generations number pull attempts, so a retried version never mistakes old
 * "landed" marks for new: every mark carries the gen it was made for. Every
 * reader polls (the attempt loop multiplexes landing, copies and peers);
 * only the wait for a new attempt sleeps, on a futex. */
#ifndef WSYNC_ENGINE_BOARD_H
#define WSYNC_ENGINE_BOARD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/net/auth.h"
#include "common/proto/engine_report.h"
#include "common/transport/transport.h"
#include "common/window/window.h"

#define BOARD_MAX_RANKS 64
#define BOARD_MAX_CHUNKS (1u << 18)
#define BOARD_SLOTS 2

typedef struct board board_t;

/* Rank 0 creates the board and serves it; other ranks join it (retrying until
 * timeout_ms while rank 0 starts). `name` identifies the node on this host;
 * `device` is the rank's GPU ordinal (-1: host memory). With a token in
 * `auth` (copied), rank 0 lets in only ranks of its uid or that prove it. */
wsync_status_t board_open(const char *name, int local_rank, int local_world, int device, const wsync_auth_t *auth,
                          int timeout_ms, board_t **out);
/* The same; a rank > 0's wait for rank 0 returns WSYNC_ERR_CANCELLED
 * within ~20 ms once wsync_cancelled(cancel) (cancel may be NULL). */
wsync_status_t board_open_cancellable(const char *name, int local_rank, int local_world, int device,
                                      const wsync_auth_t *auth, int timeout_ms, const int *cancel, board_t **out);
void board_close(board_t *b);

/* Publish this rank's window for `slot` (blob + fd for shm, fd -1 otherwise). */
wsync_status_t board_put_window(board_t *b, int slot, const wsync_blob_t *blob, int fd, uint64_t len);
/* Fetch rank `rank`'s window for `slot`; *fd is a new descriptor the caller
 * closes (-1 if none). Waits up to timeout_ms for the rank to publish it. */
wsync_status_t board_get_window(board_t *b, int rank, int slot, int timeout_ms, wsync_blob_t *blob, int *fd,
                                uint64_t *len, uint32_t *epoch);

/* Texts a rank shares with the node's other ranks (a memfd each, through
 * the service): its layout spec (JSON: what its target is made from), and
 * local rank 0's copy of the version record it opens an attempt with, posted
 * before the attempt (the others parse it instead of asking the control
 * endpoint, which then serves one record per node and version). */
typedef enum board_text { BOARD_TEXT_SPEC, BOARD_TEXT_RECORD } board_text_t;
/* Publish this rank's text `which` (replacing the one before). */
wsync_status_t board_put_text(board_t *b, board_text_t which, const char *text, size_t len);
/* Rank `rank`'s text `which`, waiting up to timeout_ms for it (0: not at
 * all): a new NUL-terminated string of *len bytes the caller frees. */
wsync_status_t board_get_text(board_t *b, int rank, board_text_t which, int timeout_ms, char **out, size_t *len);

/* --- attempts --------------------------------------------------------- */

typedef struct board_attempt {
    uint64_t gen;     /* attempt number, > 0 */
    uint64_t version; /* the version it brings */
    int slot;         /* image slot it lands in */
} board_attempt_t;

typedef enum board_outcome {
    BOARD_ATTEMPT_OPEN = 0,   /* not closed yet */
    BOARD_ATTEMPT_OK,         /* closed, every rank holds the version */
    BOARD_ATTEMPT_FAILED,     /* closed, failed */
    BOARD_ATTEMPT_SUPERSEDED, /* a later attempt was closed: this one is over */
} board_outcome_t;

/* Local rank 0: open the next attempt, bringing `version` into the slot the
 * held version is not in (nslots 2: staged) or slot 0, and wake the ranks
 * sleeping in board_wait_attempt. */
void board_attempt_open(board_t *b, uint64_t version, int nslots, board_attempt_t *out);
/* Any rank: the current attempt, if it is newer than `after_gen`, not closed,
 * and brings `version` (0: any). 1 if so, with *out set. */
int board_attempt_find(board_t *b, uint64_t after_gen, uint64_t version, board_attempt_t *out);
/* The attempt sequence to pass to board_wait_attempt (read it before
 * board_attempt_find, so an attempt opened in between is not slept through). */
uint32_t board_attempt_seq(board_t *b);
/* Sleep until rank 0 opens an attempt after `seq` was read, at most
 * timeout_ms (a shared-memory futex: the follower wakes within microseconds
 * of the leader, and costs nothing while no version comes). */
void board_wait_attempt(board_t *b, uint32_t seq, int timeout_ms);
/* The ranks' sequence to pass to board_wait_ranks (read it before looking
 * at the ranks' and the attempt's state, so a change in between is not
 * slept through); sleep until a rank marks itself done or failed or rank 0
 * closes an attempt after `seq` was read, at most timeout_us (a futex: the
 * waiter wakes within microseconds; a rank that dies wakes no one, so
 * waiters keep a timeout to look at the ranks' processes). */
uint32_t board_ranks_seq(board_t *b);
void board_wait_ranks(board_t *b, uint32_t seq, int timeout_us);
/* Local rank 0: close attempt `a`; with ok, its slot now holds its version. */
void board_attempt_close(board_t *b, const board_attempt_t *a, int ok);
/* Any rank: how attempt `gen` ended, or BOARD_ATTEMPT_OPEN. */
board_outcome_t board_attempt_outcome(board_t *b, uint64_t gen);

/* --- the landing map and landed chunks -------------------------------- */

/* Local rank 0: post attempt `gen`'s landing map: land[c] = the local rank
 * chunk c lands on (BOARD_LAND_RANK bits), for nchunks <= BOARD_MAX_CHUNKS
 * chunks; with BOARD_LAND_GPU set, every other rank on that rank's GPU
 * lands it too (its own copy out of the trainer, no fan-out), and only the
 * landing rank marks it landed (ranks on other GPUs copy it from there). */
#define BOARD_LAND_RANK 0x7f
#define BOARD_LAND_GPU 0x80
wsync_status_t board_post_landing(board_t *b, uint64_t gen, const uint8_t *land, uint32_t nchunks);
/* Any rank: attempt `gen`'s landing map, or NULL while rank 0 has not posted
 * it. Valid until rank 0 opens the next attempt. */
const uint8_t *board_landing(board_t *b, uint64_t gen);
/* The landing rank: chunk `c` of `slot` landed and was verified in attempt
 * `gen` (release: after the chunk's bytes). */
void board_mark_landed(board_t *b, int slot, uint32_t c, uint64_t gen);
/* Any rank: 1 if chunk `c` of `slot` has landed in attempt `gen` (acquire:
 * its bytes are then readable in the landing rank's window). */
int board_is_landed(board_t *b, int slot, uint32_t c, uint64_t gen);

/* A rank copied what it needs of chunk `c` of `slot` out of the landing
 * rank's window in attempt `gen` (release: after its copy read them). */
void board_mark_copied(board_t *b, int slot, uint32_t c, uint64_t gen);
/* How many ranks marked chunk `c` of `slot` copied in attempt `gen`. */
int board_copied(board_t *b, int slot, uint32_t c, uint64_t gen);

/* --- ranks ------------------------------------------------------------ */

/* This rank holds attempt `gen` verified. */
void board_mark_done(board_t *b, uint64_t gen);
/* What this rank's pull of the attempt it is about to mark done moved as
 * deltas (written before board_mark_done, read by local rank 0 after it
 * saw every rank done: the node's report sums them). */
void board_set_delta(board_t *b, const wsync_report_delta_t *d);
void board_rank_delta(board_t *b, int rank, wsync_report_delta_t *out);
/* This rank failed attempt `gen`, because `why`. */
void board_mark_failed(board_t *b, uint64_t gen, const char *why);
/* 1 if local rank `rank` holds attempt `gen` verified. */
int board_rank_done(board_t *b, int rank, uint64_t gen);
/* 1 if local rank `rank` failed attempt `gen`; its reason into why. */
int board_rank_failed(board_t *b, int rank, uint64_t gen, char *why, size_t whylen);
/* Local rank `rank`'s join epoch (bumps on each rejoin: remap its windows). */
uint32_t board_rank_epoch(board_t *b, int rank);
/* Local rank `rank`'s GPU ordinal, -1 for host memory or not joined. */
int board_rank_device(board_t *b, int rank);
/* 1 if local rank `rank`'s process is alive (0 when it never joined). */
int board_rank_alive(board_t *b, int rank);
/* For ranks > 0: 1 if rank 0 that served our board is gone (reopen needed). */
int board_leader_gone(board_t *b);

/* Local rank 0: `fn` is called (from the board's service thread, within
 * ~100 ms) when a local rank's process goes (new_pid 0: it exited, or was
 * killed) and when a rank that went is back (old_pid: the one that went).
 * NULL stops the calls; once board_watch returns, no call is running. A
 * second process as a rank whose process runs is refused when it joins
 * (board_open fails with WSYNC_ERR_CONFLICT naming the rank and the pid). */
typedef void (*board_watch_fn)(void *ctx, int rank, int32_t old_pid, int32_t new_pid);
void board_watch(board_t *b, board_watch_fn fn, void *ctx);

/* Image slots: every rank posts how many it needs (1: in place, or staged
 * with the caller's tensors holding every tensor it holds; 2: staged), and
 * every rank sets up the node's count, the most any rank posted, so an
 * attempt's slot exists on every rank. board_node_slots waits up to
 * timeout_ms for every rank to post, and gives the most and the fewest
 * posted (a rank that rejoins posts what it set up). */
void board_post_slots(board_t *b, int n);
wsync_status_t board_node_slots(board_t *b, int timeout_ms, int *most, int *least);

#endif
