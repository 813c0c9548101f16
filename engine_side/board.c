/* board.c: the node board's shared memory: attempts, landed and copied
 * chunks, the ranks' entries (board.h says who writes what); rank 0's service
 * and joining are board_service.c. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/util.h"
#include "engine_side/board_internal.h"

int board_pid_alive(int32_t pid)
{
    char path[64], stat[256], *paren;
    FILE *f;
    size_t n;
    if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM))
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (f == NULL)
        return 1; /* no /proc: kill() said it is there */
    n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    paren = strrchr(stat, ')'); /* "pid (comm) S ...": comm may hold spaces */
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

int board_rank_alive(board_t *b, int rank)
{
    return board_pid_alive(__atomic_load_n(&b->sh->ranks[rank].pid, __ATOMIC_ACQUIRE));
}

int board_leader_gone(board_t *b)
{
    if (b->local_rank == 0)
        return 0;
    return kill(b->leader_pid, 0) != 0 && errno == ESRCH;
}

/* Bumps a futex word of the board and wakes whoever sleeps on it. */
static void board_bump(uint32_t *seq)
{
    __atomic_add_fetch(seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A futex wait on `seq` while it still reads `val`, at most timeout_us. */
static void board_sleep(uint32_t *seq, uint32_t val, int64_t timeout_us)
{
    struct timespec ts = {.tv_sec = (time_t)(timeout_us / 1000000), .tv_nsec = (long)(timeout_us % 1000000) * 1000L};
    syscall(SYS_futex, seq, FUTEX_WAIT, val, &ts, NULL, 0); /* at once if it moved on */
}

/* --- attempts --------------------------------------------------------- */

void board_attempt_open(board_t *b, uint64_t version, int nslots, board_attempt_t *out)
{
    board_shared_t *sh = b->sh;
    int slot = nslots == 2 ? 1 - (int)sh->cur_slot : 0;
    uint64_t gen = sh->gen + 1; /* rank 0 is the only writer of gen */
    sh->gen_version = version;
    sh->gen_slot = (uint32_t)slot;
    __atomic_store_n(&sh->gen, gen, __ATOMIC_RELEASE);
    board_bump(&sh->gen_seq);
    *out = (board_attempt_t){.gen = gen, .version = version, .slot = slot};
}

int board_attempt_find(board_t *b, uint64_t after_gen, uint64_t version, board_attempt_t *out)
{
    board_shared_t *sh = b->sh;
    uint64_t gen = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
    if (gen <= after_gen || __atomic_load_n(&sh->closed_gen, __ATOMIC_ACQUIRE) >= gen ||
        (version != 0 && sh->gen_version != version))
        return 0;
    *out = (board_attempt_t){.gen = gen, .version = sh->gen_version, .slot = (int)sh->gen_slot};
    return 1;
}

uint32_t board_attempt_seq(board_t *b)
{
    return __atomic_load_n(&b->sh->gen_seq, __ATOMIC_ACQUIRE);
}

void board_wait_attempt(board_t *b, uint32_t seq, int timeout_ms)
{
    board_sleep(&b->sh->gen_seq, seq, (int64_t)timeout_ms * 1000); /* no overflow past 35 minutes */
}

uint32_t board_ranks_seq(board_t *b)
{
    return __atomic_load_n(&b->sh->rank_seq, __ATOMIC_ACQUIRE);
}

void board_wait_ranks(board_t *b, uint32_t seq, int timeout_us)
{
    board_sleep(&b->sh->rank_seq, seq, timeout_us);
}

void board_attempt_close(board_t *b, const board_attempt_t *a, int ok)
{
    board_shared_t *sh = b->sh;
    sh->closed_ok = ok != 0;
    if (ok) {
        sh->cur_slot = (uint32_t)a->slot;
        sh->held_version = a->version;
    }
    __atomic_store_n(&sh->closed_gen, a->gen, __ATOMIC_RELEASE);
    board_bump(&sh->rank_seq);
}

board_outcome_t board_attempt_outcome(board_t *b, uint64_t gen)
{
    uint64_t closed = __atomic_load_n(&b->sh->closed_gen, __ATOMIC_ACQUIRE);
    if (closed < gen)
        return BOARD_ATTEMPT_OPEN;
    if (closed > gen)
        return BOARD_ATTEMPT_SUPERSEDED;
    return b->sh->closed_ok ? BOARD_ATTEMPT_OK : BOARD_ATTEMPT_FAILED;
}

/* --- the landing map and landed chunks -------------------------------- */

wsync_status_t board_post_landing(board_t *b, uint64_t gen, const uint8_t *land, uint32_t nchunks)
{
    if (nchunks > BOARD_MAX_CHUNKS)
        return wsync_error(WSYNC_ERR_INVALID, "image has %u chunks; the node board holds %u: raise the chunk size",
                           nchunks, BOARD_MAX_CHUNKS);
    memcpy(b->sh->land, land, nchunks);
    __atomic_store_n(&b->sh->land_gen, gen, __ATOMIC_RELEASE);
    return WSYNC_OK;
}

const uint8_t *board_landing(board_t *b, uint64_t gen)
{
    return __atomic_load_n(&b->sh->land_gen, __ATOMIC_ACQUIRE) == gen ? b->sh->land : NULL;
}

void board_mark_landed(board_t *b, int slot, uint32_t c, uint64_t gen)
{
    __atomic_store_n(&b->sh->landed[slot][c], gen, __ATOMIC_RELEASE);
}

int board_is_landed(board_t *b, int slot, uint32_t c, uint64_t gen)
{
    return __atomic_load_n(&b->sh->landed[slot][c], __ATOMIC_ACQUIRE) == gen;
}

void board_mark_copied(board_t *b, int slot, uint32_t c, uint64_t gen)
{
    uint64_t *at = &b->sh->copied[slot][c], old = __atomic_load_n(at, __ATOMIC_RELAXED), next;
    do
        next = old >> 7 == gen ? old + 1 : gen << 7 | 1;
    while (!__atomic_compare_exchange_n(at, &old, next, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

int board_copied(board_t *b, int slot, uint32_t c, uint64_t gen)
{
    uint64_t v = __atomic_load_n(&b->sh->copied[slot][c], __ATOMIC_ACQUIRE);
    return v >> 7 == gen ? (int)(v & 0x7f) : 0;
}

/* --- ranks ------------------------------------------------------------ */

void board_mark_done(board_t *b, uint64_t gen)
{
    __atomic_store_n(&b->sh->ranks[b->local_rank].done_gen, gen, __ATOMIC_RELEASE);
    board_bump(&b->sh->rank_seq);
}

void board_set_delta(board_t *b, const wsync_report_delta_t *d)
{
    uint64_t *me = b->sh->ranks[b->local_rank].delta;
    me[0] = d->pieces; /* published by board_mark_done's release store */
    me[1] = d->wire_bytes;
    me[2] = d->piece_bytes;
    me[3] = d->refetched;
}

void board_rank_delta(board_t *b, int rank, wsync_report_delta_t *out)
{
    const uint64_t *d = b->sh->ranks[rank].delta;
    *out = (wsync_report_delta_t){.pieces = d[0], .wire_bytes = d[1], .piece_bytes = d[2], .refetched = d[3]};
}

void board_mark_failed(board_t *b, uint64_t gen, const char *why)
{
    board_rank_t *me = &b->sh->ranks[b->local_rank];
    snprintf(me->error, sizeof(me->error), "%s", why);
    __atomic_store_n(&me->failed_gen, gen, __ATOMIC_RELEASE);
    board_bump(&b->sh->rank_seq);
}

int board_rank_done(board_t *b, int rank, uint64_t gen)
{
    return __atomic_load_n(&b->sh->ranks[rank].done_gen, __ATOMIC_ACQUIRE) == gen;
}

int board_rank_failed(board_t *b, int rank, uint64_t gen, char *why, size_t whylen)
{
    if (__atomic_load_n(&b->sh->ranks[rank].failed_gen, __ATOMIC_ACQUIRE) != gen)
        return 0;
    snprintf(why, whylen, "%s", b->sh->ranks[rank].error);
    return 1;
}

uint32_t board_rank_epoch(board_t *b, int rank)
{
    return __atomic_load_n(&b->sh->ranks[rank].epoch, __ATOMIC_ACQUIRE);
}

int board_rank_device(board_t *b, int rank)
{
    return __atomic_load_n(&b->sh->ranks[rank].device, __ATOMIC_ACQUIRE);
}

void board_post_slots(board_t *b, int n)
{
    __atomic_store_n(&b->sh->ranks[b->local_rank].slots, n, __ATOMIC_RELEASE);
}

wsync_status_t board_node_slots(board_t *b, int timeout_ms, int *most, int *least)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000ULL;
    for (;;) {
        int p, hi = 0, lo = BOARD_SLOTS, missing = -1;
        for (p = 0; p < (int)b->sh->local_world; p++) {
            int s = __atomic_load_n(&b->sh->ranks[p].slots, __ATOMIC_ACQUIRE);
            if (s <= 0 && missing < 0)
                missing = p;
            hi = s > hi ? s : hi;
            lo = s < lo ? s : lo;
        }
        if (missing < 0) {
            *most = hi;
            *least = lo;
            return WSYNC_OK;
        }
        if (wsync_interrupted())
            return wsync_error(WSYNC_ERR_CANCELLED, "waiting for local rank %d's image slots: interrupted", missing);
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT,
                               "local rank %d has not set up its image slots in time (is it running and pulling?)",
                               missing);
        usleep(2000);
    }
}

/* --- the rank watch (rank 0) ------------------------------------------ */

#define BOARD_LEAVE_GRACE_NS 2000000000ULL

void board_watch(board_t *b, board_watch_fn fn, void *ctx)
{
    if (b == NULL || b->local_rank != 0)
        return;
    pthread_mutex_lock(&b->watch_lock);
    b->watch = fn;
    b->watch_ctx = ctx;
    pthread_mutex_unlock(&b->watch_lock);
}

void board_watch_ranks(board_t *b)
{
    uint64_t now = wsync_now_ns();
    int p;
    if (now < b->watch_next) /* every ~50 ms, however busy the service is */
        return;
    b->watch_next = now + 50000000ULL;
    pthread_mutex_lock(&b->watch_lock);
    for (p = 1; p < (int)b->sh->local_world; p++) {
        int32_t pid = __atomic_load_n(&b->sh->ranks[p].pid, __ATOMIC_ACQUIRE);
        int alive = board_pid_alive(pid);
        if (b->seen[p] > 0 && !(pid == b->seen[p] && alive)) {
            /* A rank that closed its board (pid 0) counts as gone after a
             * grace, so a node shutting down rank by rank is not reported
             * degraded; one that died with its pid set (killed, crashed) or
             * was replaced, at once. */
            if (pid == 0 && b->gone_at[p] == 0)
                b->gone_at[p] = now;
            if (pid != 0 || now >= b->gone_at[p] + BOARD_LEAVE_GRACE_NS) {
                if (b->watch)
                    b->watch(b->watch_ctx, p, b->seen[p], 0);
                b->lost[p] = b->seen[p];
                b->seen[p] = 0;
                b->gone_at[p] = 0;
            }
        }
        if (b->seen[p] == 0 && pid > 0 && alive) {
            if (b->lost[p] && b->watch)
                b->watch(b->watch_ctx, p, b->lost[p], pid);
            b->lost[p] = 0;
            b->seen[p] = pid;
        }
    }
    pthread_mutex_unlock(&b->watch_lock);
}
