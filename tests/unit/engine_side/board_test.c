/* board_test.c: the node board through its API, between two real processes
 * (local rank 0 here, local rank 1 a forked child): attempts open, are found
 * and closed; the landing map and landed marks of one attempt are never
 * mistaken for another's; a rank's failure and its reason reach the other;
 * a rank marking itself done, and rank 0 closing an attempt, wake the
 * other rank's sleep on the board (board_wait_ranks) at once. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/util.h"
#include "engine_side/board.h"
#include "tests/test.h"

static char name[128];
static char self[4096]; /* this program (readlink of /proc/self/exe at start: under valgrind, the client's) */

/* The child's half of the conversation: rank 1. Exit status 0 = all good;
 * otherwise the line that failed. */
#define EXPECT(cond)                                                            \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "  child: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            _exit(1);                                                           \
        }                                                                       \
    } while (0)

/* Sleeps on the ranks' sequence (a 30 s timeout a sleep) until attempt
 * gen closes: 1 if rank 0's close woke it, 0 if a sleep ran to its
 * timeout. */
static int woken_until_closed(board_t *b, uint64_t gen)
{
    for (;;) {
        const uint32_t seq = board_ranks_seq(b);
        uint64_t t0;
        if (board_attempt_outcome(b, gen) != BOARD_ATTEMPT_OPEN)
            return 1;
        t0 = wsync_now_ns();
        board_wait_ranks(b, seq, 30000000);
        if (wsync_now_ns() - t0 >= 29000000000ULL)
            return 0;
    }
}

static void child(void)
{
    board_t *b = NULL;
    board_attempt_t a;
    const uint8_t *land;
    char why[64];
    int tries;
    EXPECT(board_open(name, 1, 2, -1, NULL, 5000, &b) == WSYNC_OK);
    /* Attempt 1 (rank 0 opens it after we joined). */
    for (tries = 0; !board_attempt_find(b, 0, 0, &a) && tries < 500; tries++)
        board_wait_attempt(b, board_attempt_seq(b), 20);
    EXPECT(a.gen == 1 && a.version == 7 && a.slot == 1);
    EXPECT(!board_attempt_find(b, 0, 8, &a)); /* not the version asked for */
    for (tries = 0; (land = board_landing(b, 1)) == NULL && tries < 5000; tries++)
        usleep(1000);
    EXPECT(land && land[0] == 0 && land[1] == 1 && land[2] == 0);
    EXPECT(board_landing(b, 2) == NULL);
    board_mark_landed(b, 1, 1, 1);
    for (tries = 0; !board_is_landed(b, 1, 0, 1) && tries < 5000; tries++)
        usleep(1000);
    EXPECT(board_is_landed(b, 1, 0, 1));
    EXPECT(!board_is_landed(b, 1, 0, 2) && !board_is_landed(b, 0, 0, 1));
    usleep(200000); /* rank 0 is asleep on the board by now: the mark has to wake it */
    board_mark_done(b, 1);
    EXPECT(woken_until_closed(b, 1));
    EXPECT(board_attempt_outcome(b, 1) == BOARD_ATTEMPT_OK);
    /* Attempt 2: we fail it. */
    for (tries = 0; !board_attempt_find(b, 1, 0, &a) && tries < 500; tries++)
        board_wait_attempt(b, board_attempt_seq(b), 20);
    EXPECT(a.gen == 2 && a.version == 8 && a.slot == 0); /* the other slot of two */
    EXPECT(!board_is_landed(b, 0, 0, 2));
    board_mark_failed(b, 2, "digest mismatch in chunk 3");
    EXPECT(woken_until_closed(b, 2));
    EXPECT(board_attempt_outcome(b, 2) == BOARD_ATTEMPT_FAILED);
    EXPECT(!board_rank_failed(b, 1, 1, why, sizeof(why)));
    board_close(b);
    _exit(0);
}

/* A role of local rank 1 (--rank1: child(); --hold: hold()) in a fresh
 * process, the test program again (self): a forked copy of this process, which
 * runs the board's threads, can inherit a lock one of them held and hang
 * (it did, under ASan on a loaded machine). fd: a descriptor it inherits. */
static pid_t spawn(const char *role, const char *nm, int fd)
{
    char fdarg[16];
    pid_t pid;
    snprintf(fdarg, sizeof(fdarg), "%d", fd);
    pid = fork();
    if (pid == 0) {
        execl(self, "board_test", role, nm, fdarg, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The child's exit status, waiting up to 30 s (then it is killed: a hung
 * child fails the test rather than hanging it); -1 when killed. */
static int reap(pid_t pid)
{
    int status = 0, i;
    for (i = 0; i < 3000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static int wait_for(int (*cond)(board_t *, void *), board_t *b, void *arg)
{
    int tries;
    for (tries = 0; tries < 5000; tries++) {
        if (cond(b, arg))
            return 1;
        usleep(1000);
    }
    return 0;
}

static int rank1_alive(board_t *b, void *arg)
{
    (void)arg;
    return board_rank_alive(b, 1);
}

static int rank1_done(board_t *b, void *gen)
{
    return board_rank_done(b, 1, *(uint64_t *)gen);
}

static int chunk1_landed(board_t *b, void *arg)
{
    (void)arg;
    return board_is_landed(b, 1, 1, 1);
}

static int rank1_failed(board_t *b, void *arg)
{
    char why[64];
    (void)arg;
    return board_rank_failed(b, 1, 2, why, sizeof(why));
}

static void two_ranks_agree_on_attempts(void)
{
    board_t *b = NULL;
    board_attempt_t a1, a2;
    uint8_t land[3] = {0, 1, 0};
    uint64_t gen1 = 1;
    char why[64] = "";
    int status = -1;
    pid_t pid;

    snprintf(name, sizeof(name), "wsync-test/board/%d", (int)getpid());
    CHECK_OK(board_open(name, 0, 2, -1, NULL, 5000, &b));
    if (b == NULL)
        return;
    pid = spawn("--rank1", name, -1);
    CHECK(pid > 0 && wait_for(rank1_alive, b, NULL));
    CHECK_EQ(board_rank_device(b, 1), -1);
    CHECK(board_rank_epoch(b, 1) >= 1);

    board_attempt_open(b, 7, 2, &a1);
    CHECK_EQ(a1.gen, 1);
    CHECK_EQ(a1.slot, 1);
    CHECK_EQ(board_attempt_outcome(b, 1), BOARD_ATTEMPT_OPEN);
    CHECK_OK(board_post_landing(b, a1.gen, land, 3));
    board_mark_landed(b, 1, 0, a1.gen);
    CHECK(wait_for(chunk1_landed, b, NULL));
    board_mark_done(b, a1.gen);
    for (;;) { /* rank 1's mark wakes this sleep (its timeout, 30 s, would fail the test) */
        const uint32_t seq = board_ranks_seq(b);
        uint64_t t0 = wsync_now_ns();
        if (rank1_done(b, &gen1))
            break;
        board_wait_ranks(b, seq, 30000000);
        if (wsync_now_ns() - t0 >= 29000000000ULL) {
            CHECK(rank1_done(b, &gen1));
            break;
        }
    }
    board_attempt_close(b, &a1, 1);
    CHECK_EQ(board_attempt_outcome(b, 1), BOARD_ATTEMPT_OK);

    board_attempt_open(b, 8, 2, &a2);
    CHECK_EQ(a2.gen, 2);
    CHECK_EQ(a2.slot, 0);               /* slot 1 holds version 7 */
    CHECK(board_landing(b, 2) == NULL); /* attempt 1's map is not attempt 2's */
    CHECK(wait_for(rank1_failed, b, NULL));
    CHECK(board_rank_failed(b, 1, 2, why, sizeof(why)));
    CHECK_STR(why, "digest mismatch in chunk 3");
    board_attempt_close(b, &a2, 0);
    CHECK_EQ(board_attempt_outcome(b, 1), BOARD_ATTEMPT_SUPERSEDED);

    status = reap(pid);
    CHECK_EQ(status, 0);
    board_close(b);
}

static void landing_map_too_large_is_refused(void)
{
    board_t *b = NULL;
    static uint8_t land[BOARD_MAX_CHUNKS + 1];
    char nm[128];
    snprintf(nm, sizeof(nm), "wsync-test/board-big/%d", (int)getpid());
    CHECK_OK(board_open(nm, 0, 1, -1, NULL, 1000, &b));
    if (b == NULL)
        return;
    CHECK_FAILS(board_post_landing(b, 1, land, BOARD_MAX_CHUNKS + 1), WSYNC_ERR_INVALID, "raise the chunk size");
    CHECK(board_landing(b, 1) == NULL);
    board_close(b);
}

/* --hold: local rank 1 of board nm until fd (a pipe) closes. */
static void hold(const char *nm, int fd)
{
    board_t *b = NULL;
    char c;
    if (board_open(nm, 1, 2, -1, NULL, 5000, &b) != WSYNC_OK)
        _exit(1);
    if (read(fd, &c, 1) < 0) /* until the parent closes it */
        _exit(2);
    board_close(b);
    _exit(0);
}

/* A process that holds local rank 1 until its pipe closes. */
static pid_t hold_rank1(const char *nm, int *release)
{
    int fds[2];
    pid_t pid;
    if (pipe(fds) != 0)
        return -1;
    fcntl(fds[1], F_SETFD, FD_CLOEXEC); /* the holder keeps only its end */
    pid = spawn("--hold", nm, fds[0]);
    close(fds[0]);
    *release = fds[1];
    return pid;
}

typedef struct watched {
    int calls, rank;
    int32_t old_pid, new_pid;
} watched_t;

static void on_rank(void *ctx, int rank, int32_t old_pid, int32_t new_pid)
{
    watched_t *w = ctx;
    w->calls++;
    w->rank = rank;
    w->old_pid = old_pid;
    w->new_pid = new_pid;
}

static int watch_saw_it(board_t *b, void *arg)
{
    (void)b;
    return __atomic_load_n(&((watched_t *)arg)->calls, __ATOMIC_ACQUIRE) > 0;
}

/* A second process as local rank 1 is refused while the first runs, naming
 * the rank and the pid; a rank outside rank 0's local world is told the
 * world; rank 0's watch sees the rank killed. */
static void duplicate_rank_and_other_world_refused_lost_rank_seen(void)
{
    board_t *b = NULL, *dup = NULL;
    watched_t w = {0};
    char nm[128], want[96];
    int release = -1, status = -1;
    pid_t holder;

    snprintf(nm, sizeof(nm), "wsync-test/board-dup/%d", (int)getpid());
    CHECK_OK(board_open(nm, 0, 2, -1, NULL, 5000, &b));
    if (b == NULL)
        return;
    board_watch(b, on_rank, &w);
    holder = hold_rank1(nm, &release);
    CHECK(holder > 0 && wait_for(rank1_alive, b, NULL));
    /* This process as a second rank 1 (pid differs from the holder's). */
    snprintf(want, sizeof(want), "local rank 1 is already running (pid %d)", (int)holder);
    CHECK_FAILS(board_open(nm, 1, 2, -1, NULL, 2000, &dup), WSYNC_ERR_CONFLICT, want);
    CHECK(dup == NULL);
    CHECK_FAILS(board_open(nm, 2, 3, -1, NULL, 2000, &dup), WSYNC_ERR_CONFLICT,
                "local rank 0 runs with --local-world 2, which has no local rank 2");
    CHECK(board_rank_alive(b, 1) && board_rank_epoch(b, 1) == 1); /* the holder's entry untouched */
    kill(holder, SIGKILL);
    waitpid(holder, &status, 0);
    close(release);
    CHECK(wait_for(watch_saw_it, b, &w));
    CHECK_EQ(w.rank, 1);
    CHECK_EQ(w.old_pid, holder);
    CHECK_EQ(w.new_pid, 0);
    CHECK(!board_rank_alive(b, 1));
    CHECK_FAILS(board_open(nm, 1, 3, -1, NULL, 2000, &dup), WSYNC_ERR_CONFLICT,
                "local rank 0 runs with --local-world 2, this rank was started with 3");
    usleep(300000); /* rank 0 sees that failed join's connection close */
    /* Now a new process may be rank 1. */
    holder = hold_rank1(nm, &release);
    CHECK(holder > 0 && wait_for(rank1_alive, b, NULL));
    close(release);
    status = reap(holder);
    CHECK_EQ(status, 0);
    board_watch(b, NULL, NULL);
    board_close(b);
}

int main(int argc, char **argv)
{
    if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
        snprintf(self, sizeof(self), "%s", argv[0]);
    if (argc == 4 && strcmp(argv[1], "--rank1") == 0) {
        snprintf(name, sizeof(name), "%s", argv[2]);
        child();
    }
    if (argc == 4 && strcmp(argv[1], "--hold") == 0)
        hold(argv[2], atoi(argv[3]));
    RUN(two_ranks_agree_on_attempts);
    RUN(landing_map_too_large_is_refused);
    RUN(duplicate_rank_and_other_world_refused_lost_rank_seen);
    TEST_EXIT();
}
