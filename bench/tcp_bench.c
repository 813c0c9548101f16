/* tcp_bench.c: what the tcp transport gets out of loopback, against the
 * ceiling measured in the same run: (a) one raw TCP connection, one thread
 * writing big chunks and one reading them into a destination buffer; (b) the
 * transport moving the same region as 64 MiB puts over 1 and 4 connections.
 * Usage: tcp_bench [bytes, default 1G] [repeats, default 3]; best of repeats. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/proto/msg.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "bench/raw_tcp.h"

#define PUT_LEN (64ull << 20)

/* Seconds for the transport to land `len` bytes as 64 MiB puts, or -1. */
static double transport_once(char *src, char *dst, size_t len, int conns)
{
    const wsync_transport_ops_t *T = &wsync_transport_tcp;
    wsync_transport_config_t cfg = {.bind_host = "127.0.0.1",
                                    .conns_per_peer = conns,
                                    .device = -1,
                                    .timeout_ms = 5000};
    wsync_transport_t *rx = NULL, *tx = NULL;
    wsync_region_t *rs = NULL, *rd = NULL;
    wsync_blob_t key, skey, addr;
    wsync_conn_t *c = NULL;
    size_t nputs = (len + PUT_LEN - 1) / PUT_LEN, landed = 0, sent = 0, i;
    double t0, t1 = -1;
    if (T->open(&cfg, &rx) || T->reg(rx, dst, len, WSYNC_MEM_HOST, &rd, &key) || T->listen(rx, &addr) ||
        T->open(&cfg, &tx) || T->reg(tx, src, len, WSYNC_MEM_HOST, &rs, &skey) || T->connect(tx, &addr, 0, &c)) {
        fprintf(stderr, "transport set-up: %s\n", wsync_last_error());
        goto out;
    }
    t0 = wsync_now_s();
    for (i = 0; i < nputs; i++) {
        size_t off = i * PUT_LEN, n = len - off < PUT_LEN ? len - off : PUT_LEN;
        if (T->put(c, rs, off, &key, off, n, i) != WSYNC_OK) {
            fprintf(stderr, "put: %s\n", wsync_last_error());
            goto out;
        }
    }
    while (landed < nputs || sent < nputs) {
        wsync_completion_t cp[32];
        int n = 0, k;
        T->poll(rx, cp, 32, &n, 1);
        for (k = 0; k < n; k++) {
            if (cp[k].kind == WSYNC_COMPLETION_ERROR) {
                fprintf(stderr, "error: %s\n", cp[k].message);
                goto out;
            }
            landed++;
        }
        T->poll(tx, cp, 32, &n, 0);
        for (k = 0; k < n; k++) {
            if (cp[k].kind == WSYNC_COMPLETION_ERROR) {
                fprintf(stderr, "error: %s\n", cp[k].message);
                goto out;
            }
            sent++;
        }
    }
    t1 = wsync_now_s() - t0;
out:
    if (c)
        T->disconnect(c);
    T->close(tx);
    T->close(rx);
    return t1;
}

int main(int argc, char **argv)
{
    uint64_t len = 1ull << 30;
    int reps = argc > 2 ? atoi(argv[2]) : 3, r;
    char *src = NULL, *dst = NULL;
    double raw = 1e30, t1c = 1e30, t4c = 1e30;
    if (argc > 1 && wsync_parse_size(argv[1], "the byte count", &len) != WSYNC_OK) {
        fprintf(stderr, "tcp_bench: %s\n", wsync_last_error());
        return 2;
    }
    if (wsync_mem_host.alloc(len, (void **)&src) || wsync_mem_host.alloc(len, (void **)&dst)) {
        fprintf(stderr, "tcp_bench: %s\n", wsync_last_error());
        return 1;
    }
    /* Touch every page first so no run pays page faults the others do not. */
    wsync_fill_pattern(src, len, 0, 1);
    memset(dst, 0, len);
    for (r = 0; r < reps; r++) {
        double a = raw_tcp_once(src, dst, len), b = transport_once(src, dst, len, 1),
               c = transport_once(src, dst, len, 4);
        if (a < 0 || b < 0 || c < 0) {
            fprintf(stderr, "tcp_bench: a run failed\n");
            return 1;
        }
        raw = a < raw ? a : raw;
        t1c = b < t1c ? b : t1c;
        t4c = c < t4c ? c : t4c;
    }
    if (memcmp(src, dst, len) != 0) {
        fprintf(stderr, "tcp_bench: destination differs from source\n");
        return 1;
    }
    printf("bytes %llu, put %llu MiB, best of %d\n", (unsigned long long)len, PUT_LEN >> 20, reps);
    printf("raw tcp, 1 connection (ceiling): %6.2f GB/s\n", len / raw / 1e9);
    printf("wsync tcp, 1 connection:         %6.2f GB/s  ratio %.2f\n", len / t1c / 1e9, raw / t1c);
    printf("wsync tcp, 4 connections:        %6.2f GB/s  ratio %.2f\n", len / t4c / 1e9, raw / t4c);
    wsync_mem_host.free(src);
    wsync_mem_host.free(dst);
    return 0;
}
