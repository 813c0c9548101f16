/* tcp_rig.h: what the tcp transport's tests share (tcp_test.c,
 * tcp_faults_test.c): a receiver with two regions and a sender on loopback,
 * raw sockets that speak the wire by hand, and waits with a bound. */
#ifndef WSYNC_TESTS_TCP_RIG_H
#define WSYNC_TESTS_TCP_RIG_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <linux/tcp.h> /* tcp_info with tcpi_bytes_acked */
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/proto/msg.h"
#include "common/base/settings.h"
#include "common/transport/tcp_wire.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "tests/test.h"

#define T (&wsync_transport_tcp)
#define REG_A (6u << 20)
#define REG_B (5u << 20)
#define SRC_LEN (8u << 20)
#define WAIT_MS 20000

typedef struct rig {
    wsync_transport_t *rx, *tx;
    wsync_region_t *ra, *rb, *src;
    wsync_blob_t key_a, key_b, key_src, addr;
    unsigned char *a, *b, *s;
    wsync_conn_t *conn;
} rig_t;

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static inline uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static inline wsync_transport_config_t cfg(void)
{
    return (
        wsync_transport_config_t){.bind_host = "127.0.0.1", .conns_per_peer = 4, .device = -1, .timeout_ms = 5000};
}

/* Receiver with two regions listening; sender with a patterned source,
 * connected as sender id 7 unless connect == 0. */
static inline int rig_up(rig_t *r, int connect)
{
    wsync_transport_config_t c = cfg();
    memset(r, 0, sizeof(*r));
    if (wsync_mem_host.alloc(REG_A, (void **)&r->a) || wsync_mem_host.alloc(REG_B, (void **)&r->b) ||
        wsync_mem_host.alloc(SRC_LEN, (void **)&r->s))
        return -1;
    memset(r->a, 0xAA, REG_A);
    memset(r->b, 0xBB, REG_B);
    wsync_fill_pattern(r->s, SRC_LEN, 0, 99);
    if (T->open(&c, &r->rx) || T->reg(r->rx, r->a, REG_A, WSYNC_MEM_HOST, &r->ra, &r->key_a) ||
        T->reg(r->rx, r->b, REG_B, WSYNC_MEM_HOST, &r->rb, &r->key_b) || T->listen(r->rx, &r->addr))
        return -1;
    if (T->open(&c, &r->tx) || T->reg(r->tx, r->s, SRC_LEN, WSYNC_MEM_HOST, &r->src, &r->key_src))
        return -1;
    if (connect && T->connect(r->tx, &r->addr, 7, &r->conn))
        return -1;
    return 0;
}

static inline void rig_down(rig_t *r)
{
    if (r->conn)
        T->disconnect(r->conn);
    T->close(r->tx);
    T->close(r->rx);
    wsync_mem_host.free(r->a);
    wsync_mem_host.free(r->b);
    wsync_mem_host.free(r->s);
}

static inline int addr_port(const wsync_blob_t *addr)
{
    tcp_addr_t a;
    const char *colon;
    tcp_addr_decode(addr->data, &a);
    colon = strrchr(a.hostport, ':');
    return colon ? atoi(colon + 1) : -1;
}

/* Waits for the next completion of `kind` (others are counted in *other). */
static inline int wait_for(wsync_transport_t *t, wsync_completion_kind_t kind, wsync_completion_t *out)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)WAIT_MS * 1000000ULL;
    while (wsync_now_ns() < deadline) {
        int n = 0;
        if (T->poll(t, out, 1, &n, 100) != WSYNC_OK)
            return -1;
        if (n == 1 && out->kind == kind)
            return 0;
        if (n == 1)
            fprintf(stderr, "  (skipping completion kind %d: %s)\n", out->kind, out->message);
    }
    return -1;
}

static inline int raw_connect(const wsync_blob_t *addr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)addr_port(addr))};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A raw connection that has said a valid hello as sender `sender`. */
static inline int raw_sender(const wsync_blob_t *addr, int sender)
{
    tcp_addr_t a;
    unsigned char hb[TCP_HELLO_LEN];
    tcp_hello_t h;
    int fd = raw_connect(addr);
    tcp_addr_decode(addr->data, &a);
    h = (tcp_hello_t){.magic = TCP_MAGIC, .version = TCP_VERSION, .sender = sender, .nonce = a.nonce};
    tcp_hello_encode(&h, hb);
    /* The hello rides in the data-plane handshake (no token here). */
    if (fd >= 0 && wsync_hs_connect(fd, NULL, WSYNC_HS_TCP, "test receiver", hb, sizeof(hb), 5000, NULL, 0, NULL)) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline uint32_t key_region(const wsync_blob_t *key)
{
    tcp_key_t k;
    tcp_key_decode(key->data, &k);
    return k.region;
}

static inline void raw_put_header(int fd, int sender, uint32_t region, uint64_t off, uint64_t len, uint64_t tag)
{
    unsigned char b[TCP_HDR_LEN];
    tcp_hdr_t h = {.magic = TCP_MAGIC,
                   .version = TCP_VERSION,
                   .sender = sender,
                   .region = region,
                   .dst_off = off,
                   .len = len,
                   .tag = tag};
    tcp_hdr_encode(&h, b);
    (void)!send(fd, b, sizeof(b), MSG_NOSIGNAL);
}

/* Sockets of this process connected to `port` that carried more than a hello. */
static inline int busy_connections_to(int port)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int busy = 0;
    while (d && (e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        struct sockaddr_in peer;
        socklen_t pl = sizeof(peer);
        struct tcp_info ti;
        socklen_t tl = sizeof(ti);
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || peer.sin_family != AF_INET ||
            ntohs(peer.sin_port) != port)
            continue;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && ti.tcpi_bytes_acked > 4096)
            busy++;
    }
    if (d)
        closedir(d);
    return busy;
}

typedef struct put {
    int region; /* 0: a, 1: b */
    size_t off, len, src_off;
    uint64_t tag;
    int landed, sent;
} put_t;

#endif
