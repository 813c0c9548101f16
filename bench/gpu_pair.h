/* gpu_pair.h: what the two-GPU benchmarks share: two forked ranks (rank r
 * on GPU r) joined by a socketpair for barriers and small exchanges, a 2-rank
 * NCCL communicator built over it, CUDA-event timing and the median. */
#ifndef WSYNC_BENCH_GPU_PAIR_H
#define WSYNC_BENCH_GPU_PAIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define DIE(...)                                 \
    do {                                         \
        fprintf(stderr, "rank %d: ", pair_rank); \
        fprintf(stderr, __VA_ARGS__);            \
        fprintf(stderr, "\n");                   \
        _exit(1);                                \
    } while (0)
#define CU(call)                                          \
    do {                                                  \
        cudaError_t e_ = (call);                          \
        if (e_ != cudaSuccess)                            \
            DIE("%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)
#define NC(call)                                          \
    do {                                                  \
        ncclResult_t r_ = (call);                         \
        if (r_ != ncclSuccess)                            \
            DIE("%s: %s", #call, ncclGetErrorString(r_)); \
    } while (0)

static int pair_rank = -1, pair_fd = -1;

static inline void pair_xchg(const void *mine, void *theirs, size_t len)
{
    size_t done = 0;
    if (write(pair_fd, mine, len) != (ssize_t)len)
        DIE("exchange: write failed");
    while (done < len) {
        ssize_t n = read(pair_fd, (char *)theirs + done, len - done);
        if (n <= 0)
            DIE("exchange: peer gone");
        done += (size_t)n;
    }
}

static inline void pair_barrier(void)
{
    char a = 1, b;
    pair_xchg(&a, &b, 1);
}

/* Runs fn(rank) in two processes; returns 0 if both exit 0. */
static inline int pair_run(int (*fn)(int rank))
{
    int sv[2], st0 = 0, st1 = 0;
    pid_t p0, p1;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    p0 = fork();
    if (p0 == 0) {
        pair_rank = 0;
        pair_fd = sv[0];
        close(sv[1]);
        st0 = fn(0);
        fflush(stdout);
        _exit(st0);
    }
    p1 = fork();
    if (p1 == 0) {
        pair_rank = 1;
        pair_fd = sv[1];
        close(sv[0]);
        st1 = fn(1);
        fflush(stdout);
        _exit(st1);
    }
    close(sv[0]);
    close(sv[1]);
    waitpid(p0, &st0, 0);
    waitpid(p1, &st1, 0);
    return !(WIFEXITED(st0) && WEXITSTATUS(st0) == 0 && WIFEXITED(st1) && WEXITSTATUS(st1) == 0);
}

/* CUDA devices here, counted in a throw-away child: CUDA must not be
 * initialized in the parent before it forks the ranks. */
static inline int pair_gpus(void)
{
    int fds[2], n = 0, st;
    pid_t pid;
    if (pipe(fds) != 0)
        return 0;
    pid = fork();
    if (pid == 0) {
        if (cudaGetDeviceCount(&n) != cudaSuccess)
            n = 0;
        if (write(fds[1], &n, sizeof(n)) != sizeof(n))
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &n, sizeof(n)) != sizeof(n))
        n = 0;
    close(fds[0]);
    waitpid(pid, &st, 0);
    return n;
}

static inline ncclComm_t pair_comm(void)
{
    ncclUniqueId id, other;
    ncclComm_t c;
    if (pair_rank == 0)
        NC(ncclGetUniqueId(&id));
    else
        memset(&id, 0, sizeof(id));
    pair_xchg(&id, &other, sizeof(id));
    if (pair_rank == 1)
        id = other;
    NC(ncclCommInitRank(&c, 2, id, pair_rank));
    return c;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slower rank's figure: a pair's operation ends when both are done. */
static inline double pair_max(double mine)
{
    double theirs;
    pair_xchg(&mine, &theirs, sizeof(mine));
    return mine > theirs ? mine : theirs;
}

#endif
