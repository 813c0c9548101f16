/* calibrate_tcp.c: the tcp class of `wsync calibrate`: a tiny peer (--serve)
 * that echoes one-byte pings and swallows bulk transfers, and the client that
 * times them. Wire: 'p' -> 'p'; 'b' + 8-byte little-endian length + bytes ->
 * 'k' once all arrived. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/calibrate.h"
#include "common/base/le.h"
#include "common/net/sock.h"
#include "common/base/status.h"
#include "common/base/util.h"

#define SCRATCH (4u << 20)
#define PINGS 200

static void serve_conn(int fd)
{
    char *buf = malloc(SCRATCH);
    unsigned char op;
    while (buf != NULL && wsync_recv_all(fd, &op, 1, 0) == 0) {
        if (op == 'p') {
            if (wsync_send_all(fd, &op, 1) != 0)
                break;
        } else if (op == 'b') {
            unsigned char lenb[8];
            uint64_t left;
            if (wsync_recv_all(fd, lenb, 8, 0) != 0)
                break;
            left = wsync_get64(lenb);
            while (left > 0) {
                size_t n = left < SCRATCH ? (size_t)left : SCRATCH;
                if (wsync_recv_all(fd, buf, n, 0) != 0)
                    goto out;
                left -= n;
            }
            op = 'k';
            if (wsync_send_all(fd, &op, 1) != 0)
                break;
        } else {
            break;
        }
    }
out:
    free(buf);
    close(fd);
}

static void *serve_loop(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            break;
        serve_conn(fd);
    }
    return NULL;
}

int calib_serve(const char *hostport)
{
    char host[256];
    int port = 0, lfd = -1, got = 0;
    wsync_status_t s = wsync_split_hostport(hostport, host, sizeof(host), &port);
    if (s == WSYNC_OK)
        s = wsync_tcp_listen(host, port, &lfd, &got);
    if (s != WSYNC_OK) {
        fprintf(stderr, "wsync calibrate: --serve %s: %s\n", hostport, wsync_last_error());
        return 2;
    }
    printf("wsync calibrate: serving tcp calibration on %s:%d (until killed)\n", host, got);
    fflush(stdout);
    serve_loop((void *)(intptr_t)lfd);
    close(lfd);
    return 1;
}

wsync_status_t calib_tcp(calib_t *cb, const char *hostport)
{
    char *buf = NULL, note[CALIB_NOTE_LEN];
    double rates[64], rtt[PINGS];
    int fd = -1, i, lfd = -1, port = 0;
    pthread_t th;
    int local = hostport == NULL;
    char addr[64];
    wsync_status_t s = WSYNC_OK;
    unsigned char op;

    if (local) { /* loopback: the peer is a thread of this process */
        s = wsync_tcp_listen("127.0.0.1", 0, &lfd, &port);
        if (s != WSYNC_OK)
            return s;
        if (pthread_create(&th, NULL, serve_loop, (void *)(intptr_t)lfd) != 0) {
            close(lfd);
            return wsync_error(WSYNC_ERR_IO, "calibrate: cannot start the loopback peer thread");
        }
        pthread_detach(th);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        hostport = addr;
    }
    buf = malloc(cb->bytes);
    if (buf == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "calibrate: out of memory");
    memset(buf, 0x5a, cb->bytes);
    s = wsync_tcp_connect(hostport, 10000, &fd);
    for (i = 0; s == WSYNC_OK && i < PINGS; i++) {
        uint64_t t0 = wsync_now_ns();
        op = 'p';
        if (wsync_send_all(fd, &op, 1) != 0 || wsync_recv_all(fd, &op, 1, t0 + 10000000000ull) != 0)
            s = wsync_error(WSYNC_ERR_PEER, "calibrate: tcp peer %s stopped answering pings", hostport);
        rtt[i] = (wsync_now_ns() - t0) / 1e9;
    }
    for (i = 0; s == WSYNC_OK && i < cb->reps; i++) {
        unsigned char hdr[9];
        uint64_t t0 = wsync_now_ns();
        hdr[0] = 'b';
        wsync_put64(hdr + 1, cb->bytes);
        if (wsync_send_all(fd, hdr, 9) != 0 || wsync_send_all(fd, buf, cb->bytes) != 0 ||
            wsync_recv_all(fd, &op, 1, t0 + 60000000000ull) != 0 || op != 'k')
            s = wsync_error(WSYNC_ERR_PEER, "calibrate: tcp peer %s stopped during a bulk transfer", hostport);
        rates[i] = cb->bytes / ((wsync_now_ns() - t0) / 1e9);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    if (s != WSYNC_OK)
        return s;
    snprintf(note, sizeof(note), "%s, one connection; alpha: half the median of %d one-byte round trips",
             local ? "loopback" : hostport, PINGS);
    calib_set(cb, cb->tcp_class, rates, cb->reps, calib_median(rtt, PINGS) / 2, note);
    return WSYNC_OK;
}
