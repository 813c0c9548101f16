/* pull_deltas_test.c: the delta wires of one pull as every sender puts them
 * (trainer ranks and relays): a put's element width from its tensors (a
 * whole-image range, or a node plan's runs), a wire that pays encoded with
 * the digest of its new bytes and one that does not left full, wires laid
 * back to back 8-byte aligned in the asker's stage, one that does not fit
 * left full, each put tagged as a wire and listed in the answer as put. A
 * transport that records its puts stands in for tcp. */
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"
#include "common/delta/delta.h"
#include "common/digest/digest.h"
#include "common/proto/pull_deltas.h"
#include "tests/test.h"

typedef struct put_rec {
    size_t src_off, dst_off, len;
    uint64_t tag;
} put_rec_t;

static put_rec_t puts_seen[8];
static int nputs_seen, regs, deregs;

static wsync_status_t fake_reg(wsync_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind,
                               wsync_region_t **out, wsync_blob_t *key)
{
    (void)t, (void)ptr, (void)len, (void)kind, (void)key;
    *out = (wsync_region_t *)ptr;
    regs++;
    return WSYNC_OK;
}

static void fake_dereg(wsync_region_t *r)
{
    (void)r;
    deregs++;
}

static wsync_status_t fake_put(wsync_conn_t *c, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                               size_t dst_off, size_t len, uint64_t tag)
{
    (void)c, (void)src, (void)dst_key;
    if (nputs_seen == 8)
        return wsync_error(WSYNC_ERR_IO, "too many puts");
    puts_seen[nputs_seen++] = (put_rec_t){.src_off = src_off, .dst_off = dst_off, .len = len, .tag = tag};
    return WSYNC_OK;
}

static const wsync_transport_ops_t fake = {.name = "fake", .reg = fake_reg, .dereg = fake_dereg, .put = fake_put};

static void width_follows_the_tensors(void)
{
    wsync_manifest_t *m = NULL;
    const int64_t a[1] = {1024}, b[1] = {512};
    CHECK_OK(wsync_manifest_create(&m));
    CHECK_OK(wsync_manifest_add(m, "w", WSYNC_DTYPE_BF16, 1, a));
    CHECK_OK(wsync_manifest_add(m, "s", WSYNC_DTYPE_F32, 1, b));
    CHECK_EQ(wsync_pull_deltas_width(m, NULL, 0, m->tensors[0].offset, 2048), 2);
    CHECK_EQ(wsync_pull_deltas_width(m, NULL, 0, m->tensors[1].offset, 2048), 4);
    CHECK_EQ(wsync_pull_deltas_width(m, NULL, 0, m->tensors[1].offset, 2046), 1);     /* 4 does not divide it */
    CHECK_EQ(wsync_pull_deltas_width(m, NULL, 0, 0, m->tensors[1].offset + 2048), 1); /* bf16 and fp32: mixed */
    wsync_manifest_free(m);
}

static void wires_laid_put_and_listed(void)
{
    const uint64_t len = 4096; /* 2048 bf16 elements */
    unsigned char *base = calloc(1, len), *next = calloc(1, len), *wire = NULL, *big = malloc(len);
    wsync_pull_request_t q = {.req = 7, .base = 3, .delta_at = 1000};
    wsync_pull_deltas_t d;
    wsync_pull_reply_t r = {0};
    uint64_t wl = 0, dig = 0, at = 0, at2 = 0;
    nputs_seen = regs = deregs = 0;
    next[10] = 1; /* one element changed */
    CHECK_OK(wsync_pull_deltas_open(&d, 3, 300, &fake, NULL));
    CHECK_EQ(regs, 1);
    CHECK_OK(wsync_pull_deltas_encode(&wsync_mem_host, NULL, base, next, len, 2, 65536, &wire, &wl, &dig));
    CHECK(wire != NULL && wl < 100);
    CHECK(dig == wsync_digest_final(wsync_digest_sum(next, len, 65536), len, 65536));
    CHECK_EQ(wsync_pull_deltas_place(&d, wire, wl, &at), 1);
    CHECK_EQ(at, 0);
    CHECK_OK(wsync_pull_deltas_put(&d, &fake, NULL, &q, 5, at, wl, len, &dig));
    CHECK_EQ(wsync_pull_deltas_place(&d, wire, wl, &at2), 1); /* the next, 8-byte aligned after it */
    CHECK_EQ(at2, (wl + 7) & ~7ULL);
    CHECK_OK(wsync_pull_deltas_put(&d, &fake, NULL, &q, 6, at2, wl, len, NULL));
    memset(big, 0xab, len);
    CHECK_EQ(wsync_pull_deltas_place(&d, big, 250, &at), 0); /* past the stage: it goes full */
    CHECK_EQ(nputs_seen, 2);
    CHECK(puts_seen[0].dst_off == 1000 && puts_seen[0].len == wl && puts_seen[0].src_off == 0);
    CHECK(puts_seen[0].tag == ((7ULL << 32) | 5 | WSYNC_PULL_DELTA_TAG));
    CHECK(puts_seen[1].dst_off == 1000 + at2 && puts_seen[1].tag == ((7ULL << 32) | 6 | WSYNC_PULL_DELTA_TAG));
    wsync_pull_deltas_reply(&d, &q, &r);
    CHECK(r.has_base && r.base == 3 && r.ndeltas == 2);
    CHECK(r.deltas[0].piece == 5 && r.deltas[0].at == 0 && r.deltas[0].bytes == wl && r.deltas[0].has_digest &&
          r.deltas[0].digest == dig && r.deltas[0].form == WSYNC_DELTA_PAIRS);
    CHECK(r.deltas[1].piece == 6 && r.deltas[1].at == at2 && !r.deltas[1].has_digest);
    CHECK_EQ(d.wire_bytes, 2 * wl);
    CHECK_EQ(d.put_bytes, 2 * len);
    wsync_pull_deltas_release(&d, &fake);
    CHECK_EQ(deregs, 1);
    wsync_pull_deltas_clear(&d);
    wsync_pull_deltas_reply(NULL, &q, &r); /* no base kept: base 0, nothing listed */
    CHECK(r.has_base && r.base == 0 && r.ndeltas == 0);
    free(wire);
    free(base);
    free(next);
    free(big);
}

static void a_put_that_changed_everywhere_goes_full(void)
{
    const uint64_t len = 4096;
    unsigned char *base = calloc(1, len), *next = malloc(len), *wire = (unsigned char *)1;
    uint64_t wl = 0, dig = 42;
    memset(next, 0x5a, len);
    CHECK_OK(wsync_pull_deltas_encode(&wsync_mem_host, NULL, base, next, len, 2, 0, &wire, &wl, &dig));
    CHECK(wire == NULL && wl == len + WSYNC_DELTA_HEADER);
    CHECK_EQ(dig, 42); /* a full put is verified as every full one: no digest made */
    free(base);
    free(next);
}

int main(void)
{
    RUN(width_follows_the_tensors);
    RUN(wires_laid_put_and_listed);
    RUN(a_put_that_changed_everywhere_goes_full);
    TEST_EXIT();
}
