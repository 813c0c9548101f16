/* conformance_redirect.h: the redirect case of conformance.h (included by
 * it): bytes of a region that land in other memory of the receiver's (the
 * caller's tensors, in wsync). Two spans in a second allocation; a put
 * crossing both lands each span's bytes there and the rest in the region,
 * a put inside one span lands there whole, the region's bytes under the
 * spans stay, and a LANDED sum (where the backend has one) is the source
 * bytes' host digest keyed at their region offsets; spans out of order are
 * refused; after the spans are dropped, a put lands in the region again.
 * Backends without the op skip. */
#ifndef WSYNC_TESTS_TRANSPORT_CONFORMANCE_REDIRECT_H
#define WSYNC_TESTS_TRANSPORT_CONFORMANCE_REDIRECT_H

#define CONF_SPAN_LEN 65536

/* Polls both sides until n LANDED of tags tag0.. (their sums kept) and n
 * SENT have come; the ERRORs seen. */
static int conf_landed(conf_rig_t *r, int n, uint64_t tag0, int *has, uint64_t *sums)
{
    const uint64_t deadline = wsync_now_ns() + (uint64_t)CONF_WAIT_MS * 1000000ull;
    wsync_completion_t c[16];
    int k, i, side, landed = 0, sent = 0, errors = 0;
    while ((landed < n || sent < n) && errors == 0 && wsync_now_ns() < deadline)
        for (side = 0; side < 2; side++) {
            if (r->b->ops->poll(side ? r->rx : r->tx, c, 16, &k, 20) != WSYNC_OK)
                continue;
            for (i = 0; i < k; i++)
                if (c[i].kind == WSYNC_COMPLETION_LANDED && c[i].tag - tag0 < (uint64_t)n) {
                    has[c[i].tag - tag0] = c[i].has_sum;
                    sums[c[i].tag - tag0] = c[i].sum;
                    landed++;
                } else if (c[i].kind == WSYNC_COMPLETION_SENT) {
                    sent++;
                } else if (c[i].kind == WSYNC_COMPLETION_ERROR) {
                    fprintf(stderr, "  %s: ERROR completion: %s\n", r->b->name, c[i].message);
                    errors++;
                }
        }
    return landed == n && sent == n ? errors : errors + 1;
}

static void conformance_redirect(void)
{
    const conf_backend_t *b = conf_b_;
    /* puts: one across a span into the next (and the region around and between them), one inside a span, one
     * after the redirect is gone */
    static const size_t doff[3] = {8000, 33000, 10000}, soff[3] = {48000, 70000, 90000}, len[3] = {24000, 1000, 100};
    wsync_redirect_t spans[2] = {{.off = 10000, .len = 8192}, {.off = 30000, .len = 4096}}, bad[2];
    unsigned char *got = NULL, *want = NULL, *src = NULL, *gspan = NULL, *wspan = NULL;
    void *smem = NULL;
    int has[3] = {0}, i;
    uint64_t sums[3] = {0};
    size_t k, at;
    conf_rig_t r;
    if (b->skip)
        SKIP("%s", b->skip);
    if (b->ops->redirect == NULL)
        SKIP("the backend does not offer redirect (optional)");
    if (conf_up(&r, b, 1) != 0 || b->mem->alloc(CONF_SPAN_LEN, &smem) != WSYNC_OK ||
        b->mem->fill(smem, CONF_SPAN_LEN, 0, 3) != WSYNC_OK) {
        CHECK(0);
        goto out;
    }
    spans[0].ptr = smem;
    spans[1].ptr = (char *)smem + 16384;
    bad[0] = spans[1];
    bad[1] = spans[0];
    CHECK(b->ops->redirect(r.dst, bad, 2, &r.key) == WSYNC_ERR_INVALID);
    CHECK_OK(b->ops->redirect(r.dst, spans, 2, &r.key));
    for (i = 0; i < 2; i++)
        CHECK_OK(conf_put(&r, soff[i], doff[i], len[i], 0x700 + (uint64_t)i, i == 1));
    CHECK_EQ(conf_landed(&r, 2, 0x700, has, sums), 0);
    CHECK_OK(b->ops->redirect(r.dst, NULL, 0, &r.key));
    CHECK_OK(conf_put(&r, soff[2], doff[2], len[2], 0x702, 1));
    CHECK_EQ(conf_landed(&r, 1, 0x702, has + 2, sums + 2), 0);
    got = conf_read(b, r.dmem, 0, CONF_LEN);
    gspan = conf_read(b, smem, 0, CONF_SPAN_LEN);
    want = malloc(CONF_LEN);
    wspan = malloc(CONF_SPAN_LEN);
    src = malloc(CONF_LEN);
    CHECK(got && gspan && want && wspan && src);
    if (!(got && gspan && want && wspan && src))
        goto out;
    wsync_fill_pattern(want, CONF_LEN, 0, 1);
    wsync_fill_pattern(wspan, CONF_SPAN_LEN, 0, 3);
    wsync_fill_pattern(src, CONF_LEN, 0, 2);
    for (i = 0; i < 3; i++) {
        for (at = doff[i]; at < doff[i] + len[i]; at++) { /* byte by byte: where each lands */
            unsigned char *to = want + at;
            for (k = 0; i < 2 && k < 2; k++)
                if (at >= spans[k].off && at < spans[k].off + spans[k].len)
                    to = wspan + ((char *)spans[k].ptr - (char *)smem) + (at - spans[k].off);
            *to = src[soff[i] + (at - doff[i])];
        }
        CHECK(!has[i] || sums[i] == wsync_digest_sum(src + soff[i], len[i], doff[i]));
    }
    CHECK(memcmp(got, want, CONF_LEN) == 0);
    CHECK(memcmp(gspan, wspan, CONF_SPAN_LEN) == 0);
out:
    free(got);
    free(want);
    free(src);
    free(gspan);
    free(wspan);
    conf_down(&r);
    if (smem)
        b->mem->free(smem);
}

/* A gathered put (put_gather) whose destination the redirect cuts: its
 * two runs land in two spans of a second allocation (each span begins
 * where a run does), byte-exact against the host gather, the region's
 * bytes under them untouched, its sum the host digest of the put keyed at
 * its offset; a span edge inside a run's block is declined (UNSUPPORTED,
 * nothing queued: the caller then packs the put). Backends without both
 * ops skip. */
static void conformance_redirect_gather(void)
{
    static const wsync_run2d_t runs[] = {
        {.src_off = 8000, .dst_off = 0, .rows = 64, .row_bytes = 256, .src_stride = 1024},
        {.src_off = 200000, .dst_off = 64 * 256, .rows = 16, .row_bytes = 64, .src_stride = 512},
    };
    const conf_backend_t *b = conf_b_;
    const size_t len = 64 * 256 + 16 * 64, doff = 8200, at1 = 64 * 256;
    /* each span's memory placed as the put's byte would be (16k + 8): the plan's vectors stay aligned */
    const size_t s0 = 8, s1 = 32768 + 8;
    wsync_redirect_t spans[2] = {{.off = doff, .len = at1}, {.off = doff + at1, .len = len - at1}}, cut[2];
    struct wsync_pack_plan *plan = NULL;
    unsigned char *got = NULL, *want = NULL, *src = NULL, *gspan = NULL, *put = NULL;
    void *smem = NULL;
    int has = 0;
    uint64_t sum = 0;
    conf_rig_t r;
    if (b->skip)
        SKIP("%s", b->skip);
    if (b->ops->redirect == NULL || b->ops->put_gather == NULL)
        SKIP("the backend does not offer both redirect and put_gather (optional)");
    if (conf_up(&r, b, 1) != 0 || b->mem->alloc(CONF_SPAN_LEN, &smem) != WSYNC_OK ||
        b->mem->fill(smem, CONF_SPAN_LEN, 0, 3) != WSYNC_OK ||
        wsync_pack_cuda_prepare(runs, 2, doff, (uintptr_t)r.smem, &plan) != WSYNC_OK) {
        CHECK(0);
        goto out;
    }
    cut[0] = (wsync_redirect_t){.off = doff, .len = 100, .ptr = (char *)smem + s0};
    cut[1] = (wsync_redirect_t){.off = doff + 100, .len = len - 100, .ptr = (char *)smem + s0 + 100};
    CHECK_OK(b->ops->redirect(r.dst, cut, 2, &r.key));
    CHECK(b->ops->put_gather(r.conn, r.src, 0, plan, &r.key, doff, len, 0x801) == WSYNC_ERR_UNSUPPORTED);
    spans[0].ptr = (char *)smem + s0;
    spans[1].ptr = (char *)smem + s1;
    CHECK_OK(b->ops->redirect(r.dst, spans, 2, &r.key));
    CHECK_OK(b->ops->put_gather(r.conn, r.src, 0, plan, &r.key, doff, len, 0x800));
    if (b->ops->put_flush)
        b->ops->put_flush(r.conn);
    CHECK_EQ(conf_landed(&r, 1, 0x800, &has, &sum), 0);
    got = conf_read(b, r.dmem, 0, CONF_LEN);
    gspan = conf_read(b, smem, 0, CONF_SPAN_LEN);
    want = malloc(CONF_LEN);
    src = malloc(CONF_LEN);
    put = malloc(len);
    CHECK(got && gspan && want && src && put);
    if (!(got && gspan && want && src && put))
        goto out;
    wsync_fill_pattern(want, CONF_LEN, 0, 1); /* the region: untouched */
    wsync_fill_pattern(src, CONF_LEN, 0, 2);
    wsync_pack_host(put, src, runs, 2);
    CHECK(memcmp(got, want, CONF_LEN) == 0);
    CHECK(memcmp(gspan + s0, put, at1) == 0);
    CHECK(memcmp(gspan + s1, put + at1, len - at1) == 0);
    CHECK(!has || sum == wsync_digest_sum(put, len, doff));
out:
    free(got);
    free(want);
    free(src);
    free(gspan);
    free(put);
    conf_down(&r); /* the transports first: no launch of the plan runs any more */
    wsync_pack_cuda_plan_free(plan);
    if (smem)
        b->mem->free(smem);
}

#endif
