/* dests_test.c: the caller's destination tensors (engine_side/dests.c).
 *
 * The digest cut: a range digested as parts (some in another buffer, keyed
 * by wsync_digest_key_at) sums to wsync_digest_sum of the whole, for random
 * ranges and destination layouts.
 *
 * Whole-image receivers with dests, staged and in place: a node of 2 local
 * ranks (threads of this process, each its own receiver, over tcp on
 * loopback from 1 trainer rank) with every other manifest tensor in memory
 * of its own; after each pull every destination equals the published
 * tensor (the bytes kept here, not read back through wsync), the same
 * through both modes; a version corrupted after its digest
 * (WSYNC_TEST_CORRUPT_PIECE) fails both ranks, leaving the staged
 * destinations at the previous version; the next clean version lands in
 * both modes; a wrong byte count is refused naming the tensor.
 *
 * Releasing a sparse image (recv_dests_release): the pages inside the
 * destinations go, the bytes within 8 of a destination's ends (digest
 * words that cross them are read from the image) and outside every
 * destination stay; staged, nothing goes.
 *
 * What may land straight in the caller's tensors (recv_dests_direct, the
 * rule the sparse GPU image is backed by): for random destinations and
 * random digest ranges starting on the 8-byte grid (word_edges) or
 * anywhere (the 8-bytes-at-either-end rule), no byte verification reads out
 * of the image (recv_parts_split's image parts) lies in a direct span, and
 * with word_edges the destinations' bytes on the grid are all direct.
 *
 * The fan-out map (recv_fanmap_t): for random copies out of a rank, its
 * ranges are sorted and disjoint, cover every copied byte, and
 * recv_fanmap_at packs them back to back (every copied byte at a distinct
 * offset below the map's length, in image order). */
#include <pthread.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/base/fault.h"
#include "common/model/manifest.h"
#include "common/base/util.h"
#include "engine_side/dests.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/wsync_receiver.h"
#include "tests/test.h"
#include "tests/unit/rig.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

/* ---- the digest cut ---- */

static void split_parts_sum_to_the_range(void)
{
    enum { IMG = 1 << 16 };
    unsigned char *image = malloc(IMG), *caller = malloc(IMG);
    int trial, bad = 0, caller_parts = 0;
    srand(7);
    for (trial = 0; trial < 400; trial++) {
        recv_dest_t d[6];
        recv_dests_t ds = {.in_place = 1, .d = d};
        recv_parts_t p = {0};
        uint64_t at = (uint64_t)(rand() % 512), off, len, key, sum = 0, want;
        size_t i;
        for (i = 0; i < 6; i++) {
            uint64_t size = 1 + (uint64_t)(rand() % 3000);
            if (at + size > IMG)
                break;
            d[i] = (recv_dest_t){.off = at, .size = size, .ptr = (char *)caller + at, .name = "t"};
            at += size + (uint64_t)(rand() % 3) * (uint64_t)(rand() % 700);
        }
        ds.n = i;
        wsync_fill_pattern(image, IMG, 0, (uint64_t)trial);
        memcpy(caller, image, IMG); /* the caller holds the same bytes elsewhere */
        off = (uint64_t)(rand() % 4000);
        len = 1 + (uint64_t)(rand() % 12000);
        key = (uint64_t)rand() * 977 + (uint64_t)trial;
        if (recv_parts_split(&p, &ds, (const char *)image, off, len, key, 3) != WSYNC_OK) {
            bad++;
            continue;
        }
        for (i = 0; i < p.n; i++) {
            sum += wsync_digest_sum(p.rg[i].ptr, p.rg[i].len, p.rg[i].off);
            caller_parts += p.dest[i] >= 0;
            if (p.of[i] != 3)
                bad++;
        }
        want = wsync_digest_sum(image + off, len, key);
        if (sum != want)
            bad++;
        /* a byte changed in the caller's copy changes the sum when a part
         * reads it */
        for (i = 0; i < p.n; i++)
            if (p.dest[i] >= 0) {
                uint64_t s2 = 0;
                size_t k;
                ((unsigned char *)p.rg[i].ptr)[0] ^= 1;
                for (k = 0; k < p.n; k++)
                    s2 += wsync_digest_sum(p.rg[k].ptr, p.rg[k].len, p.rg[k].off);
                ((unsigned char *)p.rg[i].ptr)[0] ^= 1;
                if (s2 == want)
                    bad++;
                break;
            }
        recv_parts_free(&p);
    }
    CHECK_EQ(bad, 0);
    CHECK(caller_parts > 100); /* the trials did cut into destinations */
    free(image);
    free(caller);
}

/* 1 when [off, off+len) meets one of the sorted spans sp[0..n). */
static int meets(const wsync_redirect_t *sp, size_t n, uint64_t off, uint64_t len)
{
    size_t k = recv_span_after(sp, n, off);
    return len > 0 && k < n && sp[k].off < off + len;
}

static void direct_bytes_are_never_read_from_the_image(void)
{
    enum { IMG = 1 << 16 };
    unsigned char *image = calloc(1, IMG), *caller = calloc(1, IMG);
    int trial, bad = 0, grid_missing = 0, ndirect_total = 0;
    srand(11);
    for (trial = 0; trial < 600; trial++) {
        recv_dest_t d[8];
        recv_dests_t ds = {.in_place = 1, .d = d, .word_edges = trial % 2};
        wsync_redirect_t *sp = NULL;
        size_t i, n = 0, r;
        uint64_t at = (uint64_t)(rand() % 64);
        for (i = 0; i < 8; i++) {
            uint64_t size = 1 + (uint64_t)(rand() % 2500);
            if (at + size > IMG)
                break;
            d[i] = (recv_dest_t){.off = at, .size = size, .ptr = (char *)caller + at, .name = "t"};
            at += size + (uint64_t)(rand() % 2) * (uint64_t)(rand() % 40);
        }
        ds.n = i;
        if (recv_dests_direct(&ds, NULL, 0, &sp, &n) != WSYNC_OK) {
            bad++;
            continue;
        }
        ndirect_total += (int)n;
        for (r = 0; r < 40; r++) { /* digest ranges; on the grid with word_edges */
            recv_parts_t p = {0};
            uint64_t off = (uint64_t)(rand() % (IMG / 2)), len = 1 + (uint64_t)(rand() % 9000);
            size_t k;
            if (ds.word_edges)
                off &= ~(uint64_t)7;
            if (recv_parts_split(&p, &ds, (const char *)image, off, len, 5, 0) != WSYNC_OK) {
                bad++;
                continue;
            }
            for (k = 0; k < p.n; k++)
                if (p.dest[k] < 0 &&
                    meets(sp, n, (uint64_t)((const unsigned char *)p.rg[k].ptr - image), p.rg[k].len))
                    bad++;
            recv_parts_free(&p);
        }
        for (i = 0; ds.word_edges && i < ds.n; i++) { /* every whole word of a destination is direct */
            uint64_t w;
            for (w = (d[i].off + 7) / 8 * 8; w + 8 <= d[i].off + d[i].size; w += 8) {
                size_t k = recv_span_after(sp, n, w);
                if (!(k < n && sp[k].off <= w && w + 8 <= sp[k].off + sp[k].len))
                    grid_missing++;
            }
        }
        free(sp);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(grid_missing, 0);
    CHECK(ndirect_total > 1000);
    free(image);
    free(caller);
}

static void fanmap_packs_the_copied_bytes(void)
{
    enum { NC = 40, IMG = 1 << 14 };
    int trial, bad = 0;
    srand(13);
    for (trial = 0; trial < 300; trial++) {
        wsync_tcopy_t cp[NC];
        wsync_node_plan_t np = {.ncopies = NC, .copies = cp};
        recv_fanmap_t m;
        unsigned char *seen = calloc(IMG, 1), *copied = calloc(IMG, 1);
        uint64_t want = 0;
        int64_t last = -1;
        size_t k, b;
        for (k = 0; k < NC; k++) {
            uint64_t off = (uint64_t)(rand() % (IMG - 600)), len = 1 + (uint64_t)(rand() % 500);
            cp[k] = (wsync_tcopy_t){.from_rank = rand() % 3, .to_rank = rand() % 3, .from_off = off, .len = len};
            if (cp[k].from_rank == 1 && cp[k].to_rank != 1)
                memset(copied + off, 1, len);
        }
        for (b = 0; b < IMG; b++)
            want += copied[b];
        if (recv_fanmap_build(&np, 1, &m) != WSYNC_OK) {
            bad++;
            free(seen);
            free(copied);
            continue;
        }
        bad += m.len != want;
        for (k = 0; k < m.n; k++) /* sorted, disjoint, not touching (merged) */
            bad += k > 0 && m.r[k].off <= m.r[k - 1].off + m.r[k - 1].len;
        for (b = 0; b < IMG; b++) {
            uint64_t at;
            if (!copied[b])
                continue;
            at = recv_fanmap_at(&m, b); /* distinct, in the window, in image order */
            bad += at >= m.len || seen[at] || (int64_t)at <= last;
            if (at < m.len)
                seen[at] = 1;
            last = (int64_t)at;
        }
        recv_fanmap_free(&m);
        free(seen);
        free(copied);
    }
    CHECK_EQ(bad, 0);
}

static void key_at_matches_the_word_keys(void)
{
    uint64_t key = 12345, w;
    int bad = 0;
    for (w = 0; w < 1000; w += 37)
        if (wsync_digest_base_key(wsync_digest_key_at(key, w)) !=
            wsync_digest_base_key(key) + w * WSYNC_DIGEST_GOLDEN)
            bad++;
    CHECK_EQ(bad, 0);
}

/* ---- whole-image receivers ---- */

#define IMAGE (6u << 20)
#define CHUNK (1u << 20)
#define L 2

typedef test_rig_t rig_t; /* g->sent: the bytes of the last clean version */

typedef struct rank {
    wsync_receiver_t *recv;
    wsync_dest_tensor_t *d;
    int nd;
    uint64_t v;
    wsync_status_t st;
    char error[512];
} rank_t;

static int rig_up(rig_t *g)
{
    const test_rig_opts_t o = {.name = "dests-whole", .image = IMAGE, .chunk = CHUNK, .sent = 1};
    return test_rig_up(g, &o);
}

static void *pull_main(void *arg)
{
    rank_t *k = arg;
    k->st = wsync_receiver_pull(k->recv, k->v, 20000, NULL);
    snprintf(k->error, sizeof(k->error), "%s", k->st == WSYNC_OK ? "" : wsync_last_error());
    return NULL;
}

/* Publish version v (corrupted after its digest when `corrupt`), pull it on
 * both ranks; 0 when both succeeded, else -1 (errors in ranks[].error). */
static int publish_and_pull(rig_t *g, rank_t *ranks, uint64_t v, int corrupt)
{
    pthread_t th[L];
    int p, ok = 0;
    if (corrupt)
        setenv("WSYNC_TEST_CORRUPT_PIECE", "0", 1);
    wsync_faults_reload();
    wsync_fill_pattern(g->src, g->m->image_size, 0, 1000 + v);
    if (wsync_publisher_publish(g->pub, v) != WSYNC_OK)
        fprintf(stderr, "  publish: %s\n", wsync_last_error());
    unsetenv("WSYNC_TEST_CORRUPT_PIECE");
    wsync_faults_reload();
    if (!corrupt)
        memcpy(g->sent, g->src, g->m->image_size);
    for (p = 0; p < L; p++) {
        ranks[p].v = v;
        pthread_create(&th[p], NULL, pull_main, &ranks[p]);
    }
    for (p = 0; p < L; p++) {
        pthread_join(th[p], NULL);
        ok |= ranks[p].st != WSYNC_OK;
    }
    return ok ? -1 : 0;
}

/* Every destination of every rank holds g->sent's bytes. */
static int dests_hold_sent(const rig_t *g, const rank_t *ranks)
{
    int p, i;
    for (p = 0; p < L; p++)
        for (i = 0; i < ranks[p].nd; i++) {
            long k = wsync_manifest_find(g->m, ranks[p].d[i].name);
            if (k < 0 || memcmp(ranks[p].d[i].ptr, g->sent + g->m->tensors[k].offset, ranks[p].d[i].nbytes) != 0) {
                fprintf(stderr, "  rank %d: %s differs\n", p, ranks[p].d[i].name);
                return 0;
            }
        }
    return 1;
}

static int ranks_up(rig_t *g, rank_t *ranks, wsync_mode_t mode, const char *engine)
{
    int p;
    size_t i;
    for (p = 0; p < L; p++) {
        wsync_receiver_config_t rc = {.engine_id = engine,
                                      .local_rank = p,
                                      .local_world = L,
                                      .mode = mode,
                                      .transport = "tcp",
                                      .bind_host = "127.0.0.1",
                                      .host_id = "dests-whole-engine"};
        rank_t *k = &ranks[p];
        memset(k, 0, sizeof(*k));
        k->d = calloc(g->m->ntensors, sizeof(*k->d));
        for (i = 0; i < g->m->ntensors; i++)
            if ((i + (size_t)p) % 2 == 0) { /* every other tensor, a different half per rank */
                const wsync_tensor_t *t = &g->m->tensors[i];
                k->d[k->nd++] = (wsync_dest_tensor_t){.name = t->name, .ptr = malloc(t->size), .nbytes = t->size};
                memset(k->d[k->nd - 1].ptr, 0xa5, t->size);
            }
        rc.control_url = wsync_control_server_url(g->server);
        rc.dests = k->d;
        rc.ndests = k->nd;
        if (wsync_receiver_create(&rc, &k->recv) != WSYNC_OK) {
            fprintf(stderr, "  create rank %d: %s\n", p, wsync_last_error());
            return -1;
        }
    }
    return 0;
}

static void ranks_down(rank_t *ranks)
{
    int p, i;
    for (p = L - 1; p >= 0; p--) {
        wsync_receiver_destroy(ranks[p].recv);
        for (i = 0; i < ranks[p].nd; i++)
            free(ranks[p].d[i].ptr);
        free(ranks[p].d);
    }
}

static void whole_image_dests(wsync_mode_t mode, const char *engine)
{
    rig_t g;
    rank_t ranks[L];
    int p, failed;
    if (rig_up(&g) != 0 || ranks_up(&g, ranks, mode, engine) != 0) {
        fprintf(stderr, "  set-up: %s\n", wsync_last_error());
        CHECK(!"set-up");
        test_rig_down(&g);
        return;
    }
    CHECK_EQ(publish_and_pull(&g, ranks, 1, 0), 0);
    CHECK(dests_hold_sent(&g, ranks));
    CHECK_EQ(publish_and_pull(&g, ranks, 2, 0), 0);
    CHECK(dests_hold_sent(&g, ranks));
    /* corrupted after its digest: every rank holds piece 0, every rank fails */
    failed = publish_and_pull(&g, ranks, 3, 1);
    CHECK_EQ(failed, -1);
    for (p = 0; p < L; p++)
        if (ranks[p].st == WSYNC_OK)
            fprintf(stderr, "  rank %d passed a corrupted version\n", p);
    CHECK(strstr(ranks[0].error, "verification") != NULL || strstr(ranks[1].error, "verification") != NULL);
    if (mode == WSYNC_MODE_STAGED) {
        CHECK(dests_hold_sent(&g, ranks)); /* still version 2 */
        CHECK_EQ(wsync_receiver_version(ranks[0].recv), 2);
    } else {
        CHECK_EQ(wsync_receiver_version(ranks[0].recv), 0); /* in place: nothing held */
    }
    CHECK_EQ(publish_and_pull(&g, ranks, 4, 0), 0);
    CHECK(dests_hold_sent(&g, ranks));
    ranks_down(ranks);
    test_rig_down(&g);
}

static void staged_whole_image_dests(void)
{
    whole_image_dests(WSYNC_MODE_STAGED, "dests-whole-staged");
}

static void in_place_whole_image_dests(void)
{
    whole_image_dests(WSYNC_MODE_IN_PLACE, "dests-whole-inplace");
}

static void wrong_byte_count_is_refused_naming_the_tensor(void)
{
    rig_t g;
    wsync_receiver_t *r = NULL;
    char buf[64];
    wsync_dest_tensor_t d = {.ptr = buf, .nbytes = sizeof(buf)};
    wsync_receiver_config_t rc = {.engine_id = "dests-whole-wrong",
                                  .local_world = 1,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1",
                                  .host_id = "dests-whole-engine",
                                  .dests = &d,
                                  .ndests = 1};
    if (rig_up(&g) != 0) {
        CHECK(!"set-up");
        test_rig_down(&g);
        return;
    }
    d.name = g.m->tensors[1].name;
    rc.control_url = wsync_control_server_url(g.server);
    wsync_fill_pattern(g.src, g.m->image_size, 0, 1);
    CHECK_OK(wsync_publisher_publish(g.pub, 1));
    CHECK_OK(wsync_receiver_create(&rc, &r));
    CHECK_FAILS(wsync_receiver_pull(r, 1, 20000, NULL), WSYNC_ERR_INVALID, "has 64 bytes");
    CHECK(strstr(wsync_last_error(), g.m->tensors[1].name) != NULL);
    CHECK(strstr(wsync_last_error(), "manifest's has") != NULL);
    wsync_receiver_destroy(r);
    d.name = "no.such.tensor";
    rc.engine_id = "dests-whole-unknown";
    CHECK_OK(wsync_receiver_create(&rc, &r));
    CHECK_FAILS(wsync_receiver_pull(r, 1, 20000, NULL), WSYNC_ERR_INVALID,
                "'no.such.tensor' is not a tensor of the published manifest");
    wsync_receiver_destroy(r);
    test_rig_down(&g);
}

static uint64_t allocated(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

static void release_frees_destination_interiors_only(void)
{
    const uint64_t len = 4u << 20, page = (uint64_t)sysconf(_SC_PAGESIZE);
    /* two destinations: [4096 + 3, 1 MiB + 5) and [2 MiB, 3 MiB + 1); the
     * rest of the image is in none */
    recv_dest_t d[2] = {{.off = 4096 + 3, .size = (1u << 20) + 2 - 4096}, {.off = 2u << 20, .size = (1u << 20) + 1}};
    recv_dests_t ds = {.in_place = 1, .n = 2, .d = d};
    wsync_window_t w;
    unsigned char *img;
    uint64_t i, bad = 0, expect_freed = 0;
    size_t k;
    CHECK_OK(wsync_shm_alloc_sparse(len, &w));
    img = w.ptr;
    memset(img, 0xa5, len);
    ds.in_place = 0;
    recv_dests_release(&ds, &w, 0, len); /* staged: nothing */
    CHECK_EQ(allocated(w.fd), len);
    ds.in_place = 1;
    recv_dests_release(&ds, &w, 0, len);
    for (k = 0; k < 2; k++) {
        uint64_t s = (d[k].off + 8 + page - 1) / page * page, e = (d[k].off + d[k].size - 8) / page * page;
        expect_freed += e - s;
        for (i = d[k].off; i < d[k].off + d[k].size; i++)
            if ((i < s || i >= e) && img[i] != 0xa5)
                bad++;
    }
    CHECK_EQ(allocated(w.fd), len - expect_freed);
    for (i = 0; i < len; i++) {
        int in_dest = (i >= d[0].off && i < d[0].off + d[0].size) || (i >= d[1].off && i < d[1].off + d[1].size);
        if (!in_dest && img[i] != 0xa5)
            bad++;
    }
    CHECK_EQ(bad, 0);
    wsync_window_shm.free(&w);
}

int main(void)
{
    RUN(release_frees_destination_interiors_only);
    RUN(key_at_matches_the_word_keys);
    RUN(direct_bytes_are_never_read_from_the_image);
    RUN(fanmap_packs_the_copied_bytes);
    RUN(split_parts_sum_to_the_range);
    RUN(staged_whole_image_dests);
    RUN(in_place_whole_image_dests);
    RUN(wrong_byte_count_is_refused_naming_the_tensor);
    TEST_EXIT();
}
