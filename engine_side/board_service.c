/* board_service.c: rank 0's node board service (it hands out the board's
 * memory and the ranks' window descriptors over SCM_RIGHTS, and watches the
 * ranks), and a rank > 0 joining it. Admission: a process of rank 0's uid
 * (or root) is handshaken at once, each in its own short thread, so no
 * connection waits behind another's; another uid only with a token, at most
 * BOARD_STRANGERS of them pending (common/net/preauth.h); without a token it
 * is turned away before any handshake. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/interrupt.h"
#include "common/base/log.h"
#include "common/net/fdpass.h"
#include "common/net/handshake.h"
#include "common/base/util.h"
#include "engine_side/board_internal.h"

/* How many processes of another uid may be in their handshake at once
 * (with a token; without one they are turned away), per uid; one silent
 * for BOARD_STRANGER_EVICT_MS gives way to the next. A member's handshake
 * has BOARD_ADMIT_MS. */
#define BOARD_STRANGERS 4
#define BOARD_STRANGERS_PER_UID 2
#define BOARD_STRANGER_EVICT_MS 250
#define BOARD_ADMIT_MS 2000
#define BOARD_LOG_MS 10000
#define BOARD_LOG_BURST 5
#define BOARD_MAX_ADMITTING BOARD_MAX_CLIENTS

/* A warning about a connection turned away: BOARD_LOG_BURST lines per
 * BOARD_LOG_MS, then one with a count. */
static void warn_limited(board_t *b, const char *what)
{
    uint64_t held = 0;
    if (!wsync_loglimit_take(&b->warned, wsync_now_ns(), &held))
        return;
    if (held)
        LOG_WARN("node board '%s': %s (and %llu more turned away since the last such line)", b->name, what,
                 (unsigned long long)held);
    else
        LOG_WARN("node board '%s': %s", b->name, what);
}

/* A member's connection closed: forget it, and its claim on a rank (a
 * process whose join failed after it was let in, e.g. with another local
 * world, holds no rank). */
static void drop_client(board_t *b, int fd)
{
    int i, r;
    pthread_mutex_lock(&b->lock);
    for (i = 0; i < b->nclients; i++)
        if (b->clients[i].fd == fd) {
            for (r = 0; r < BOARD_MAX_RANKS; r++)
                if (b->claimed[r] == b->clients[i].pid)
                    b->claimed[r] = 0;
            b->clients[i] = b->clients[--b->nclients];
            break;
        }
    pthread_mutex_unlock(&b->lock);
    close(fd);
}

/* OP_JOIN (b->lock held): refuse a second process as a rank whose process
 * runs (it would take the rank's entry; when it exits the node loses the
 * rank while the original still runs), else forget the rank's old windows
 * so no peer maps the memory of a process that is gone. */
static void join(board_t *b, const board_msg_t *m, int32_t pid, board_msg_t *reply)
{
    int32_t cur = __atomic_load_n(&b->sh->ranks[m->rank].pid, __ATOMIC_ACQUIRE);
    int s;
    if (m->rank == 0 || (cur > 0 && cur != pid && board_pid_alive(cur)) ||
        (b->claimed[m->rank] > 0 && b->claimed[m->rank] != pid && board_pid_alive(b->claimed[m->rank]))) {
        int32_t holder = m->rank == 0 ? getpid() : cur > 0 && board_pid_alive(cur) ? cur : b->claimed[m->rank];
        char why[200];
        reply->status = WSYNC_ERR_CONFLICT;
        reply->slot = BOARD_JOIN_DUPLICATE;
        reply->len = (uint64_t)holder;
        snprintf(why, sizeof(why), "refused pid %d as local rank %d: pid %d runs as that rank", (int)pid, m->rank,
                 (int)holder);
        warn_limited(b, why);
        return;
    }
    b->claimed[m->rank] = pid;
    for (s = 0; s < BOARD_ENTRIES; s++) {
        board_win_t *w = &b->wins[m->rank][s];
        if (w->present && w->fd >= 0)
            close(w->fd);
        w->present = 0;
        w->fd = -1;
    }
}

static void handle(board_t *b, int fd, int32_t pid)
{
    board_msg_t m, reply;
    int in_fd = -1;
    memset(&reply, 0, sizeof(reply));
    if (wsync_fd_recv(fd, &m, sizeof(m), &in_fd) != WSYNC_OK) {
        drop_client(b, fd);
        return;
    }
    reply.op = m.op;
    if (m.op == OP_JOIN && (m.rank < 0 || m.rank >= (int)b->sh->local_world)) {
        reply.status = WSYNC_ERR_CONFLICT; /* started with another --local-world */
        reply.slot = BOARD_JOIN_WORLD;
        reply.epoch = b->sh->local_world;
        wsync_fd_send(fd, &reply, sizeof(reply), -1);
        if (in_fd >= 0)
            close(in_fd);
        return;
    }
    if (m.rank < 0 || m.rank >= (int)b->sh->local_world || m.slot < 0 || m.slot >= BOARD_ENTRIES) {
        reply.status = WSYNC_ERR_INVALID;
        wsync_fd_send(fd, &reply, sizeof(reply), -1);
        if (in_fd >= 0)
            close(in_fd);
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (m.op == OP_JOIN) {
        join(b, &m, pid, &reply);
        pthread_mutex_unlock(&b->lock);
        wsync_fd_send(fd, &reply, sizeof(reply), reply.status == WSYNC_OK ? b->memfd : -1);
        if (in_fd >= 0)
            close(in_fd);
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

typedef struct admission {
    board_t *b;
    int fd;
    int32_t pid;
    int stranger;
    wsync_preauth_ticket_t ticket;
} admission_t;

/* One connection's handshake (its own thread: none waits behind another):
 * same uid, or the token's proof. Let in, it joins the service's poll. */
static void *admit_main(void *arg)
{
    admission_t *a = arg;
    board_t *b = a->b;
    unsigned char *payload = NULL;
    size_t len = 0;
    wsync_hs_t hs;
    char peer[64];
    int ok;
    snprintf(peer, sizeof(peer), "local process %d", (int)a->pid);
    ok = wsync_hs_serve(&hs, a->fd, &b->auth, WSYNC_HS_BOARD, peer, 0, BOARD_ADMIT_MS, &payload, &len) == WSYNC_OK;
    free(payload);
    if (!ok)
        warn_limited(b, wsync_last_error());
    else
        ok = wsync_hs_accept(&hs, NULL, 0) == WSYNC_OK;
    if (a->stranger)
        wsync_preauth_leave(&b->strangers, a->ticket);
    pthread_mutex_lock(&b->lock);
    if (ok && !__atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE) && b->nclients < BOARD_MAX_CLIENTS) {
        b->clients[b->nclients++] = (board_client_t){.fd = a->fd, .pid = a->pid};
        a->fd = -1;
    }
    pthread_mutex_unlock(&b->lock);
    if (a->fd >= 0)
        close(a->fd);
    free(a);
    __atomic_sub_fetch(&b->admitting, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A new connection: its peer's credentials first (SO_PEERCRED), before a
 * byte is read: rank 0's uid or root is a member, handshaken at once;
 * another uid may only prove the token, a few at a time. */
static void admit(board_t *b, int fd)
{
    struct ucred cred = {0};
    socklen_t cl = sizeof(cred);
    admission_t *a;
    pthread_t th;
    char why[256], peer[32];
    int stranger, entered = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
        close(fd);
        return;
    }
    stranger = cred.uid != geteuid() && cred.uid != 0;
    snprintf(peer, sizeof(peer), "uid %u", (unsigned)cred.uid);
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        close(fd);
        return;
    }
    *a = (admission_t){.b = b, .fd = fd, .pid = cred.pid, .stranger = stranger};
    if (stranger && !wsync_auth_on(&b->auth))
        snprintf(why, sizeof(why),
                 "turned away pid %d of uid %u: without a token only processes of uid %u (or root) join this node",
                 (int)cred.pid, (unsigned)cred.uid, (unsigned)geteuid());
    else if (stranger && !(entered = wsync_preauth_enter(&b->strangers, peer, fd, wsync_now_ns(), &a->ticket)))
        snprintf(why, sizeof(why), "turned away pid %d of uid %u: %d processes of other uids are proving the token",
                 (int)cred.pid, (unsigned)cred.uid, wsync_preauth_pending(&b->strangers));
    else if (__atomic_load_n(&b->admitting, __ATOMIC_ACQUIRE) >= BOARD_MAX_ADMITTING)
        snprintf(why, sizeof(why), "turned away pid %d: %d handshakes pending", (int)cred.pid, BOARD_MAX_ADMITTING);
    else {
        __atomic_add_fetch(&b->admitting, 1, __ATOMIC_ACQ_REL);
        if (pthread_create(&th, NULL, admit_main, a) == 0) {
            pthread_detach(th);
            return;
        }
        __atomic_sub_fetch(&b->admitting, 1, __ATOMIC_RELEASE);
        snprintf(why, sizeof(why), "turned away pid %d: cannot start a thread", (int)cred.pid);
    }
    if (entered)
        wsync_preauth_leave(&b->strangers, a->ticket);
    warn_limited(b, why);
    close(fd);
    free(a);
}

static void *service_main(void *arg)
{
    board_t *b = arg;
    while (!__atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfds[1 + BOARD_MAX_CLIENTS];
        int32_t pids[1 + BOARD_MAX_CLIENTS];
        int n = 0, i;
        pfds[n++] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        pthread_mutex_lock(&b->lock);
        for (i = 0; i < b->nclients; i++) {
            pids[n] = b->clients[i].pid;
            pfds[n++] = (struct pollfd){.fd = b->clients[i].fd, .events = POLLIN};
        }
        pthread_mutex_unlock(&b->lock);
        board_watch_ranks(b);
        if (poll(pfds, (nfds_t)n, 100) <= 0)
            continue;
        for (i = n - 1; i >= 1; i--)
            if (pfds[i].revents)
                handle(b, pfds[i].fd, pids[i]);
        if (pfds[0].revents & POLLIN) {
            int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                admit(b, fd);
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
    WSYNC_CHECK(wsync_preauth_init(&b->strangers, BOARD_STRANGERS, BOARD_STRANGERS_PER_UID, BOARD_STRANGER_EVICT_MS));
    WSYNC_CHECK(wsync_unix_listen(name, &b->listen_fd));
    if (pthread_create(&b->thread, NULL, service_main, b) != 0)
        return wsync_error(WSYNC_ERR_IO, "cannot start the node board thread");
    b->serving = 1;
    return WSYNC_OK;
}

/* Rank 0 refused this rank's OP_JOIN: say why and what to do. */
static wsync_status_t join_refused(const board_t *b, const char *name, const board_msg_t *m)
{
    if (m->status == WSYNC_ERR_CONFLICT && m->slot == BOARD_JOIN_DUPLICATE)
        return wsync_error(WSYNC_ERR_CONFLICT,
                           "node board '%s': local rank %d is already running (pid %llu) on this node: stop that "
                           "process first, or start this one with the --local-rank that is missing",
                           name, b->local_rank, (unsigned long long)m->len);
    if (m->status == WSYNC_ERR_CONFLICT && m->slot == BOARD_JOIN_WORLD)
        return wsync_error(WSYNC_ERR_CONFLICT,
                           "node board '%s': local rank 0 runs with --local-world %u, which has no local rank %d: "
                           "start every rank of the node with the same --local-world",
                           name, m->epoch, b->local_rank);
    return wsync_error(m->status < 0 ? (wsync_status_t)m->status : WSYNC_ERR_PEER,
                       "node board '%s': local rank 0 refused local rank %d (%s)", name, b->local_rank,
                       wsync_status_str((wsync_status_t)m->status));
}

/* One try at joining rank 0's board: connected, proved, board mapped. */
static wsync_status_t join_once(board_t *b, const char *name, int timeout_ms, const int *cancel)
{
    board_msg_t m = {.op = OP_JOIN, .rank = b->local_rank};
    WSYNC_CHECK(wsync_unix_connect_cancellable(name, timeout_ms, cancel, &b->sock));
    WSYNC_CHECK(wsync_hs_connect(b->sock, &b->auth, WSYNC_HS_BOARD, name, NULL, 0, timeout_ms, NULL, 0, NULL));
    WSYNC_CHECK(call(b, &m, -1, &b->memfd));
    if (m.status != WSYNC_OK)
        return join_refused(b, name, &m);
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

static wsync_status_t open_member(board_t *b, const char *name, int local_world, int timeout_ms, const int *cancel)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    wsync_status_t st;

    /* A rank 0 killed while this rank joins (a restart) closes the connection
     * mid-handshake or mid-join: join its successor, within timeout_ms. A
     * refused proof (WSYNC_ERR_AUTH) or a timeout is final. */
    while ((st = join_once(b, name, timeout_ms, cancel)) == WSYNC_ERR_PEER || st == WSYNC_ERR_IO) {
        uint64_t now = wsync_now_ns();
        if (now + 50000000ULL >= deadline)
            return st;
        unjoin(b);
        if (wsync_sleep_cancellable(50, cancel))
            return wsync_cancel_error("waiting for local rank 0's node board");
        timeout_ms = (int)((deadline - now - 50000000ULL) / 1000000ULL);
    }
    WSYNC_CHECK(st);
    if (__atomic_load_n(&b->sh->magic, __ATOMIC_ACQUIRE) != BOARD_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "node board '%s' is not a wsync board", name);
    if ((int)b->sh->local_world != local_world)
        return wsync_error(WSYNC_ERR_CONFLICT,
                           "node board '%s': local rank 0 runs with --local-world %u, this rank was started with "
                           "%d: "
                           "start every rank of the node with the same --local-world",
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
    return board_open_cancellable(name, local_rank, local_world, device, auth, timeout_ms, NULL, out);
}

wsync_status_t board_open_cancellable(const char *name, int local_rank, int local_world, int device,
                                      const wsync_auth_t *auth, int timeout_ms, const int *cancel, board_t **out)
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
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->memfd = b->sock = b->listen_fd = -1;
    pthread_mutex_init(&b->lock, NULL);
    pthread_mutex_init(&b->watch_lock, NULL);
    wsync_loglimit_init(&b->warned, BOARD_LOG_MS, BOARD_LOG_BURST);
    for (r = 0; r < BOARD_MAX_RANKS; r++)
        for (s = 0; s < BOARD_ENTRIES; s++)
            b->wins[r][s].fd = -1;
    st = local_rank == 0 ? open_leader(b, name, local_world) : open_member(b, name, local_world, timeout_ms, cancel);
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
    __atomic_store_n(&b->stopping, 1, __ATOMIC_RELEASE);
    if (b->serving)
        pthread_join(b->thread, NULL);
    /* Admissions in flight end within their handshake's BOARD_ADMIT_MS. */
    while (__atomic_load_n(&b->admitting, __ATOMIC_ACQUIRE) > 0)
        usleep(5000);
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    for (i = 0; i < b->nclients; i++)
        close(b->clients[i].fd);
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
    wsync_preauth_destroy(&b->strangers);
    wsync_loglimit_destroy(&b->warned);
    pthread_mutex_destroy(&b->watch_lock);
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

static const char *const text_names[] = {"layout spec", "version record"};

wsync_status_t board_put_text(board_t *b, board_text_t which, const char *text, size_t len)
{
    wsync_blob_t none = {0};
    wsync_status_t st;
    int fd = memfd_create("wsync-text", MFD_CLOEXEC);
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "memfd_create: %s", strerror(errno));
    if (write(fd, text, len) != (ssize_t)len) {
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "cannot write the %s: %s", text_names[which], strerror(errno));
    }
    st = board_put_window(b, BOARD_TEXT0 + (int)which, &none, fd, len);
    close(fd);
    return st;
}

wsync_status_t board_get_text(board_t *b, int rank, board_text_t which, int timeout_ms, char **out, size_t *len)
{
    wsync_blob_t blob;
    uint64_t n = 0;
    uint32_t epoch;
    int fd = -1;
    char *s;
    if (board_get_window(b, rank, BOARD_TEXT0 + (int)which, timeout_ms, &blob, &fd, &n, &epoch) != WSYNC_OK)
        return wsync_error(WSYNC_ERR_TIMEOUT, "local rank %d shared no %s in time: %s", rank, text_names[which],
                           wsync_last_error());
    if (fd < 0)
        return wsync_error(WSYNC_ERR_PEER, "local rank %d shared no %s", rank, text_names[which]);
    s = n < (64ull << 30) ? malloc(n + 1) : NULL;
    if (s == NULL || pread(fd, s, n, 0) != (ssize_t)n) {
        free(s);
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "cannot read local rank %d's %s", rank, text_names[which]);
    }
    close(fd);
    s[n] = '\0';
    *out = s;
    if (len)
        *len = (size_t)n;
    return WSYNC_OK;
}
