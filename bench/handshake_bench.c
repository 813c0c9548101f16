/* handshake_bench.c: what the data-plane handshake costs, with and without
 * a token, over loopback TCP: a fresh connection and one handshake carrying
 * a pull-request-sized payload, N times (the median and the 90th
 * percentile), and the two HMACs alone over that payload. A version costs
 * one pull request per (engine rank, trainer rank) pair; transport
 * connections are opened once and reused, so this is the whole per-version
 * price of authentication.
 * Usage: handshake_bench [rounds, default 2000] [payload bytes, default 600] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/net/auth.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/util.h"

typedef struct server {
    int lfd, rounds;
    const wsync_auth_t *auth;
    size_t max;
} server_t;

static void *server_main(void *arg)
{
    server_t *s = arg;
    int i;
    for (i = 0; i < s->rounds; i++) {
        unsigned char *payload = NULL;
        size_t len = 0;
        wsync_hs_t hs;
        int fd = accept(s->lfd, NULL, NULL);
        if (wsync_hs_serve(&hs, fd, s->auth, WSYNC_HS_PULL, "bench", s->max, 5000, &payload, &len) == WSYNC_OK)
            wsync_hs_accept(&hs, NULL, 0);
        free(payload);
        close(fd);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median and p90 of `rounds` connect + handshake, in microseconds. */
static int measure(const wsync_auth_t *auth, int rounds, const char *payload, size_t len, double *med, double *p90)
{
    server_t s = {.rounds = rounds, .auth = auth, .max = len};
    uint64_t *t = calloc((size_t)rounds, sizeof(*t));
    pthread_t th;
    char hp[32];
    int port = 0, i, bad = 0;
    if (t == NULL || wsync_tcp_listen("127.0.0.1", 0, &s.lfd, &port) != WSYNC_OK)
        return -1;
    snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
    pthread_create(&th, NULL, server_main, &s);
    for (i = 0; i < rounds; i++) {
        uint64_t t0 = wsync_now_ns();
        int fd = -1;
        if (wsync_tcp_connect(hp, 5000, &fd) != WSYNC_OK ||
            wsync_hs_connect(fd, auth, WSYNC_HS_PULL, hp, payload, len, 5000, NULL, 0, NULL) != WSYNC_OK)
            bad++;
        t[i] = wsync_now_ns() - t0;
        if (fd >= 0)
            close(fd);
    }
    pthread_join(th, NULL);
    close(s.lfd);
    qsort(t, (size_t)rounds, sizeof(*t), cmp_u64);
    *med = (double)t[rounds / 2] / 1e3;
    *p90 = (double)t[rounds * 9 / 10] / 1e3;
    free(t);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    size_t len = argc > 2 ? (size_t)atol(argv[2]) : 600;
    char *payload = malloc(len + 1);
    unsigned char ch[WSYNC_HS_CHALLENGE_LEN] = {0}, hello[WSYNC_HS_HELLO_LEN] = {0}, key[32], mac[32];
    wsync_auth_t none, token;
    double med0, p900, med1, p901;
    uint64_t t0;
    int i;

    if (rounds < 10 || payload == NULL) {
        fprintf(stderr, "usage: handshake_bench [rounds >= 10] [payload bytes]\n");
        return 2;
    }
    memset(payload, 'x', len);
    payload[len] = '\0';
    wsync_auth_init(&none, "");
    wsync_auth_init(&token, "bench-token");
    /* Warm-up, then alternate so drift hits both alike. */
    measure(&none, 100, payload, len, &med0, &p900);
    if (measure(&none, rounds, payload, len, &med0, &p900) != 0 ||
        measure(&token, rounds, payload, len, &med1, &p901) != 0) {
        fprintf(stderr, "handshake_bench: a handshake failed: %s\n", wsync_last_error());
        return 1;
    }
    wsync_hs_key(&token, WSYNC_HS_PULL, key);
    t0 = wsync_now_ns();
    for (i = 0; i < 10000; i++) {
        wsync_hs_client_proof(key, ch, hello, payload, len, mac);
        hello[20] ^= mac[0];
    }
    printf("handshake over loopback, new connection each, %zu-byte payload, %d rounds:\n", len, rounds);
    printf("  no token:   median %7.1f us  p90 %7.1f us\n", med0, p900);
    printf("  with token: median %7.1f us  p90 %7.1f us  (difference of medians %+.1f us)\n", med1, p901,
           med1 - med0);
    printf("  one HMAC-SHA256 proof over the payload: %.2f us (a handshake computes 2 per side)\n",
           (double)(wsync_now_ns() - t0) / 1e3 / 10000);
    free(payload);
    return 0;
}
