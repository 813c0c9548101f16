/* shm_fanout_bench.c: the intra-node fan-out step on hosts. A child process
 * receives the parent's shm window over a Unix socket (SCM_RIGHTS), maps it,
 * and copies the whole image chunk by chunk (64 MiB) into its own memory with
 * the host backend's copy (wsync_host_copy), as a local rank copies chunks
 * that landed on another rank. The ceiling is a single-thread memcpy of the
 * same size between private buffers, measured in the same run; plain memcpy
 * out of the window is printed too. The map time (which populates the page tables) is printed
 * apart; the first pass is the first fetch after mapping, then the best of
 * the later passes.
 * Usage: shm_fanout_bench [bytes, default 1G] [repeats, default 3]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/host_copy.h"
#include "common/mem/mem.h"
#include "common/base/util.h"
#include "common/net/fdpass.h"
#include "common/window/window.h"

#define CHUNK (64ull << 20)

typedef struct result {
    double map_s;    /* wsync_window_shm.map: populates the mapping */
    double first_s;  /* first pass after mapping */
    double best_s;   /* best of the later passes */
    double memcpy_s; /* best plain memcpy out of the window */
    int ok;
} result_t;

static double copy_chunks(char *dst, const char *src, size_t len, void *(*copy)(void *, const void *, size_t))
{
    double t0 = wsync_now_s();
    for (size_t off = 0; off < len; off += CHUNK)
        copy(dst + off, src + off, len - off < CHUNK ? len - off : CHUNK);
    return wsync_now_s() - t0;
}

static void *wsync_copy(void *dst, const void *src, size_t len)
{
    wsync_host_copy(dst, src, len);
    return dst;
}

static int child_main(int sock, size_t len, int reps)
{
    wsync_blob_t blob;
    result_t res = {0};
    char *mine = NULL, *win = NULL;
    int fd = -1;
    double t0;
    if (wsync_fd_recv(sock, &blob, sizeof(blob), &fd) != WSYNC_OK) {
        fprintf(stderr, "child: %s\n", wsync_last_error());
        return 1;
    }
    if (wsync_mem_host.alloc(len, (void **)&mine) != WSYNC_OK)
        return 1;
    t0 = wsync_now_s();
    if (wsync_window_shm.map(&blob, fd, len, (void **)&win) != WSYNC_OK) {
        fprintf(stderr, "child: %s\n", wsync_last_error());
        return 1;
    }
    res.map_s = wsync_now_s() - t0;
    memset(mine, 0, len); /* the child's own image is resident before timing */
    res.first_s = copy_chunks(mine, win, len, wsync_copy);
    res.best_s = res.memcpy_s = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = copy_chunks(mine, win, len, wsync_copy), m = copy_chunks(mine, win, len, memcpy);
        res.best_s = t < res.best_s ? t : res.best_s;
        res.memcpy_s = m < res.memcpy_s ? m : res.memcpy_s;
    }
    copy_chunks(mine, win, len, wsync_copy); /* the bytes checked are wsync's copy */
    res.ok = memcmp(mine, win, len) == 0;
    if (wsync_fd_send(sock, &res, sizeof(res), -1) != WSYNC_OK)
        return 1;
    wsync_window_shm.unmap(win, len);
    wsync_mem_host.free(mine);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t len = 1ull << 30;
    int reps = argc > 2 ? atoi(argv[2]) : 3, sv[2], status = 0, fd = -1;
    wsync_window_t w = {.fd = -1};
    wsync_blob_t blob;
    result_t res;
    char *a = NULL, *b = NULL;
    double ceil_s = 1e30;
    pid_t pid;

    if (argc > 1 && wsync_parse_size(argv[1], "the byte count", &len) != WSYNC_OK) {
        fprintf(stderr, "shm_fanout_bench: %s\n", wsync_last_error());
        return 2;
    }
    if (wsync_window_shm.alloc(len, &w) != WSYNC_OK || wsync_window_shm.export_blob(&w, &blob) != WSYNC_OK ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        fprintf(stderr, "shm_fanout_bench: %s\n", wsync_last_error());
        return 1;
    }
    wsync_fill_pattern(w.ptr, len, 0, 3);

    /* Ceiling first, with the child not yet running: same size, one thread. */
    if (wsync_mem_host.alloc(len, (void **)&a) != WSYNC_OK || wsync_mem_host.alloc(len, (void **)&b) != WSYNC_OK) {
        fprintf(stderr, "shm_fanout_bench: %s\n", wsync_last_error());
        return 1;
    }
    memcpy(a, w.ptr, len);
    memset(b, 0, len);
    for (int r = 0; r < reps; r++) {
        double t0 = wsync_now_s(), t;
        memcpy(b, a, len);
        t = wsync_now_s() - t0;
        ceil_s = t < ceil_s ? t : ceil_s;
    }
    wsync_mem_host.free(a);
    wsync_mem_host.free(b);

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        _exit(child_main(sv[1], len, reps));
    }
    close(sv[1]);
    if (wsync_fd_send(sv[0], &blob, sizeof(blob), w.fd) != WSYNC_OK ||
        wsync_fd_recv(sv[0], &res, sizeof(res), &fd) != WSYNC_OK) {
        fprintf(stderr, "shm_fanout_bench: %s\n", wsync_last_error());
        return 1;
    }
    waitpid(pid, &status, 0);
    if (!res.ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "shm_fanout_bench: the child's copy differs from the window or it failed\n");
        return 1;
    }
    printf("bytes %llu, chunk %llu MiB, best of %d\n", (unsigned long long)len, CHUNK >> 20, reps);
    printf("memcpy, 1 thread, private buffers (ceiling): %6.2f GB/s\n", len / ceil_s / 1e9);
    printf("child maps the window (populates it):        %6.3f s\n", res.map_s);
    printf("child copy out of shm window, first pass:    %6.2f GB/s  ratio %.2f\n", len / res.first_s / 1e9,
           ceil_s / res.first_s);
    printf("child copy out of shm window, mapped:        %6.2f GB/s  ratio %.2f\n", len / res.best_s / 1e9,
           ceil_s / res.best_s);
    printf("  (plain memcpy out of the window:           %6.2f GB/s  ratio %.2f)\n", len / res.memcpy_s / 1e9,
           ceil_s / res.memcpy_s);
    close(sv[0]);
    wsync_window_shm.free(&w);
    return 0;
}
