/* raw_tcp.h: the loopback ceiling the tcp benchmarks compare with: one raw
 * TCP connection, one thread writing big chunks, the caller reading them into
 * a destination buffer, with the tcp transport's socket buffer sizes. */
#ifndef WSYNC_BENCH_RAW_TCP_H
#define WSYNC_BENCH_RAW_TCP_H

#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto/msg.h"
#include "common/base/util.h"

#define RAW_TCP_WRITE (4u << 20)
#define RAW_TCP_SOCKBUF (8 << 20) /* the transport's own setting, for a fair ceiling */

typedef struct raw_tcp_job {
    int fd;
    const char *src;
    size_t len;
} raw_tcp_job_t;

static inline void raw_tcp_tune(int fd)
{
    int sz = RAW_TCP_SOCKBUF;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

static inline void *raw_tcp_writer(void *arg)
{
    raw_tcp_job_t *j = arg;
    size_t done = 0;
    while (done < j->len) {
        size_t n = j->len - done < RAW_TCP_WRITE ? j->len - done : RAW_TCP_WRITE;
        ssize_t w = send(j->fd, j->src + done, n, MSG_NOSIGNAL);
        if (w <= 0) {
            perror("raw send");
            break;
        }
        done += (size_t)w;
    }
    return NULL;
}

/* Seconds to move `len` bytes over one loopback connection, or -1. */
static inline double raw_tcp_once(const char *src, char *dst, size_t len)
{
    int lfd = -1, port = 0, cfd = -1, afd = -1;
    pthread_t th;
    raw_tcp_job_t job;
    size_t got = 0;
    double t0, t1;
    char hp[64];
    if (wsync_tcp_listen("127.0.0.1", 0, &lfd, &port) != WSYNC_OK)
        return -1;
    snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
    if (wsync_tcp_connect(hp, 5000, &cfd) != WSYNC_OK || (afd = accept(lfd, NULL, NULL)) < 0)
        return -1;
    raw_tcp_tune(cfd);
    raw_tcp_tune(afd);
    job = (raw_tcp_job_t){cfd, src, len};
    t0 = wsync_now_s();
    pthread_create(&th, NULL, raw_tcp_writer, &job);
    while (got < len) {
        ssize_t n = recv(afd, dst + got, len - got, MSG_WAITALL);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    t1 = wsync_now_s();
    pthread_join(th, NULL);
    close(afd);
    close(cfd);
    close(lfd);
    return got == len ? t1 - t0 : -1;
}

#endif
