/* verbs_transport_test.c: the verbs transport on a real RDMA device (the
 * software RoCE device inside the VM test, tests/verbs/): many puts land
 * byte-exact with their full tags and sender id, registration is cached,
 * bad keys are refused, a vanished receiver turns into ERROR completions
 * naming the piece and peer, and disconnect with puts queued accounts for
 * every put. Without a device each case prints "skipped: no RDMA device",
 * and the auto selection is checked to fall back. */
#include <stdlib.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/base/settings.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "tests/test.h"

#define V (&wsync_transport_verbs)
#define DST_LEN (24u << 20)
#define SRC_LEN (24u << 20)
#define WAIT_MS 60000

static int have_device;

static wsync_transport_config_t cfg(void)
{
    return (wsync_transport_config_t){.bind_host = NULL, .device = -1, .timeout_ms = 10000};
}

typedef struct rig {
    wsync_transport_t *rx, *tx;
    wsync_region_t *dst, *src;
    wsync_blob_t key, skey, addr;
    unsigned char *d, *s;
    wsync_conn_t *conn;
} rig_t;

static int rig_up(rig_t *r)
{
    wsync_transport_config_t c = cfg();
    memset(r, 0, sizeof(*r));
    if (wsync_mem_host.alloc(DST_LEN, (void **)&r->d) || wsync_mem_host.alloc(SRC_LEN, (void **)&r->s))
        return -1;
    memset(r->d, 0xEE, DST_LEN);
    wsync_fill_pattern(r->s, SRC_LEN, 0, 42);
    if (V->open(&c, &r->rx) || V->open(&c, &r->tx) ||
        V->reg(r->rx, r->d, DST_LEN, WSYNC_MEM_HOST, &r->dst, &r->key) ||
        V->reg(r->tx, r->s, SRC_LEN, WSYNC_MEM_HOST, &r->src, &r->skey) || V->listen(r->rx, &r->addr) ||
        V->connect(r->tx, &r->addr, 7, &r->conn)) {
        fprintf(stderr, "  rig: %s\n", wsync_last_error());
        return -1;
    }
    return 0;
}

static void rig_down(rig_t *r)
{
    if (r->conn)
        V->disconnect(r->conn);
    if (r->src)
        V->dereg(r->src);
    if (r->dst)
        V->dereg(r->dst);
    V->close(r->tx);
    V->close(r->rx);
    wsync_mem_host.free(r->d);
    wsync_mem_host.free(r->s);
}

/* Collect completions of `kind` from t until `want` arrived or time ran out;
 * ERRORs are counted in *errors (message printed). */
static int collect(wsync_transport_t *t, wsync_completion_kind_t kind, int want, wsync_completion_t *out, int *errors)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)WAIT_MS * 1000000ULL;
    int got = 0;
    while (got < want && wsync_now_ns() < deadline) {
        wsync_completion_t c[32];
        int n = 0, i;
        V->poll(t, c, 32, &n, 100);
        for (i = 0; i < n; i++) {
            if (c[i].kind == WSYNC_COMPLETION_ERROR) {
                if (errors)
                    (*errors)++;
                fprintf(stderr, "  error completion: %s\n", c[i].message);
                if (kind == WSYNC_COMPLETION_ERROR && got < want)
                    out[got++] = c[i];
            } else if (c[i].kind == kind && got < want) {
                out[got++] = c[i];
            }
        }
    }
    return got;
}

#define NPUTS 96

static void many_puts_land_byte_exact_with_full_tags(void)
{
    rig_t r;
    wsync_completion_t landed[NPUTS], sent[NPUTS];
    int seen[NPUTS] = {0}, errors = 0, i;
    size_t piece = DST_LEN / NPUTS;
    if (!have_device)
        SKIP("no RDMA device");
    if (rig_up(&r) != 0) {
        CHECK(!"rig up");
        rig_down(&r);
        return;
    }
    /* Tags as the data path makes them: request id high, piece id low.
     * Pieces go to reversed places so offsets are really honoured. */
    for (i = 0; i < NPUTS; i++) {
        uint64_t tag = (0x5eedULL << 32) | (uint64_t)i;
        CHECK_OK(V->expect(r.rx, 7, r.dst, (size_t)(NPUTS - 1 - i) * piece, piece - (size_t)i, tag));
    }
    for (i = 0; i < NPUTS; i++)
        CHECK_OK(V->put(r.conn, r.src, (size_t)i * piece, &r.key, (size_t)(NPUTS - 1 - i) * piece,
                        piece - (size_t)i, (0x5eedULL << 32) | (uint64_t)i));
    CHECK_EQ(collect(r.rx, WSYNC_COMPLETION_LANDED, NPUTS, landed, &errors), NPUTS);
    CHECK_EQ(collect(r.tx, WSYNC_COMPLETION_SENT, NPUTS, sent, &errors), NPUTS);
    CHECK_EQ(errors, 0);
    for (i = 0; i < NPUTS; i++) {
        uint32_t id = (uint32_t)landed[i].tag;
        CHECK_EQ(landed[i].tag >> 32, 0x5eed);
        CHECK_EQ(landed[i].peer, 7);
        if (id < NPUTS) {
            CHECK_EQ(landed[i].len, piece - id);
            seen[id]++;
        }
        CHECK_EQ(sent[i].tag >> 32, 0x5eed);
    }
    for (i = 0; i < NPUTS; i++) {
        CHECK_EQ(seen[i], 1);
        if (memcmp(r.d + (size_t)(NPUTS - 1 - i) * piece, r.s + (size_t)i * piece, piece - (size_t)i) != 0) {
            fprintf(stderr, "  piece %d differs\n", i);
            CHECK(0);
            break;
        }
    }
    rig_down(&r);
}

static void registration_is_cached_and_bad_keys_refused(void)
{
    rig_t r;
    wsync_region_t *again = NULL;
    wsync_blob_t k2, bad;
    if (!have_device)
        SKIP("no RDMA device");
    if (rig_up(&r) != 0) {
        CHECK(!"rig up");
        rig_down(&r);
        return;
    }
    /* A range inside a registered region reuses its registration (same
     * rkeys: the key bytes after the address and length are identical). */
    CHECK_OK(V->reg(r.rx, r.d + 4096, 8192, WSYNC_MEM_HOST, &again, &k2));
    CHECK(again != NULL && memcmp(k2.data + 32, r.key.data + 32, k2.len - 32) == 0);
    V->dereg(again);
    CHECK_FAILS(V->put(r.conn, r.src, 0, &r.key, DST_LEN - 10, 100, 1), WSYNC_ERR_INVALID, "outside");
    CHECK_FAILS(V->put(r.conn, r.src, SRC_LEN - 10, &r.key, 0, 100, 1), WSYNC_ERR_INVALID, "source");
    bad = r.key;
    bad.len = 5;
    CHECK_FAILS(V->put(r.conn, r.src, 0, &bad, 0, 100, 1), WSYNC_ERR_FORMAT, "region key");
    bad = r.skey; /* the sender's own key: another instance's nonce */
    CHECK_FAILS(V->put(r.conn, r.src, 0, &bad, 0, 100, 1), WSYNC_ERR_INVALID, "another receiver");
    rig_down(&r);
}

static void vanished_receiver_gives_errors_naming_piece_and_peer(void)
{
    rig_t r;
    wsync_completion_t e[4];
    int i;
    if (!have_device)
        SKIP("no RDMA device");
    setenv("WSYNC_IB_TIMEOUT", "10", 1); /* ~4 ms per try: fail fast */
    setenv("WSYNC_IB_RETRY_CNT", "2", 1);
    CHECK_OK(wsync_settings_reload());
    if (rig_up(&r) != 0) {
        CHECK(!"rig up");
        rig_down(&r);
        return;
    }
    /* The receiver goes away entirely (as a killed process would). */
    V->dereg(r.dst);
    r.dst = NULL;
    V->close(r.rx);
    r.rx = NULL;
    for (i = 0; i < 4; i++)
        CHECK_OK(V->put(r.conn, r.src, 0, &r.key, 0, 4096, 100 + (uint64_t)i));
    CHECK_EQ(collect(r.tx, WSYNC_COMPLETION_ERROR, 4, e, NULL), 4);
    CHECK(strstr(e[0].message, "piece 100") != NULL);
    CHECK(strstr(e[0].message, "receiver") != NULL);
    CHECK(e[0].status == WSYNC_ERR_PEER);
    /* The queue pair is dead now: new puts are refused outright or fail. */
    rig_down(&r);
    unsetenv("WSYNC_IB_TIMEOUT");
    unsetenv("WSYNC_IB_RETRY_CNT");
    CHECK_OK(wsync_settings_reload());
}

static void disconnect_with_puts_in_flight_accounts_for_each(void)
{
    rig_t r;
    int i, sent = 0, errs = 0, n;
    wsync_completion_t c[64];
    if (!have_device)
        SKIP("no RDMA device");
    if (rig_up(&r) != 0) {
        CHECK(!"rig up");
        rig_down(&r);
        return;
    }
    for (i = 0; i < 600; i++)
        CHECK_OK(V->put(r.conn, r.src, 0, &r.key, 0, 32768, (uint64_t)i));
    V->disconnect(r.conn);
    r.conn = NULL;
    do {
        V->poll(r.tx, c, 64, &n, 200);
        for (i = 0; i < n; i++) {
            sent += c[i].kind == WSYNC_COMPLETION_SENT;
            errs += c[i].kind == WSYNC_COMPLETION_ERROR;
        }
    } while (n > 0);
    CHECK_EQ(sent + errs, 600);
    rig_down(&r);
}

static void without_a_device_auto_falls_back(void)
{
    const wsync_transport_ops_t *ops = NULL;
    wsync_transport_config_t c = cfg();
    if (have_device)
        SKIP("an RDMA device is present");
    CHECK(!V->can_use(&c));
    CHECK(strstr(wsync_last_error(), "verbs") != NULL);
    CHECK_FAILS(wsync_transport_get("verbs", &c, &ops), WSYNC_ERR_UNSUPPORTED, "cannot be used here");
    CHECK_OK(wsync_transport_get("auto", &c, &ops));
    CHECK(ops != NULL && strcmp(ops->name, "verbs") != 0);
}

int main(void)
{
    wsync_transport_config_t c = cfg();
    have_device = V->can_use(&c);
    if (!have_device)
        printf("# verbs: %s\n", wsync_last_error());
    RUN(many_puts_land_byte_exact_with_full_tags);
    RUN(registration_is_cached_and_bad_keys_refused);
    RUN(vanished_receiver_gives_errors_naming_piece_and_peer);
    RUN(disconnect_with_puts_in_flight_accounts_for_each);
    RUN(without_a_device_auto_falls_back);
    TEST_EXIT();
}
