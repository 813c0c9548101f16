/* tcp_test.c: the tcp transport over loopback in one process: many puts land
 * byte-exact over every connection; garbage, lying headers and truncated
 * streams end only their own connection with an ERROR naming the peer; a
 * disconnect or close with puts in flight is safe and accounts for each put.
 * A redirected region: a put crossing two spans lands each span's bytes in
 * its own memory and the rest in the region (which keeps its old bytes
 * where a span took them); spans out of order or outside are refused;
 * cleared, bytes land in the region again. */
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
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static wsync_transport_config_t cfg(void)
{
    return (
        wsync_transport_config_t){.bind_host = "127.0.0.1", .conns_per_peer = 4, .device = -1, .timeout_ms = 5000};
}

/* Receiver with two regions listening; sender with a patterned source,
 * connected as sender id 7 unless connect == 0. */
static int rig_up(rig_t *r, int connect)
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

static void rig_down(rig_t *r)
{
    if (r->conn)
        T->disconnect(r->conn);
    T->close(r->tx);
    T->close(r->rx);
    wsync_mem_host.free(r->a);
    wsync_mem_host.free(r->b);
    wsync_mem_host.free(r->s);
}

static int addr_port(const wsync_blob_t *addr)
{
    tcp_addr_t a;
    const char *colon;
    tcp_addr_decode(addr->data, &a);
    colon = strrchr(a.hostport, ':');
    return colon ? atoi(colon + 1) : -1;
}

/* Waits for the next completion of `kind` (others are counted in *other). */
static int wait_for(wsync_transport_t *t, wsync_completion_kind_t kind, wsync_completion_t *out)
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

static int raw_connect(const wsync_blob_t *addr)
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
static int raw_sender(const wsync_blob_t *addr, int sender)
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

static uint32_t key_region(const wsync_blob_t *key)
{
    tcp_key_t k;
    tcp_key_decode(key->data, &k);
    return k.region;
}

static void raw_put_header(int fd, int sender, uint32_t region, uint64_t off, uint64_t len, uint64_t tag)
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
static int busy_connections_to(int port)
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

static void many_random_puts_land_byte_exact_over_four_connections(void)
{
    enum { MAXP = 600 };
    static put_t p[MAXP];
    rig_t r;
    int np = 0, i, landed = 0, sent = 0;
    uint64_t deadline;
    if (rig_up(&r, 1) != 0) {
        CHECK(!"rig up");
        rig_down(&r);
        return;
    }
    /* Disjoint pieces at random offsets (random gaps), random sizes 1 B..256 KiB,
     * so the final bytes do not depend on arrival order. */
    for (int reg = 0; reg < 2; reg++) {
        size_t cap = reg ? REG_B : REG_A, off = rnd() % 64;
        for (;;) {
            size_t len = 1 + rnd() % (256 << 10);
            if (np == MAXP || off + len > cap)
                break;
            p[np] = (put_t){.region = reg,
                            .off = off,
                            .len = len,
                            .src_off = rnd() % (SRC_LEN - len),
                            .tag = ((uint64_t)reg << 40) | (uint64_t)np * 7919u};
            np++;
            off += len + rnd() % 4096;
        }
    }
    for (i = 0; i < np; i++)
        CHECK_OK(
            T->put(r.conn, r.src, p[i].src_off, p[i].region ? &r.key_b : &r.key_a, p[i].off, p[i].len, p[i].tag));
    deadline = wsync_now_ns() + (uint64_t)WAIT_MS * 1000000ULL;
    while ((landed < np || sent < np) && wsync_now_ns() < deadline) {
        wsync_completion_t c[64];
        int n = 0;
        for (int side = 0; side < 2; side++) {
            CHECK_OK(T->poll(side ? r.tx : r.rx, c, 64, &n, 10));
            for (int k = 0; k < n; k++) {
                for (i = 0; i < np && p[i].tag != c[k].tag; i++)
                    ;
                CHECK(i < np);
                if (i == np)
                    continue;
                if (c[k].kind == WSYNC_COMPLETION_LANDED) {
                    CHECK(side == 0);
                    CHECK_EQ(c[k].len, p[i].len);
                    CHECK_EQ(c[k].peer, 7);
                    CHECK_EQ(p[i].landed, 0);
                    p[i].landed = 1;
                    landed++;
                } else if (c[k].kind == WSYNC_COMPLETION_SENT) {
                    CHECK(side == 1);
                    CHECK_EQ(c[k].len, p[i].len);
                    CHECK_EQ(p[i].sent, 0);
                    p[i].sent = 1;
                    sent++;
                } else {
                    fprintf(stderr, "  unexpected completion: %s\n", c[k].message);
                    CHECK(!"error completion");
                }
            }
        }
    }
    CHECK_EQ(landed, np);
    CHECK_EQ(sent, np);
    CHECK(np > 40);
    for (i = 0; i < np; i++) {
        unsigned char *dst = (p[i].region ? r.b : r.a) + p[i].off;
        if (memcmp(dst, r.s + p[i].src_off, p[i].len) != 0) {
            fprintf(stderr, "  put %d (%zu bytes at %zu) landed wrong bytes\n", i, p[i].len, p[i].off);
            CHECK(!"bytes");
            break;
        }
    }
    /* Bytes between pieces were never written. */
    CHECK(r.a[0] == 0xAA || p[0].off == 0);
    CHECK(r.b[REG_B - 1] == 0xBB);
    CHECK_EQ(busy_connections_to(addr_port(&r.addr)), 4);
    rig_down(&r);
}

static void addresses_and_keys_are_checked_by_the_sender(void)
{
    rig_t r, other;
    wsync_blob_t bad;
    wsync_conn_t *c = NULL;
    if (rig_up(&r, 1) != 0 || rig_up(&other, 0) != 0) {
        CHECK(!"rig up");
        return;
    }
    CHECK_FAILS(T->put(r.conn, r.src, 0, &r.key_a, REG_A - 10, 11, 1), WSYNC_ERR_INVALID, "outside");
    CHECK_FAILS(T->put(r.conn, r.src, SRC_LEN - 5, &r.key_a, 0, 6, 1), WSYNC_ERR_INVALID, "source");
    /* A key of another receiver instance must not be usable on this conn. */
    CHECK_FAILS(T->put(r.conn, r.src, 0, &other.key_a, 0, 16, 1), WSYNC_ERR_INVALID, "another receiver");
    bad = r.addr;
    bad.data[0] ^= 0xFF;
    CHECK_FAILS(T->connect(r.tx, &bad, 1, &c), WSYNC_ERR_FORMAT, "magic");
    bad.len = 7;
    CHECK_FAILS(T->connect(r.tx, &bad, 1, &c), WSYNC_ERR_FORMAT, "not a tcp address");
    bad = r.key_a;
    bad.len = 3;
    CHECK_FAILS(T->put(r.conn, r.src, 0, &bad, 0, 16, 1), WSYNC_ERR_FORMAT, "region key");
    rig_down(&other);
    rig_down(&r);
}

/* One put through the rig's sender, which must land. */
static void check_still_works(rig_t *r, uint64_t tag)
{
    wsync_completion_t c;
    if (r->conn == NULL)
        CHECK_OK(T->connect(r->tx, &r->addr, 7, &r->conn));
    CHECK_OK(T->put(r->conn, r->src, 100, &r->key_b, 4096, 5000, tag));
    CHECK_EQ(wait_for(r->rx, WSYNC_COMPLETION_LANDED, &c), 0);
    CHECK_EQ(c.tag, tag);
    CHECK(memcmp(r->b + 4096, r->s + 100, 5000) == 0);
}

static void redirected_bytes_land_in_their_spans(void)
{
    rig_t r;
    wsync_completion_t c;
    unsigned char x[3000], y[5000];
    const wsync_redirect_t spans[2] = {{.off = 11000, .len = sizeof(x), .ptr = x},
                                       {.off = 20000, .len = sizeof(y), .ptr = y}};
    const wsync_redirect_t bad[2] = {{.off = 20000, .len = 10, .ptr = y}, {.off = 11000, .len = 10, .ptr = x}};
    const wsync_redirect_t outside = {.off = REG_B - 10, .len = 20, .ptr = y};
    if (rig_up(&r, 1) != 0) {
        CHECK(!"set-up");
        rig_down(&r);
        return;
    }
    memset(x, 0x11, sizeof(x));
    memset(y, 0x22, sizeof(y));
    CHECK_FAILS(T->redirect(r.rb, bad, 2), WSYNC_ERR_INVALID, "out of order");
    CHECK_FAILS(T->redirect(r.rb, &outside, 1), WSYNC_ERR_INVALID, "outside the region");
    CHECK_OK(T->redirect(r.rb, spans, 2));
    /* region bytes [10000, 30000) from source offset 500 */
    CHECK_OK(T->put(r.conn, r.src, 500, &r.key_b, 10000, 20000, 41));
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_LANDED, &c), 0);
    CHECK_EQ(c.tag, 41);
    CHECK(memcmp(r.b + 10000, r.s + 500, 1000) == 0);         /* before the first span */
    CHECK(memcmp(x, r.s + 500 + 1000, sizeof(x)) == 0);       /* the first span */
    CHECK(memcmp(r.b + 14000, r.s + 500 + 4000, 6000) == 0);  /* between them */
    CHECK(memcmp(y, r.s + 500 + 10000, sizeof(y)) == 0);      /* the second */
    CHECK(memcmp(r.b + 25000, r.s + 500 + 15000, 5000) == 0); /* after */
    CHECK(r.b[11000] == 0xBB && r.b[11000 + sizeof(x) - 1] == 0xBB && r.b[20000] == 0xBB); /* untouched */
    CHECK_OK(T->redirect(r.rb, NULL, 0));
    CHECK_OK(T->put(r.conn, r.src, 0, &r.key_b, 11000, 100, 42));
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_LANDED, &c), 0);
    CHECK(memcmp(r.b + 11000, r.s, 100) == 0 && x[0] == r.s[500 + 1000]);
    rig_down(&r);
}

static void garbage_on_the_port_is_an_error_and_the_receiver_keeps_working(void)
{
    rig_t r;
    wsync_completion_t c;
    char junk[200];
    int fd;
    if (rig_up(&r, 0) != 0) {
        CHECK(!"rig up");
        return;
    }
    memset(junk, 'G', sizeof(junk));
    fd = raw_connect(&r.addr);
    CHECK(fd >= 0);
    CHECK(send(fd, junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk));
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_ERROR, &c), 0);
    CHECK(strstr(c.message, "127.0.0.1:") != NULL);
    CHECK(strstr(c.message, "garbage") != NULL);
    CHECK_EQ(c.peer, -1);
    /* The receiver closed that connection (after its challenge and a
     * refusal): reading to the end sees EOF (or a reset). */
    {
        struct timeval tv = {.tv_sec = 10};
        ssize_t n;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while ((n = recv(fd, junk, sizeof(junk), 0)) > 0)
            ;
        CHECK(n == 0 || errno == ECONNRESET);
    }
    close(fd);
    /* A probe that connects and leaves says nothing either. */
    fd = raw_connect(&r.addr);
    close(fd);
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_ERROR, &c), 0);
    CHECK(strstr(c.message, "before its hello") != NULL);
    check_still_works(&r, 0xC0FFEE);
    rig_down(&r);
}

static void headers_outside_a_region_are_refused_without_writing(void)
{
    struct {
        uint32_t region;
        uint64_t off, len;
        const char *why;
    } bad[] = {
        {0, REG_A - 10, 100, "outside"},        /* past the end */
        {0, UINT64_MAX - 5, 10, "outside"},     /* offset + len overflows */
        {0, 0, (uint64_t)REG_A + 1, "outside"}, /* longer than the region */
        {9999, 0, 16, "unknown region"},
    };
    rig_t r;
    if (rig_up(&r, 0) != 0) {
        CHECK(!"rig up");
        return;
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        wsync_completion_t c;
        char payload[128];
        int fd = raw_sender(&r.addr, 5);
        CHECK(fd >= 0);
        raw_put_header(fd, 5, bad[i].region ? bad[i].region : key_region(&r.key_a), bad[i].off, bad[i].len, 100 + i);
        memset(payload, 0x11, sizeof(payload));
        (void)!send(fd, payload, sizeof(payload), MSG_NOSIGNAL);
        CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_ERROR, &c), 0);
        CHECK(strstr(c.message, bad[i].why) != NULL);
        CHECK(strstr(c.message, "sender 5 at 127.0.0.1:") != NULL);
        CHECK_EQ(c.peer, 5);
        close(fd);
    }
    /* A header that lies about who sends is refused too. */
    {
        wsync_completion_t c;
        int fd = raw_sender(&r.addr, 5);
        raw_put_header(fd, 6, key_region(&r.key_a), 0, 16, 1);
        CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_ERROR, &c), 0);
        CHECK(strstr(c.message, "names sender 6") != NULL);
        close(fd);
    }
    for (size_t i = 0; i < REG_A; i++)
        if (r.a[i] != 0xAA) {
            CHECK(!"a refused put wrote into the region");
            break;
        }
    check_still_works(&r, 77);
    rig_down(&r);
}

static void a_sender_that_dies_mid_put_is_an_error_naming_it(void)
{
    rig_t r;
    wsync_completion_t c;
    char payload[1000];
    int fd;
    if (rig_up(&r, 0) != 0) {
        CHECK(!"rig up");
        return;
    }
    fd = raw_sender(&r.addr, 3);
    raw_put_header(fd, 3, key_region(&r.key_a), 0, 1 << 20, 42);
    memset(payload, 1, sizeof(payload));
    (void)!send(fd, payload, sizeof(payload), MSG_NOSIGNAL);
    close(fd);
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_ERROR, &c), 0);
    CHECK_EQ(c.tag, 42);
    CHECK_EQ(c.peer, 3);
    CHECK(strstr(c.message, "sender 3 at 127.0.0.1:") != NULL);
    CHECK(strstr(c.message, "middle") != NULL);
    /* Half a header is a broken stream too. */
    fd = raw_sender(&r.addr, 4);
    (void)!send(fd, payload, 10, MSG_NOSIGNAL);
    close(fd);
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_ERROR, &c), 0);
    CHECK(strstr(c.message, "truncated") != NULL);
    check_still_works(&r, 43);
    rig_down(&r);
}

/* A receiver that completes the data-plane handshake of up to 16
 * connections, then never reads from them. */
typedef struct stalled {
    int lfd, stop, fds[16], n;
    pthread_t th;
} stalled_t;

static void *stalled_main(void *arg)
{
    stalled_t *sr = arg;
    while (!__atomic_load_n(&sr->stop, __ATOMIC_ACQUIRE) && sr->n < 16) {
        struct pollfd pfd = {.fd = sr->lfd, .events = POLLIN};
        unsigned char *payload = NULL;
        size_t len = 0;
        wsync_hs_t hs;
        int fd;
        if (poll(&pfd, 1, 50) <= 0 || (fd = accept(sr->lfd, NULL, NULL)) < 0)
            continue;
        if (wsync_hs_serve(&hs, fd, NULL, WSYNC_HS_TCP, "test sender", TCP_HELLO_LEN, 5000, &payload, &len) ==
            WSYNC_OK)
            wsync_hs_accept(&hs, NULL, 0);
        free(payload);
        sr->fds[sr->n++] = fd;
    }
    return NULL;
}

/* Disconnect with many big puts queued to a receiver that never reads
 * (it only completes the handshakes):
 * every put ends in exactly one SENT or ERROR completion, and the ones that
 * never went out are reported cancelled. */
static void disconnect_mid_stream_accounts_for_every_put(void)
{
    enum { N = 256 };
    static int seen[N];
    int nsent = 0, nerr = 0, i, n, lfd = -1, port = 0;
    wsync_transport_config_t conf = cfg();
    wsync_transport_t *tx = NULL;
    wsync_region_t *src = NULL;
    wsync_conn_t *conn = NULL;
    wsync_completion_t c[64];
    wsync_blob_t addr, key, skey;
    tcp_addr_t a = {.magic = TCP_MAGIC, .version = TCP_VERSION, .nonce = 123};
    tcp_key_t k = {.magic = TCP_MAGIC, .version = TCP_VERSION, .region = 1, .nonce = 123, .len = 1ULL << 30};
    unsigned char *buf = malloc(1 << 20);
    stalled_t sr = {.lfd = -1};

    memset(seen, 0, sizeof(seen));
    memset(buf, 7, 1 << 20);
    CHECK_OK(wsync_tcp_listen("127.0.0.1", 0, &lfd, &port));
    sr.lfd = lfd;
    pthread_create(&sr.th, NULL, stalled_main, &sr);
    memset(a.hostport, 0, sizeof(a.hostport));
    snprintf(a.hostport, sizeof(a.hostport), "127.0.0.1:%d", port);
    tcp_addr_encode(&a, addr.data);
    addr.len = TCP_ADDR_LEN;
    tcp_key_encode(&k, key.data);
    key.len = TCP_KEY_LEN;
    CHECK_OK(T->open(&conf, &tx));
    CHECK_OK(T->reg(tx, buf, 1 << 20, WSYNC_MEM_HOST, &src, &skey));
    CHECK_OK(T->connect(tx, &addr, 2, &conn));
    /* 256 MiB: more than four stalled connections' socket buffers can hold. */
    for (i = 0; i < N; i++)
        CHECK_OK(T->put(conn, src, 0, &key, (size_t)i << 20, 1 << 20, (uint64_t)i));
    T->disconnect(conn);
    do {
        CHECK_OK(T->poll(tx, c, 64, &n, 0));
        for (i = 0; i < n; i++) {
            CHECK(c[i].tag < N);
            if (c[i].tag >= N)
                continue;
            seen[c[i].tag]++;
            if (c[i].kind == WSYNC_COMPLETION_SENT) {
                nsent++;
            } else {
                CHECK_EQ(c[i].kind, WSYNC_COMPLETION_ERROR);
                CHECK(strstr(c[i].message, a.hostport) != NULL);
                nerr++;
            }
        }
    } while (n > 0);
    for (i = 0; i < N; i++)
        CHECK_EQ(seen[i], 1);
    CHECK_EQ(nsent + nerr, N);
    CHECK(nerr > 0);
    /* A put on a closed conn is impossible by contract; a new one works. */
    T->close(tx);
    __atomic_store_n(&sr.stop, 1, __ATOMIC_RELEASE);
    pthread_join(sr.th, NULL);
    for (i = 0; i < sr.n; i++)
        close(sr.fds[i]);
    close(lfd);
    free(buf);
}

/* A sender whose connections break under it (the receiver closes) reports
 * an ERROR naming the receiver for each failed put, then refuses new puts. */
static void a_receiver_that_goes_away_fails_each_put(void)
{
    enum { N = 64 };
    rig_t r;
    int got = 0, errs = 0, n;
    wsync_completion_t c[64];
    uint64_t deadline;
    if (rig_up(&r, 1) != 0) {
        CHECK(!"rig up");
        return;
    }
    T->close(r.rx);
    r.rx = NULL;
    deadline = wsync_now_ns() + (uint64_t)WAIT_MS * 1000000ULL;
    /* Puts keep failing until every connection has seen the break. */
    for (int i = 0; i < N && wsync_now_ns() < deadline; i++) {
        wsync_status_t st = T->put(r.conn, r.src, 0, &r.key_a, 0, 1 << 20, (uint64_t)i);
        if (st != WSYNC_OK) {
            CHECK_EQ(st, WSYNC_ERR_PEER);
            CHECK(strstr(wsync_last_error(), "broken") != NULL);
            break;
        }
        got++;
        do {
            CHECK_OK(T->poll(r.tx, c, 64, &n, 0));
            for (int k = 0; k < n; k++)
                if (c[k].kind == WSYNC_COMPLETION_ERROR) {
                    CHECK(strstr(c[k].message, "127.0.0.1:") != NULL);
                    errs++;
                }
        } while (n > 0);
        usleep(2000);
    }
    CHECK(got > 0);
    CHECK(errs > 0);
    rig_down(&r);
}

/* Closing both transports while megabytes are on the wire: no crash, no
 * leak under ASan, no hang. */
static void close_while_puts_are_in_flight_is_safe(void)
{
    for (int round = 0; round < 3; round++) {
        rig_t r;
        if (rig_up(&r, 1) != 0) {
            CHECK(!"rig up");
            return;
        }
        for (int i = 0; i < 64; i++)
            CHECK_OK(T->put(r.conn, r.src, 0, &r.key_a, (size_t)(i % 6) << 20, 1 << 20, (uint64_t)i));
        r.conn = NULL;    /* close must disconnect it itself */
        if (round == 1) { /* receiver first: the senders see broken pipes */
            T->close(r.rx);
            T->close(r.tx);
        } else {
            T->close(r.tx);
            T->close(r.rx);
        }
        r.rx = r.tx = NULL;
        rig_down(&r);
    }
}

static void the_registry_picks_by_name_and_lists_the_valid_ones(void)
{
    wsync_transport_config_t c = cfg();
    const wsync_transport_ops_t *ops = NULL;
    CHECK_OK(wsync_transport_get("tcp", &c, &ops));
    CHECK(ops == &wsync_transport_tcp);
    CHECK_OK(wsync_transport_get("auto", &c, &ops));
    CHECK(ops != NULL && ops->can_use(&c));
    CHECK_FAILS(wsync_transport_get("carrier-pigeon", &c, &ops), WSYNC_ERR_INVALID, "valid: auto, tcp, nccl, verbs");
}

static void a_bad_port_variable_is_refused_clearly(void)
{
    wsync_transport_config_t c = cfg();
    wsync_transport_t *t = NULL;
    wsync_blob_t addr;
    /* Refused when the settings are read (at start), naming the variable. */
    setenv("WSYNC_TCP_PORT", "http", 1);
    CHECK_FAILS(wsync_settings_reload(), WSYNC_ERR_INVALID, "WSYNC_TCP_PORT");
    setenv("WSYNC_TCP_PORT", "70000", 1);
    CHECK_FAILS(wsync_settings_reload(), WSYNC_ERR_INVALID, "0..65535");
    unsetenv("WSYNC_TCP_PORT");
    CHECK_OK(wsync_settings_reload());
    CHECK_OK(T->open(&c, &t));
    CHECK_OK(T->listen(t, &addr));
    T->close(t);
}

int main(void)
{
    unsetenv("WSYNC_TCP_CONNS");
    unsetenv("WSYNC_TCP_PORT");
    RUN(many_random_puts_land_byte_exact_over_four_connections);
    RUN(addresses_and_keys_are_checked_by_the_sender);
    RUN(redirected_bytes_land_in_their_spans);
    RUN(garbage_on_the_port_is_an_error_and_the_receiver_keeps_working);
    RUN(headers_outside_a_region_are_refused_without_writing);
    RUN(a_sender_that_dies_mid_put_is_an_error_naming_it);
    RUN(disconnect_mid_stream_accounts_for_every_put);
    RUN(a_receiver_that_goes_away_fails_each_put);
    RUN(close_while_puts_are_in_flight_is_safe);
    RUN(the_registry_picks_by_name_and_lists_the_valid_ones);
    RUN(a_bad_port_variable_is_refused_clearly);
    TEST_EXIT();
}
