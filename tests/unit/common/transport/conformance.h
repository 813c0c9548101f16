/* conformance.h: the cases every transport must pass, in one process (a
 * receiver and a sender transport of the same backend, connected over its
 * real path): connect (and a bad address refused), register regions, puts of
 * many sizes (0, 1, odd, unaligned offsets, more than a MiB) landing
 * byte-exact with SENT and LANDED for each and the bytes around them
 * untouched, a put outside the destination or with a key that is no key of
 * the transport refused, a receiver that goes away mid-put reported as an
 * ERROR (not a hang), disconnect and close with a put in flight, and (where
 * offered) a put gathered from strided source bytes and a redirect
 * (conformance_redirect.h). The includer describes its
 * backends (conf_backend_t) and calls conf_run for each; every case prints
 * "PASS|FAIL conformance_<backend>_<case>" or "SKIP ...: skipped: <why>".
 *
 * Two-sided backends (nccl): the receiver's expect() names where bytes land
 * and the key only lets the sender check bounds, so a key that is no key of
 * the transport is not refused there; an expect outside its region is. */
#ifndef WSYNC_TESTS_TRANSPORT_CONFORMANCE_H
#define WSYNC_TESTS_TRANSPORT_CONFORMANCE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/pack/pack.h"
#include "common/base/settings.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "tests/test.h"

#define CONF_LEN ((size_t)4 << 20) /* destination region and source, each */
#define CONF_WAIT_MS 30000         /* for completions; a hang fails the case */
#define CONF_SENDER 3              /* the sender's id, reported as completion.peer */

typedef struct conf_backend {
    const char *name; /* in the case names: tcp, tcp_cuda, local, nccl, verbs */
    const wsync_transport_ops_t *ops;
    const wsync_mem_ops_t *mem; /* where regions live: wsync_mem_host or wsync_mem_cuda */
    int rx_device, tx_device;   /* GPU ordinals for the config (-1: host memory) */
    const char *bind_host;      /* NULL: the backend's own choice */
    int two_sided;              /* receiver expect()s each put */
    const char *skip;           /* why it cannot run here; NULL: it can */
} conf_backend_t;

typedef struct conf_rig {
    const conf_backend_t *b;
    wsync_transport_t *rx, *tx;
    wsync_region_t *dst, *src;
    wsync_blob_t addr, key, src_key;
    void *dmem, *smem;
    wsync_conn_t *conn;
} conf_rig_t;

static const conf_backend_t *conf_b_; /* the backend the running case uses */

static wsync_transport_config_t conf_cfg(const conf_backend_t *b, int device)
{
    return (wsync_transport_config_t){.bind_host = b->bind_host,
                                      .conns_per_peer = 2,
                                      .device = device,
                                      .timeout_ms = 10000};
}

/* The bytes of `len` at `off` of the backend's memory `p`, on the host. */
static unsigned char *conf_read(const conf_backend_t *b, const void *p, size_t off, size_t len)
{
    unsigned char *h = malloc(len ? len : 1);
    if (h != NULL && len > 0 && b->mem->copy(h, (const char *)p + off, len) != WSYNC_OK) {
        free(h);
        return NULL;
    }
    return h;
}

/* Receiver: a patterned region (seed 1), listening. Sender: a patterned
 * source (seed 2), connected unless `connect` is 0. 0 or -1 (reason printed). */
static int conf_up(conf_rig_t *r, const conf_backend_t *b, int connect)
{
    wsync_transport_config_t rc = conf_cfg(b, b->rx_device), tc = conf_cfg(b, b->tx_device);
    memset(r, 0, sizeof(*r));
    r->b = b;
    if (b->mem->init(b->rx_device < 0 ? 0 : b->rx_device) || b->mem->alloc(CONF_LEN, &r->dmem) ||
        b->mem->fill(r->dmem, CONF_LEN, 0, 1) || b->ops->open(&rc, &r->rx) ||
        b->ops->reg(r->rx, r->dmem, CONF_LEN, b->mem->kind, &r->dst, &r->key) || b->ops->listen(r->rx, &r->addr))
        goto fail;
    if (b->mem->init(b->tx_device < 0 ? 0 : b->tx_device) || b->mem->alloc(CONF_LEN, &r->smem) ||
        b->mem->fill(r->smem, CONF_LEN, 0, 2) || b->ops->open(&tc, &r->tx) ||
        b->ops->reg(r->tx, r->smem, CONF_LEN, b->mem->kind, &r->src, &r->src_key))
        goto fail;
    if (connect && b->ops->connect(r->tx, &r->addr, CONF_SENDER, &r->conn))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "  %s: set-up failed: %s\n", b->name, wsync_last_error());
    return -1;
}

static void conf_down(conf_rig_t *r)
{
    const wsync_transport_ops_t *ops = r->b->ops;
    if (r->conn)
        ops->disconnect(r->conn);
    if (r->src)
        ops->dereg(r->src);
    if (r->tx)
        ops->close(r->tx);
    if (r->dst)
        ops->dereg(r->dst);
    if (r->rx)
        ops->close(r->rx);
    if (r->smem)
        r->b->mem->free(r->smem);
    if (r->dmem)
        r->b->mem->free(r->dmem);
    memset(r, 0, sizeof(*r));
}

/* Polls both sides until `want_sent` SENT or ERROR and `want_landed` LANDED
 * have come (or the deadline); counts each kind. Checks each LANDED's peer and that its
 * len is the one put with that tag (lens[tag - tag0]). */
static void conf_wait(conf_rig_t *r, int want_sent, int want_landed, uint64_t tag0, const size_t *lens, int *sent,
                      int *landed, int *errors)
{
    const wsync_transport_ops_t *ops = r->b->ops;
    const uint64_t deadline = wsync_now_ns() + (uint64_t)CONF_WAIT_MS * 1000000ull;
    wsync_completion_t c[16];
    int n, i, side;
    while ((*sent + *errors < want_sent || *landed < want_landed) && wsync_now_ns() < deadline) {
        for (side = 0; side < 2; side++) {
            wsync_transport_t *t = side ? r->rx : r->tx;
            if (t == NULL || ops->poll(t, c, 16, &n, 20) != WSYNC_OK)
                continue;
            for (i = 0; i < n; i++) {
                if (c[i].kind == WSYNC_COMPLETION_SENT) {
                    (*sent)++;
                } else if (c[i].kind == WSYNC_COMPLETION_LANDED) {
                    (*landed)++;
                    CHECK_EQ(c[i].peer, CONF_SENDER);
                    if (lens && c[i].tag >= tag0 && c[i].tag - tag0 < (uint64_t)want_landed)
                        CHECK_EQ(c[i].len, lens[c[i].tag - tag0]);
                    else
                        CHECK(lens == NULL);
                } else {
                    (*errors)++;
                    fprintf(stderr, "  %s: ERROR completion (tag %llx): %s\n", r->b->name,
                            (unsigned long long)c[i].tag, c[i].message);
                }
            }
        }
    }
}

/* One put, expected on the receiver first where the backend is two-sided;
 * both batches closed. The put's status. */
static wsync_status_t conf_put(conf_rig_t *r, size_t src_off, size_t dst_off, size_t len, uint64_t tag, int flush)
{
    const wsync_transport_ops_t *ops = r->b->ops;
    wsync_status_t st;
    if (r->b->two_sided && r->rx != NULL) {
        st = ops->expect(r->rx, CONF_SENDER, r->dst, dst_off, len, tag);
        if (st != WSYNC_OK)
            return st;
        if (flush && ops->expect_flush)
            ops->expect_flush(r->rx, CONF_SENDER);
    }
    st = ops->put(r->conn, r->src, src_off, &r->key, dst_off, len, tag);
    if (flush && ops->put_flush)
        ops->put_flush(r->conn);
    return st;
}

static void conformance_connect(void)
{
    const conf_backend_t *b = conf_b_;
    conf_rig_t r;
    wsync_conn_t *bad = NULL;
    wsync_blob_t junk;
    if (b->skip)
        SKIP("%s", b->skip);
    CHECK(conf_up(&r, b, 1) == 0);
    CHECK(r.conn != NULL);
    CHECK(r.addr.len > 0 && r.addr.len <= WSYNC_BLOB_MAX);
    memset(&junk, 0, sizeof(junk));
    junk.len = 3;
    memcpy(junk.data, "zz", 3);
    CHECK(r.tx == NULL || b->ops->connect(r.tx, &junk, CONF_SENDER + 1, &bad) != WSYNC_OK);
    CHECK(bad == NULL);
    conf_down(&r);
}

static void conformance_register(void)
{
    const conf_backend_t *b = conf_b_;
    conf_rig_t r;
    wsync_region_t *sub = NULL;
    wsync_blob_t key;
    if (b->skip)
        SKIP("%s", b->skip);
    CHECK(conf_up(&r, b, 0) == 0);
    CHECK(r.key.len > 0 && r.key.len <= WSYNC_BLOB_MAX);
    /* a second region inside the same memory, at an odd offset */
    memset(&key, 0, sizeof(key));
    if (r.rx)
        CHECK_OK(b->ops->reg(r.rx, (char *)r.dmem + 4097, 8192, b->mem->kind, &sub, &key));
    CHECK(sub != NULL && key.len > 0);
    if (sub)
        b->ops->dereg(sub);
    conf_down(&r);
}

/* Sizes 0, 1, odd and more than a MiB, at unaligned offsets; all in one
 * batch. Every piece lands byte-exact; the bytes between stay. */
static void conformance_sizes(void)
{
    static const size_t lens[] = {0, 1, 7, 4096, 4099, ((size_t)1 << 20) + 13, 65536 + 1};
    static const size_t soffs[] = {0, 5, 1001, 8191, 3, 70001, 2u << 20};
    const conf_backend_t *b = conf_b_;
    const int n = (int)(sizeof(lens) / sizeof(lens[0]));
    size_t doffs[sizeof(lens) / sizeof(lens[0])], at = 17;
    unsigned char *got, *want;
    int i, sent = 0, landed = 0, errors = 0;
    conf_rig_t r;
    if (b->skip)
        SKIP("%s", b->skip);
    if (conf_up(&r, b, 1) != 0) {
        CHECK(0);
        conf_down(&r);
        return;
    }
    for (i = 0; i < n; i++) {
        doffs[i] = at;
        at += lens[i] + 4096 + 3; /* gaps stay as they were */
        CHECK_OK(conf_put(&r, soffs[i], doffs[i], lens[i], 0x100 + (uint64_t)i, i == n - 1));
    }
    conf_wait(&r, n, n, 0x100, lens, &sent, &landed, &errors);
    CHECK_EQ(sent, n);
    CHECK_EQ(landed, n);
    CHECK_EQ(errors, 0);
    got = conf_read(b, r.dmem, 0, CONF_LEN);
    want = malloc(CONF_LEN);
    CHECK(got != NULL && want != NULL);
    if (got && want) {
        unsigned char *src = malloc(CONF_LEN);
        wsync_fill_pattern(want, CONF_LEN, 0, 1);
        wsync_fill_pattern(src, CONF_LEN, 0, 2);
        for (i = 0; i < n; i++)
            memcpy(want + doffs[i], src + soffs[i], lens[i]);
        CHECK(memcmp(got, want, CONF_LEN) == 0);
        free(src);
    }
    free(got);
    free(want);
    conf_down(&r);
}

/* A put past the region's end, and (one-sided) keys that are none of this
 * transport's: refused by put() or by an ERROR completion, never LANDED,
 * and the region keeps its bytes. Two-sided: an expect past the end is
 * refused. */
static void conformance_wrong_region(void)
{
    const conf_backend_t *b = conf_b_;
    unsigned char *got, *want;
    int sent = 0, landed = 0, errors = 0, refused = 0, tries = 0;
    conf_rig_t r;
    wsync_blob_t key;
    if (b->skip)
        SKIP("%s", b->skip);
    if (conf_up(&r, b, 1) != 0) {
        CHECK(0);
        conf_down(&r);
        return;
    }
    if (b->two_sided)
        CHECK(b->ops->expect(r.rx, CONF_SENDER, r.dst, CONF_LEN - 10, 20, 0x200) != WSYNC_OK);
    tries++;
    if (b->ops->put(r.conn, r.src, 0, &r.key, CONF_LEN - 10, 20, 0x201) != WSYNC_OK)
        refused++;
    if (!b->two_sided) {
        key = r.key;
        key.len = key.len > 4 ? key.len - 4 : 1; /* truncated */
        tries++;
        if (b->ops->put(r.conn, r.src, 0, &key, 0, 64, 0x202) != WSYNC_OK)
            refused++;
        memset(key.data, 0, sizeof(key.data)); /* right length, no key */
        key.len = r.key.len;
        tries++;
        if (b->ops->put(r.conn, r.src, 0, &key, 0, 64, 0x203) != WSYNC_OK)
            refused++;
    }
    if (b->ops->put_flush)
        b->ops->put_flush(r.conn);
    /* what put() took must come back as an ERROR (on either side) */
    conf_wait(&r, tries - refused, 0, 0, NULL, &sent, &landed, &errors);
    CHECK_EQ(landed, 0);
    CHECK(refused + errors >= tries);
    got = conf_read(b, r.dmem, 0, CONF_LEN);
    want = malloc(CONF_LEN);
    if (got && want) {
        wsync_fill_pattern(want, CONF_LEN, 0, 1);
        CHECK(memcmp(got, want, CONF_LEN) == 0);
    }
    free(got);
    free(want);
    conf_down(&r);
}

static char conf_case_[96]; /* "conformance_<case>_<backend>", for a hang */

static void conf_hung(int sig)
{
    static const char m[] = ": hung (no answer within 120 s)\n";
    (void)sig;
    if (write(1, "FAIL ", 5) < 0 || write(1, conf_case_, strlen(conf_case_)) < 0 || write(1, m, sizeof(m) - 1) < 0)
        _exit(2);
    _exit(1);
}

/* The receiver closes while the sender keeps putting: the sender hears of
 * it as a failed put or an ERROR completion within the wait, and its
 * disconnect and close return. */
static void conformance_peer_gone(void)
{
    const conf_backend_t *b = conf_b_;
    const uint64_t deadline = wsync_now_ns() + (uint64_t)CONF_WAIT_MS * 1000000ull;
    int sent = 0, landed = 0, errors = 0, failed = 0, i = 0;
    conf_rig_t r;
    if (b->skip)
        SKIP("%s", b->skip);
    /* RDMA retries a dead peer for timeout x retry count: a few ms each
     * here, as verbs_transport_test's vanished receiver (tcp ignores them). */
    setenv("WSYNC_IB_TIMEOUT", "10", 1);
    setenv("WSYNC_IB_RETRY_CNT", "2", 1);
    (void)wsync_settings_reload();
    if (conf_up(&r, b, 1) != 0) {
        CHECK(0);
        conf_down(&r);
        return;
    }
    for (i = 0; i < 4; i++)
        conf_put(&r, 0, 0, (size_t)1 << 20, 0x300 + (uint64_t)i, 1);
    b->ops->dereg(r.dst);
    b->ops->close(r.rx);
    r.dst = NULL;
    r.rx = NULL;
    while (!failed && errors == 0 && wsync_now_ns() < deadline) {
        if (conf_put(&r, 0, 0, 65536, 0x400 + (uint64_t)i++, 1) != WSYNC_OK)
            failed = 1;
        else
            conf_wait(&r, sent + errors + 1, 0, 0, NULL, &sent, &landed, &errors);
        usleep(10000);
    }
    CHECK(failed || errors > 0);
    conf_down(&r); /* must return: the alarm fails a hang */
    unsetenv("WSYNC_IB_TIMEOUT");
    unsetenv("WSYNC_IB_RETRY_CNT");
    (void)wsync_settings_reload();
}

/* A put lands; then, with another put just queued, the sender disconnects
 * and both sides close: every call returns (the alarm fails a hang). */
static void conformance_close(void)
{
    const conf_backend_t *b = conf_b_;
    conf_rig_t r;
    int sent = 0, landed = 0, errors = 0;
    if (b->skip)
        SKIP("%s", b->skip);
    if (conf_up(&r, b, 1) != 0) {
        CHECK(0);
        conf_down(&r);
        return;
    }
    CHECK_OK(conf_put(&r, 0, 0, 4096, 0x500, 1));
    conf_wait(&r, 1, 1, 0x500, (const size_t[]){4096}, &sent, &landed, &errors);
    CHECK_EQ(sent, 1);
    CHECK_EQ(landed, 1);
    CHECK_EQ(errors, 0);
    CHECK_OK(conf_put(&r, 0, 8192, (size_t)1 << 20, 0x501, 1));
    b->ops->disconnect(r.conn);
    r.conn = NULL;
    conf_down(&r);
    b->ops->close(NULL); /* takes NULL */
}

/* put_gather (optional): two column slices of the source gathered straight
 * into the destination as one put, NGATHER such puts handed back to back
 * (the local transport batches them into few launches), each landing
 * byte-exact (against the host gather) with its own sum where LANDED has
 * one; a put at a destination aligned otherwise than its plan declined
 * (UNSUPPORTED, nothing queued), or landing right. Backends without the op
 * skip. */
#define NGATHER 20
static void conformance_put_gather(void)
{
    static const wsync_run2d_t runs[] = {
        {.src_off = 8000, .dst_off = 0, .rows = 64, .row_bytes = 256, .src_stride = 1024},
        {.src_off = 200000, .dst_off = 64 * 256, .rows = 16, .row_bytes = 64, .src_stride = 512},
    };
    const conf_backend_t *b = conf_b_;
    const size_t len = 64 * 256 + 16 * 64, doff = 8200, step = 20480;
    struct wsync_pack_plan *plan = NULL;
    wsync_completion_t c[16];
    unsigned char *got = NULL, *want = NULL, *src = NULL;
    int n, i, k, nlanded = 0, landed[NGATHER] = {0}, has_sum[NGATHER] = {0};
    uint64_t sum[NGATHER] = {0}, deadline;
    wsync_status_t st;
    conf_rig_t r;
    if (b->skip)
        SKIP("%s", b->skip);
    if (b->ops->put_gather == NULL)
        SKIP("the backend does not offer put_gather (optional)");
    if (conf_up(&r, b, 1) != 0 || wsync_pack_cuda_prepare(runs, 2, doff, (uintptr_t)r.smem, &plan) != WSYNC_OK) {
        CHECK(0);
        conf_down(&r);
        return;
    }
    st = b->ops->put_gather(r.conn, r.src, 0, plan, &r.key, doff + 1, len, 0x5ff);
    CHECK(st == WSYNC_ERR_UNSUPPORTED);
    for (k = 0; k < NGATHER; k++)
        CHECK_OK(b->ops->put_gather(r.conn, r.src, 0, plan, &r.key, doff + k * step, len, 0x600 + (uint64_t)k));
    if (b->ops->put_flush)
        b->ops->put_flush(r.conn);
    deadline = wsync_now_ns() + (uint64_t)CONF_WAIT_MS * 1000000ull;
    while (nlanded < NGATHER && wsync_now_ns() < deadline) {
        if (b->ops->poll(r.rx, c, 16, &n, 20) != WSYNC_OK)
            continue;
        for (i = 0; i < n; i++) {
            CHECK(c[i].kind != WSYNC_COMPLETION_ERROR);
            k = (int)c[i].tag - 0x600;
            if (c[i].kind == WSYNC_COMPLETION_LANDED && k >= 0 && k < NGATHER && !landed[k]) {
                landed[k] = 1;
                nlanded++;
                has_sum[k] = c[i].has_sum;
                sum[k] = c[i].sum;
                CHECK_EQ(c[i].len, len);
            }
        }
    }
    CHECK_EQ(nlanded, NGATHER);
    got = conf_read(b, r.dmem, 0, CONF_LEN);
    want = malloc(CONF_LEN);
    src = malloc(CONF_LEN);
    CHECK(got != NULL && want != NULL && src != NULL);
    if (got && want && src) {
        wsync_fill_pattern(want, CONF_LEN, 0, 1);
        wsync_fill_pattern(src, CONF_LEN, 0, 2);
        for (k = 0; k < NGATHER; k++)
            wsync_pack_host(want + doff + k * step, src, runs, 2);
        CHECK(memcmp(got, want, CONF_LEN) == 0);
        for (k = 0; k < NGATHER; k++)
            CHECK(!has_sum[k] || sum[k] == wsync_digest_sum(want + doff + k * step, len, doff + k * step));
    }
    free(got);
    free(want);
    free(src);
    conf_down(&r); /* the transports first: no launch of the plan runs any more */
    wsync_pack_cuda_plan_free(plan);
}

#include "tests/unit/common/transport/conformance_redirect.h"

#define CONF_RUN(b, fn)                                                                \
    do {                                                                               \
        conf_b_ = (b);                                                                 \
        snprintf(conf_case_, sizeof(conf_case_), "%s_%s", #fn, (b)->name);             \
        test_case_failed_ = 0;                                                         \
        test_case_skipped_ = 0;                                                        \
        alarm(120);                                                                    \
        fn();                                                                          \
        alarm(0);                                                                      \
        if (test_case_skipped_ && !test_case_failed_)                                  \
            printf("SKIP %s_%s: skipped: %s\n", #fn, (b)->name, test_skip_reason_);    \
        else                                                                           \
            printf("%s %s_%s\n", test_case_failed_ ? "FAIL" : "PASS", #fn, (b)->name); \
        fflush(stdout);                                                                \
        test_failures_ += test_case_failed_;                                           \
    } while (0)

/* Every case against backend b. */
static void conf_run(const conf_backend_t *b)
{
    signal(SIGALRM, conf_hung);
    signal(SIGPIPE, SIG_IGN);
    CONF_RUN(b, conformance_connect);
    CONF_RUN(b, conformance_register);
    CONF_RUN(b, conformance_sizes);
    CONF_RUN(b, conformance_wrong_region);
    CONF_RUN(b, conformance_peer_gone);
    CONF_RUN(b, conformance_close);
    CONF_RUN(b, conformance_put_gather);
    CONF_RUN(b, conformance_redirect);
    CONF_RUN(b, conformance_redirect_gather);
}

#endif
