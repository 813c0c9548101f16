/* board.c: the node board's shared memory and the rank-0 service that hands
 * out the board and the ranks' window descriptors (SCM_RIGHTS). */
#include "engine_side/board.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/util.h"
#include "common/net/fdpass.h"
#include "common/net/handshake.h"

#define BOARD_MAGIC 0x647261426e797357ULL /* "WsynBard" */

typedef struct board_rank {
    int32_t pid;         /* 0: never joined */
    uint32_t epoch;      /* bumps on each (re)join: peers remap its windows */
    uint64_t done_gen;   /* newest generation this rank holds verified */
    uint64_t failed_gen; /* newest generation this rank failed */
    int32_t device;      /* its GPU ordinal, -1 for host memory (set before pid) */
    int32_t slots;       /* image slots it set up (0: not yet since it joined) */
    char error[256];     /* why, for failed_gen */
} board_rank_t;

/* The shared memory; board.h says who writes each part, and how. */
typedef struct board_shared {
    uint64_t magic;
    uint32_t local_world;
    int32_t leader_pid;
    uint64_t gen;     /* current pull attempt */
    uint32_t gen_seq; /* bumped with gen: the futex followers sleep on */
    uint32_t pad0;
    uint64_t gen_version; /* the version it brings */
    uint32_t gen_slot;    /* image slot it lands in */
    uint32_t cur_slot;    /* slot of the held version */
    uint64_t closed_gen;  /* attempts up to this one have ended ... */
    uint64_t closed_ok;   /* ... and this says whether closed_gen succeeded */
    uint64_t held_version;
    board_rank_t ranks[BOARD_MAX_RANKS];            /* each rank writes its own entry */
    uint64_t landed[BOARD_SLOTS][BOARD_MAX_CHUNKS]; /* gen at which the chunk landed (landing rank writes) */
    uint64_t copied[BOARD_SLOTS][BOARD_MAX_CHUNKS]; /* gen << 7 | ranks that copied it out (each adds one) */
    uint64_t land_gen;                              /* land[] below is for this attempt */
    uint8_t land[BOARD_MAX_CHUNKS];                 /* local rank each chunk lands on (rank 0 writes) */
} board_shared_t;

enum { OP_JOIN = 1, OP_PUT_WIN = 2, OP_GET_WIN = 3 };

typedef struct board_msg {
    uint32_t op;
    int32_t rank;
    int32_t slot;
    int32_t status; /* reply: wsync_status_t */
    uint64_t len;
    uint32_t epoch;
    uint32_t pad;
    wsync_blob_t blob;
} board_msg_t;

/* Service entries per rank: the image windows, then the rank's layout spec. */
#define BOARD_ENTRIES (BOARD_SLOTS + 1)
#define BOARD_SPEC BOARD_SLOTS

typedef struct board_win {
    int present;
    wsync_blob_t blob;
    int fd;
    uint64_t len;
} board_win_t;

struct board {
    int local_rank;
    wsync_auth_t auth;
    int device; /* GPU ordinal, -1 host */
    board_shared_t *sh;
    int memfd;
    int sock; /* rank > 0: connection to rank 0's service */
    int32_t leader_pid;
    /* rank 0 only */
    int listen_fd;
    pthread_t thread;
    int stopping;
    pthread_mutex_t lock;
    board_win_t wins[BOARD_MAX_RANKS][BOARD_ENTRIES];
    int clients[BOARD_MAX_RANKS * 2];
    int nclients;
};

static void handle(board_t *b, int fd)
{
    board_msg_t m, reply;
    int in_fd = -1;
    memset(&reply, 0, sizeof(reply));
    if (wsync_fd_recv(fd, &m, sizeof(m), &in_fd) != WSYNC_OK) {
        int i;
        close(fd);
        for (i = 0; i < b->nclients; i++)
            if (b->clients[i] == fd) {
                b->clients[i] = b->clients[--b->nclients];
                break;
            }
        return;
    }
    reply.op = m.op;
    if (m.rank < 0 || m.rank >= (int)b->sh->local_world || m.slot < 0 || m.slot >= BOARD_ENTRIES) {
        reply.status = WSYNC_ERR_INVALID;
        wsync_fd_send(fd, &reply, sizeof(reply), -1);
        if (in_fd >= 0)
            close(in_fd);
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (m.op == OP_JOIN) {
        /* A rank that (re)joins has new windows: forget its old ones so no
         * peer maps the memory of a process that is gone. */
        int s;
        for (s = 0; s < BOARD_ENTRIES; s++) {
            board_win_t *w = &b->wins[m.rank][s];
            if (w->present && w->fd >= 0)
                close(w->fd);
            w->present = 0;
            w->fd = -1;
        }
        pthread_mutex_unlock(&b->lock);
        wsync_fd_send(fd, &reply, sizeof(reply), b->memfd);
        return;
    }
    if (m.op == OP_PUT_WIN) {
        board_win_t *w = &b->wins[m.rank][m.slot];
        if (w->present && w->fd >= 0)
            close(w->fd);
        w->present = 1;
        w->blob = m.blob;
        w->fd = in_fd;
        w->len = m.len;
        pthread_mutex_unlock(&b->lock);
        wsync_fd_send(fd, &reply, sizeof(reply), -1);
        return;
    }
    if (m.op == OP_GET_WIN) {
        board_win_t *w = &b->wins[m.rank][m.slot];
        int out_fd = w->present ? w->fd : -1;
        reply.status = w->present ? WSYNC_OK : WSYNC_ERR_NOT_FOUND;
        reply.blob = w->blob;
        reply.len = w->len;
        reply.epoch = b->sh->ranks[m.rank].epoch;
        pthread_mutex_unlock(&b->lock);
        wsync_fd_send(fd, &reply, sizeof(reply), out_fd);
        return;
    }
    pthread_mutex_unlock(&b->lock);
    if (in_fd >= 0)
        close(in_fd);
    reply.status = WSYNC_ERR_INVALID;
    wsync_fd_send(fd, &reply, sizeof(reply), -1);
}

/* A new local rank's handshake (same uid, or the token's proof). Short:
 * the service thread waits on it. */
static int admit(board_t *b, int fd)
{
    unsigned char *payload = NULL;
    size_t len = 0;
    wsync_hs_t hs;
    if (wsync_hs_serve(&hs, fd, &b->auth, WSYNC_HS_BOARD, "a local process", 0, 2000, &payload, &len) != WSYNC_OK) {
        LOG_WARN("node board: %s", wsync_last_error());
        return 0;
    }
    free(payload);
    return wsync_hs_accept(&hs, NULL, 0) == WSYNC_OK;
}

static void *service_main(void *arg)
{
    board_t *b = arg;
    while (!__atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfds[1 + BOARD_MAX_RANKS * 2];
        int n = 0, i;
        pfds[n++] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        for (i = 0; i < b->nclients; i++)
            pfds[n++] = (struct pollfd){.fd = b->clients[i], .events = POLLIN};
        if (poll(pfds, (nfds_t)n, 100) <= 0)
            continue;
        for (i = n - 1; i >= 1; i--)
            if (pfds[i].revents)
                handle(b, pfds[i].fd);
        if (pfds[0].revents & POLLIN) {
            int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0 && b->nclients < (int)(sizeof(b->clients) / sizeof(b->clients[0])) && admit(b, fd))
                b->clients[b->nclients++] = fd;
            else if (fd >= 0)
                close(fd);
        }
    }
    return NULL;
}

/* Request/reply with rank 0's service. */
static wsync_status_t call(board_t *b, board_msg_t *m, int send_fd, int *recv_fd)
{
    int fd = -1;
    WSYNC_CHECK(wsync_fd_send(b->sock, m, sizeof(*m), send_fd));
    WSYNC_CHECK(wsync_fd_recv(b->sock, m, sizeof(*m), &fd));
    if (recv_fd)
        *recv_fd = fd;
    else if (fd >= 0)
        close(fd);
    return WSYNC_OK;
}

static wsync_status_t map_board(board_t *b)
{
    void *p = mmap(NULL, sizeof(board_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
    if (p == MAP_FAILED)
        return wsync_error(WSYNC_ERR_IO, "mmap node board: %s", strerror(errno));
    b->sh = p;
    return WSYNC_OK;
}

static wsync_status_t open_leader(board_t *b, const char *name, int local_world)
{
    b->memfd = memfd_create("wsync-board", MFD_CLOEXEC);
    if (b->memfd < 0)
        return wsync_error(WSYNC_ERR_IO, "memfd_create: %s", strerror(errno));
    if (ftruncate(b->memfd, sizeof(board_shared_t)) != 0)
        return wsync_error(WSYNC_ERR_IO, "ftruncate node board: %s", strerror(errno));
    WSYNC_CHECK(map_board(b));
    b->sh->local_world = (uint32_t)local_world;
    b->sh->leader_pid = getpid();
    b->sh->ranks[0].device = b->device;
    b->sh->ranks[0].pid = getpid();
    b->sh->ranks[0].epoch = 1;
    __atomic_store_n(&b->sh->magic, BOARD_MAGIC, __ATOMIC_RELEASE);
    WSYNC_CHECK(wsync_unix_listen(name, &b->listen_fd));
    if (pthread_create(&b->thread, NULL, service_main, b) != 0)
        return wsync_error(WSYNC_ERR_IO, "cannot start the node board thread");
    return WSYNC_OK;
}

/* One try at joining rank 0's board: connected, proved, board mapped. */
static wsync_status_t join_once(board_t *b, const char *name, int timeout_ms)
{
    board_msg_t m = {.op = OP_JOIN, .rank = b->local_rank};
    WSYNC_CHECK(wsync_unix_connect(name, timeout_ms, &b->sock));
    WSYNC_CHECK(wsync_hs_connect(b->sock, &b->auth, WSYNC_HS_BOARD, name, NULL, 0, timeout_ms, NULL, 0, NULL));
    WSYNC_CHECK(call(b, &m, -1, &b->memfd));
    if (b->memfd < 0)
        return wsync_error(WSYNC_ERR_PEER, "node board '%s': local rank 0 sent no board", name);
    return map_board(b);
}

static void unjoin(board_t *b)
{
    if (b->sh)
        munmap(b->sh, sizeof(board_shared_t));
    b->sh = NULL;
    if (b->memfd >= 0)
        close(b->memfd);
    if (b->sock >= 0)
        close(b->sock);
    b->memfd = b->sock = -1;
}

static wsync_status_t open_member(board_t *b, const char *name, int local_world, int timeout_ms)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    wsync_status_t st;

    /* A rank 0 killed while this rank joins (a restart) closes the connection
     * mid-handshake or mid-join: join its successor, within timeout_ms. A
     * refused proof (WSYNC_ERR_AUTH) or a timeout is final. */
    while ((st = join_once(b, name, timeout_ms)) == WSYNC_ERR_PEER || st == WSYNC_ERR_IO) {
        uint64_t now = wsync_now_ns();
        if (now + 50000000ULL >= deadline)
            return st;
        unjoin(b);
        usleep(50000);
        timeout_ms = (int)((deadline - now - 50000000ULL) / 1000000ULL);
    }
    WSYNC_CHECK(st);
    if (__atomic_load_n(&b->sh->magic, __ATOMIC_ACQUIRE) != BOARD_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "node board '%s' is not a wsync board", name);
    if ((int)b->sh->local_world != local_world)
        return wsync_error(WSYNC_ERR_CONFLICT, "node board '%s' has %u local ranks, this rank was started with %d",
                           name, b->sh->local_world, local_world);
    b->leader_pid = b->sh->leader_pid;
    b->sh->ranks[b->local_rank].failed_gen = 0;
    b->sh->ranks[b->local_rank].error[0] = '\0';
    b->sh->ranks[b->local_rank].device = b->device;
    b->sh->ranks[b->local_rank].slots = 0;
    __atomic_store_n(&b->sh->ranks[b->local_rank].pid, getpid(), __ATOMIC_RELEASE);
    __atomic_add_fetch(&b->sh->ranks[b->local_rank].epoch, 1, __ATOMIC_RELEASE);
    return WSYNC_OK;
}

wsync_status_t board_open(const char *name, int local_rank, int local_world, int device, const wsync_auth_t *auth,
                          int timeout_ms, board_t **out)
{
    board_t *b;
    wsync_status_t st;
    int r, s;

    if (local_world < 1 || local_world > BOARD_MAX_RANKS || local_rank < 0 || local_rank >= local_world)
        return wsync_error(WSYNC_ERR_INVALID, "local rank %d of %d: need 0 <= rank < local world <= %d",
                           local_rank, local_world, BOARD_MAX_RANKS);
    b = calloc(1, sizeof(*b));
    WSYNC_CHECK_ALLOC(b);
    b->local_rank = local_rank;
    b->device = device;
    if (auth)
        b->auth = *auth;
    b->memfd = b->sock = b->listen_fd = -1;
    pthread_mutex_init(&b->lock, NULL);
    for (r = 0; r < BOARD_MAX_RANKS; r++)
        for (s = 0; s < BOARD_ENTRIES; s++)
            b->wins[r][s].fd = -1;
    st = local_rank == 0 ? open_leader(b, name, local_world) : open_member(b, name, local_world, timeout_ms);
    if (st != WSYNC_OK) {
        board_close(b);
        return st;
    }
    *out = b;
    return WSYNC_OK;
}

void board_close(board_t *b)
{
    int r, s, i;
    if (b == NULL)
        return;
    if (b->listen_fd >= 0) {
        __atomic_store_n(&b->stopping, 1, __ATOMIC_RELEASE);
        pthread_join(b->thread, NULL);
        close(b->listen_fd);
        for (i = 0; i < b->nclients; i++)
            close(b->clients[i]);
    }
    for (r = 0; r < BOARD_MAX_RANKS; r++)
        for (s = 0; s < BOARD_ENTRIES; s++)
            if (b->wins[r][s].fd >= 0)
                close(b->wins[r][s].fd);
    if (b->sh) {
        if (b->sh->ranks[b->local_rank].pid == getpid())
            __atomic_store_n(&b->sh->ranks[b->local_rank].pid, 0, __ATOMIC_RELEASE);
        munmap(b->sh, sizeof(board_shared_t));
    }
    if (b->memfd >= 0)
        close(b->memfd);
    if (b->sock >= 0)
        close(b->sock);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

wsync_status_t board_put_window(board_t *b, int slot, const wsync_blob_t *blob, int fd, uint64_t len)
{
    board_msg_t m = {.op = OP_PUT_WIN, .rank = b->local_rank, .slot = slot, .len = len};
    m.blob = *blob;
    if (b->local_rank == 0) {
        board_win_t *w = &b->wins[0][slot];
        pthread_mutex_lock(&b->lock);
        if (w->fd >= 0)
            close(w->fd);
        w->present = 1;
        w->blob = *blob;
        w->fd = fd >= 0 ? dup(fd) : -1;
        w->len = len;
        pthread_mutex_unlock(&b->lock);
        return WSYNC_OK;
    }
    WSYNC_CHECK(call(b, &m, fd, NULL));
    if (m.status != WSYNC_OK)
        return wsync_error((wsync_status_t)m.status, "node board refused window of slot %d", slot);
    return WSYNC_OK;
}

wsync_status_t board_get_window(board_t *b, int rank, int slot, int timeout_ms, wsync_blob_t *blob, int *fd,
                                uint64_t *len, uint32_t *epoch)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    for (;;) {
        board_msg_t m = {.op = OP_GET_WIN, .rank = rank, .slot = slot};
        int got = -1;
        if (b->local_rank == 0) {
            board_win_t *w = &b->wins[rank][slot];
            pthread_mutex_lock(&b->lock);
            if (w->present) {
                *blob = w->blob;
                *fd = w->fd >= 0 ? dup(w->fd) : -1;
                *len = w->len;
                *epoch = b->sh->ranks[rank].epoch;
                pthread_mutex_unlock(&b->lock);
                return WSYNC_OK;
            }
            pthread_mutex_unlock(&b->lock);
        } else {
            WSYNC_CHECK(call(b, &m, -1, &got));
            if (m.status == WSYNC_OK) {
                *blob = m.blob;
                *fd = got;
                *len = m.len;
                *epoch = m.epoch;
                return WSYNC_OK;
            }
            if (got >= 0)
                close(got);
        }
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "local rank %d has not shared its image window (slot %d)", rank,
                               slot);
        usleep(5000);
    }
}

wsync_status_t board_put_spec(board_t *b, const char *spec)
{
    wsync_blob_t none = {0};
    size_t len = strlen(spec);
    wsync_status_t st;
    int fd = memfd_create("wsync-spec", MFD_CLOEXEC);
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "memfd_create: %s", strerror(errno));
    if (write(fd, spec, len) != (ssize_t)len) {
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "cannot write the layout spec: %s", strerror(errno));
    }
    st = board_put_window(b, BOARD_SPEC, &none, fd, len);
    close(fd);
    return st;
}

wsync_status_t board_get_spec(board_t *b, int rank, int timeout_ms, char **out)
{
    wsync_blob_t blob;
    uint64_t len = 0;
    uint32_t epoch;
    int fd = -1;
    char *s;
    if (board_get_window(b, rank, BOARD_SPEC, timeout_ms, &blob, &fd, &len, &epoch) != WSYNC_OK)
        return wsync_error(WSYNC_ERR_TIMEOUT, "local rank %d shared no layout spec in time: %s", rank,
                           wsync_last_error());
    if (fd < 0)
        return wsync_error(WSYNC_ERR_PEER, "local rank %d shared no layout spec", rank);
    s = malloc(len + 1);
    if (s == NULL || pread(fd, s, len, 0) != (ssize_t)len) {
        free(s);
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "cannot read local rank %d's layout spec", rank);
    }
    close(fd);
    s[len] = '\0';
    *out = s;
    return WSYNC_OK;
}

int board_rank_alive(board_t *b, int rank)
{
    int32_t pid = __atomic_load_n(&b->sh->ranks[rank].pid, __ATOMIC_ACQUIRE);
    if (pid <= 0)
        return 0;
    return kill(pid, 0) == 0 || errno == EPERM;
}

int board_leader_gone(board_t *b)
{
    if (b->local_rank == 0)
        return 0;
    return kill(b->leader_pid, 0) != 0 && errno == ESRCH;
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
    __atomic_add_fetch(&sh->gen_seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &sh->gen_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
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
    struct timespec ts = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    /* Returns at once if gen_seq moved on since `seq` was read. */
    syscall(SYS_futex, &b->sh->gen_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
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
}

void board_mark_failed(board_t *b, uint64_t gen, const char *why)
{
    board_rank_t *me = &b->sh->ranks[b->local_rank];
    snprintf(me->error, sizeof(me->error), "%s", why);
    __atomic_store_n(&me->failed_gen, gen, __ATOMIC_RELEASE);
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
