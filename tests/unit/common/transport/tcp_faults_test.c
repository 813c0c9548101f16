/* tcp_faults_test.c: the tcp transport's faults over loopback: garbage,
 * lying headers and truncated streams end only their own connection with an
 * ERROR naming the peer; a sender that dies, a receiver that goes away, a
 * disconnect or a close with puts in flight is safe and accounts for each
 * put. */
#include "tests/unit/common/transport/tcp_rig.h"

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

/* A receiver that completes the data-plane handshake of up to 16
 * connections, then never reads from them. */
typedef struct stalled {
    int lfd, stop, fds[16], n;
    pthread_t th;
} stalled_t;

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

int main(void)
{
    unsetenv("WSYNC_TCP_CONNS");
    unsetenv("WSYNC_TCP_PORT");
    RUN(garbage_on_the_port_is_an_error_and_the_receiver_keeps_working);
    RUN(headers_outside_a_region_are_refused_without_writing);
    RUN(a_sender_that_dies_mid_put_is_an_error_naming_it);
    RUN(disconnect_mid_stream_accounts_for_every_put);
    RUN(a_receiver_that_goes_away_fails_each_put);
    RUN(close_while_puts_are_in_flight_is_safe);
    TEST_EXIT();
}
