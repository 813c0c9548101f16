/* tcp_test.c: the tcp transport over loopback in one process: many puts land
 * byte-exact over every connection; addresses and keys are checked by the
 * sender; a redirected region: a put crossing two spans lands each span's
 * bytes in its own memory and the rest in the region (which keeps its old
 * bytes where a span took them); spans out of order or outside are refused;
 * cleared, bytes land in the region again. The faults (garbage, lying
 * headers, truncated streams, disconnects) are in tcp_faults_test.c. */
#include "tests/unit/common/transport/tcp_rig.h"

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
    CHECK_FAILS(T->redirect(r.rb, bad, 2, &r.key_b), WSYNC_ERR_INVALID, "out of order");
    CHECK_FAILS(T->redirect(r.rb, &outside, 1, &r.key_b), WSYNC_ERR_INVALID, "outside the region");
    CHECK_OK(T->redirect(r.rb, spans, 2, &r.key_b));
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
    CHECK_OK(T->redirect(r.rb, NULL, 0, &r.key_b));
    CHECK_OK(T->put(r.conn, r.src, 0, &r.key_b, 11000, 100, 42));
    CHECK_EQ(wait_for(r.rx, WSYNC_COMPLETION_LANDED, &c), 0);
    CHECK(memcmp(r.b + 11000, r.s, 100) == 0 && x[0] == r.s[500 + 1000]);
    rig_down(&r);
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
    RUN(the_registry_picks_by_name_and_lists_the_valid_ones);
    RUN(a_bad_port_variable_is_refused_clearly);
    TEST_EXIT();
}
