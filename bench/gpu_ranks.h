/* gpu_ranks.h: G forked ranks (rank r on GPU r) for the multi-GPU benchmarks,
 * joined through the parent, which relays small all-gathers (window blobs,
 * the NCCL id, timings, check flags) and does no CUDA itself. Builds on
 * gpu_pair.h (DIE/CU/NC name the rank through pair_rank; median, GPU count). */
#ifndef WSYNC_BENCH_GPU_RANKS_H
#define WSYNC_BENCH_GPU_RANKS_H

#include <signal.h>
#include <stdint.h>

#include "bench/gpu_pair.h"

#define RANKS_MAX 16

static int ranks_n, ranks_fd = -1;

static inline void ranks_write(int fd, const void *p, size_t len)
{
    if (write(fd, p, len) != (ssize_t)len)
        DIE("rank exchange: write failed");
}

/* 0 on EOF before any byte, 1 when all `len` bytes arrived, DIE otherwise. */
static inline int ranks_read(int fd, void *p, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = read(fd, (char *)p + done, len - done);
        if (n == 0 && done == 0)
            return 0;
        if (n <= 0)
            DIE("rank exchange: peer gone");
        done += (size_t)n;
    }
    return 1;
}

/* Every rank contributes `len` bytes; all[] gets them in rank order. */
static inline void ranks_allgather(const void *mine, void *all, size_t len)
{
    uint32_t l = (uint32_t)len;
    ranks_write(ranks_fd, &l, sizeof(l));
    ranks_write(ranks_fd, mine, len);
    if (!ranks_read(ranks_fd, all, len * (size_t)ranks_n))
        DIE("rank exchange: the parent went away (another rank failed)");
}

static inline void ranks_barrier(void)
{
    char a = 1, all[RANKS_MAX];
    ranks_allgather(&a, all, 1);
}

/* The slowest rank's figure: a pattern ends when its last rank is done. */
static inline double ranks_max(double mine)
{
    double all[RANKS_MAX], m = mine;
    int i;
    ranks_allgather(&mine, all, sizeof(mine));
    for (i = 0; i < ranks_n; i++)
        m = all[i] > m ? all[i] : m;
    return m;
}

/* 1 when every rank says 1. */
static inline int ranks_all(int mine)
{
    int all[RANKS_MAX], i, r = 1;
    ranks_allgather(&mine, all, sizeof(mine));
    for (i = 0; i < ranks_n; i++)
        r = r && all[i];
    return r;
}

/* The parent's side: relay all-gathers until a rank closes its socket (it
 * exited, or died: then closing every socket wakes the others with EOF). */
static inline void ranks_relay(const int *fds, int n)
{
    static char buf[RANKS_MAX * 4096];
    uint32_t len = 0, l;
    int i;
    for (;;) {
        for (i = 0; i < n; i++) {
            if (read(fds[i], &l, sizeof(l)) != sizeof(l) || (i > 0 && l != len) || l > 4096 ||
                (l > 0 && ranks_read(fds[i], buf + (size_t)i * l, l) != 1))
                return;
            len = l;
        }
        for (i = 0; i < n; i++)
            if (write(fds[i], buf, (size_t)len * n) != (ssize_t)((size_t)len * n))
                return;
    }
}

/* Runs fn(rank) in n processes, rank r on GPU r; 0 if every one exits 0. */
static inline int ranks_run(int n, int (*fn)(int rank))
{
    int sv[RANKS_MAX][2], parent_fds[RANKS_MAX], i, j, st, left, bad = 0;
    pid_t pid[RANKS_MAX];
    if (n < 1 || n > RANKS_MAX)
        return 1;
    for (i = 0; i < n; i++)
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) != 0)
            return 1;
    fflush(stdout);
    for (i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            for (j = 0; j < n; j++) {
                close(sv[j][0]);
                if (j != i)
                    close(sv[j][1]);
            }
            pair_rank = i;
            ranks_n = n;
            ranks_fd = sv[i][1];
            st = fn(i);
            fflush(stdout);
            _exit(st);
        }
        if (pid[i] < 0)
            return 1;
    }
    for (i = 0; i < n; i++) {
        close(sv[i][1]);
        parent_fds[i] = sv[i][0];
    }
    ranks_relay(parent_fds, n);
    for (i = 0; i < n; i++)
        close(parent_fds[i]);
    /* A rank that failed can leave the others stuck inside NCCL waiting for
     * it: once one fails, the rest are ended. */
    for (left = n; left > 0; left--) {
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0)
            return 1;
        for (i = 0; i < n; i++)
            if (pid[i] == p)
                pid[i] = 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (!bad)
                for (i = 0; i < n; i++)
                    if (pid[i] > 0)
                        kill(pid[i], SIGKILL);
            bad = 1;
        }
    }
    return bad;
}

/* An n-rank NCCL communicator; rank 0 makes the id. */
static inline ncclComm_t ranks_comm(void)
{
    ncclUniqueId id, all[RANKS_MAX];
    ncclComm_t c;
    memset(&id, 0, sizeof(id));
    if (pair_rank == 0)
        NC(ncclGetUniqueId(&id));
    ranks_allgather(&id, all, sizeof(id));
    NC(ncclCommInitRank(&c, ranks_n, all[0], pair_rank));
    return c;
}

#endif
