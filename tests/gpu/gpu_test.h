/* gpu_test.h: what the GPU tests share: how many GPUs there are (through the
 * wsync memory backend, so the tests build without CUDA too), random bytes,
 * and pipes to pass blobs between a forked pair of processes. */
#ifndef WSYNC_TESTS_GPU_TEST_H
#define WSYNC_TESTS_GPU_TEST_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/mem/mem.h"
#include "common/transport/transport.h"

/* Number of CUDA devices usable here (0 without CUDA or without a GPU).
 * Leaves device 0 current when there is one. Call it in a process only after
 * any fork it will do: CUDA state does not survive fork. */
static inline int gpu_count(void)
{
    int n = 0;
    while (n < 16 && wsync_mem_cuda.init(n) == WSYNC_OK)
        n++;
    if (n > 0)
        wsync_mem_cuda.init(0);
    return n;
}

/* Counts devices in a throw-away child, so the parent may still fork
 * CUDA-free children afterwards. */
static inline int gpu_count_forked(void)
{
    int fds[2], n = 0;
    pid_t pid;
    if (pipe(fds) != 0)
        return 0;
    pid = fork();
    if (pid == 0) {
        n = gpu_count();
        if (write(fds[1], &n, sizeof(n)) != sizeof(n))
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &n, sizeof(n)) != sizeof(n))
        n = 0;
    close(fds[0]);
    if (pid > 0) {
        int status;
        waitpid(pid, &status, 0);
    }
    return n;
}

static inline void fill_random(void *p, size_t len, uint64_t seed)
{
    unsigned char *b = p;
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
    size_t i;
    for (i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (unsigned char)x;
    }
}

static inline int write_full(int fd, const void *p, size_t len)
{
    const char *b = p;
    while (len) {
        ssize_t n = write(fd, b, len);
        if (n <= 0)
            return -1;
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

static inline int read_full(int fd, void *p, size_t len)
{
    char *b = p;
    while (len) {
        ssize_t n = read(fd, b, len);
        if (n <= 0)
            return -1;
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

#endif
