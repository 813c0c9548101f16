/* digest_merge_test.c: the one read for both digests (trainer_side/
 * digest_merge.c), on the host. For TP node plans over synthetic models
 * (every trainer rank, both trainer layouts, chunk sizes that cut rows),
 * the merged pass gives each of my pieces the word sum of its bytes and
 * each of my puts the digest of its runs packed back to back, both
 * computed here word by word from the definition in digest.h, and equal to
 * what the publish's old digest (pub_digest) and the old put digests
 * (target_digests.c) give. A node that takes only part of the model (bytes
 * no put reads) is among the cases; puts that read the same bytes (which
 * wsync_node_plan_build never makes: a chunk's bytes cross once, the other
 * ranks copy them) are checked on a plan written here. */
#include "common/control/sync_layout.h"
#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "common/targets/rules.h"
#include "common/targets/target_plan.h"
#include "tests/test.h"
#include "trainer_side/digest_merge.h"
#include "trainer_side/publisher_internal.h"

#define IMAGE (24u << 20)

/* The word sum of n bytes keyed at image offset off, from digest.h's words. */
static uint64_t plain_sum(const unsigned char *b, uint64_t n, uint64_t off)
{
    const uint64_t base = wsync_digest_base_key(off);
    uint64_t s = 0, i, j;
    for (i = 0; i < (n + 7) / 8; i++) {
        uint64_t w = 0;
        for (j = 0; j < 8 && 8 * i + j < n; j++)
            w |= (uint64_t)b[8 * i + j] << (8 * j);
        s += wsync_digest_word(w, base + i * WSYNC_DIGEST_GOLDEN);
    }
    return s;
}

/* Put pu's bytes packed back to back from image, byte by byte. */
static unsigned char *packed(const wsync_node_plan_t *np, const wsync_tput_t *pu, const unsigned char *image)
{
    unsigned char *b = malloc(pu->len + 1);
    size_t j;
    uint64_t r, x;
    for (j = pu->first_run; b && j < pu->first_run + pu->nruns; j++) {
        const wsync_run2d_t *rn = &np->runs[j];
        for (r = 0; r < rn->rows; r++)
            for (x = 0; x < rn->row_bytes; x++)
                b[rn->dst_off + r * rn->row_bytes + x] = image[rn->src_off + r * rn->src_stride + x];
    }
    return b;
}

static int digest_of(const json_t *o, uint32_t id, uint64_t *d)
{
    char key[16];
    const json_t *v;
    snprintf(key, sizeof(key), "%u", id);
    v = json_object_get(o, key);
    return v && json_is_string(v) && wsync_digest_parse(json_string_value(v), d) == 0;
}

typedef struct mcase {
    int kind, world, L, rank;
    uint64_t chunk;
    int merged, gaps;
} mcase_t;

/* One trainer rank of one case: the merged pass against the references. */
static void check_rank(const wsync_sync_layout_t *sl, const wsync_node_plan_t *np, unsigned char *image, mcase_t *c)
{
    wsync_publisher_config_t cfg = {.rank = c->rank, .world = c->world, .image = image};
    wsync_publisher_t p;
    pub_slots_t ss;
    pub_merge_t *m;
    pub_tdig_t *dig = NULL;
    json_t *puts = json_object(), *old = json_object();
    uint64_t *rs, *rold, covered = 0;
    size_t i, k;
    memset(&p, 0, sizeof(p));
    memset(&ss, 0, sizeof(ss));
    p.cfg = cfg;
    p.sl = (wsync_sync_layout_t *)sl;
    p.mem = &wsync_mem_host;
    p.snap_threads = 3;
    CHECK_OK(pub_share_init(&p.share, sl, &cfg));
    CHECK_OK(pub_slots_init(&ss, &p.share, p.mem, 1));
    rs = calloc(p.share.nmy + 1, sizeof(*rs));
    rold = calloc(p.share.nmy + 1, sizeof(*rold));
    m = pub_merge_build(&p, &ss.slot[PUB_DIRECT], np);
    c->merged += m != NULL;
    if (m) {
        CHECK_OK(pub_merge_start(&p, m, &ss.slot[PUB_DIRECT]));
        CHECK_OK(pub_merge_finish(&p, m, &ss.slot[PUB_DIRECT], rs, puts));
        CHECK_OK(pub_digest(&p, rold));
        for (i = 0; i < p.share.nmy; i++) {
            const wsync_piece_t *pc = &sl->plan->pieces[p.share.my_pieces[i]];
            CHECK(rs[i] == plain_sum(image + pc->offset, pc->len, pc->offset));
            CHECK(rs[i] == rold[i]);
        }
        CHECK_OK(pub_tdig_prepare(&p, &ss.slot[PUB_DIRECT], np, &dig));
        CHECK_OK(pub_tdig_compute(&p, &ss.slot[PUB_DIRECT], np, dig, old));
        CHECK_EQ(json_object_size(puts), np->rank_nputs[c->rank]);
        for (k = 0; k < np->rank_nputs[c->rank]; k++) {
            const wsync_tput_t *pu = &np->puts[np->rank_puts[c->rank][k]];
            unsigned char *b = packed(np, pu, image);
            uint64_t got = 0, was = 0;
            CHECK(digest_of(puts, pu->id, &got));
            CHECK(digest_of(old, pu->id, &was));
            CHECK(b && got == wsync_digest_final(plain_sum(b, pu->len, pu->dst_off), pu->len, pu->dst_off));
            CHECK(got == was);
            covered += pu->len;
            free(b);
        }
        c->gaps += covered < p.share.owned_bytes;
    }
    pub_merge_free(m);
    pub_tdig_free(dig);
    json_decref(puts);
    json_decref(old);
    free(rs);
    free(rold);
    pub_slots_free(&ss, p.mem, (const wsync_transport_ops_t *const[PUB_MAX_TRANSPORTS]){NULL});
    pub_share_free(&p.share);
}

/* Every trainer rank of (kind, world, chunk) serving an L-rank TP node
 * (L = 1: a node that takes TP rank 0's half, so bytes no put reads). */
static void run_case(mcase_t *c, unsigned char *image)
{
    wsync_manifest_t *man = NULL;
    wsync_sync_layout_t *sl = NULL;
    wsync_target_t *tg[2] = {NULL, NULL};
    wsync_node_plan_t *np = NULL;
    int r;
    CHECK_OK(wsync_manifest_synthetic(IMAGE, &man));
    CHECK_OK(wsync_sync_layout_build(man, c->kind, c->world, c->chunk, &sl));
    if (sl == NULL)
        return;
    for (r = 0; r < 2; r++)
        CHECK_OK(wsync_target_from_rules(sl->manifest, NULL, 2, r, &tg[r]));
    CHECK_OK(wsync_node_plan_build(sl->manifest, sl->layout, c->L, (const wsync_target_t *const *)tg, c->chunk,
                                   NULL, &np));
    for (c->rank = 0; np && c->rank < c->world; c->rank++)
        check_rank(sl, np, image, c);
    wsync_node_plan_free(np);
    wsync_target_free(tg[0]);
    wsync_target_free(tg[1]);
    wsync_sync_layout_free(sl);
}

static void test_merged_digests_equal_the_plain_ones(void)
{
    static const uint64_t chunks[] = {1u << 20, (3u << 20) + 8192};
    unsigned char *image = malloc(IMAGE);
    mcase_t total = {0};
    uint64_t i, x = 0x9e3779b97f4a7c15ULL;
    int kind, world, ci, L;
    CHECK(image != NULL);
    if (image == NULL)
        return;
    for (i = 0; i < IMAGE; i++) { /* never test on zeros */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        image[i] = (unsigned char)x;
    }
    for (kind = 0; kind < 2; kind++)
        for (world = 1; world <= 3; world++)
            for (ci = 0; ci < 2; ci++)
                for (L = 1; L <= 2; L++) {
                    mcase_t c = {.kind = kind, .world = world, .L = L, .chunk = chunks[ci]};
                    run_case(&c, image);
                    total.merged += c.merged;
                    total.gaps += c.gaps;
                    if (kind == WSYNC_LAYOUT_EVEN)
                        CHECK_EQ(c.merged, world); /* one extent a rank: one memory area */
                }
    fprintf(stderr, "  %d trainer ranks merged, %d with bytes no put reads\n", total.merged, total.gaps);
    CHECK(total.gaps > 0);
    free(image);
}

/* A plan of one trainer rank whose puts overlap: a column slice, the same
 * slice again, one shifted by a word (partly over both), a row that
 * crosses a piece bound, and a put of another trainer rank (not mine). */
static void test_overlapping_puts_count_once_in_their_piece(void)
{
    wsync_run2d_t runs[5] = {
        {.src_off = 4096, .src_stride = 1024, .row_bytes = 256, .rows = 40},
        {.src_off = 4096, .src_stride = 1024, .row_bytes = 256, .rows = 40},
        {.src_off = 4096 + 8, .src_stride = 1024, .row_bytes = 256, .rows = 40},
        {.src_off = (1u << 20) - 512, .row_bytes = 1024, .rows = 1},
        {.src_off = 0, .row_bytes = 64, .rows = 1},
    };
    wsync_tput_t puts[5];
    uint32_t mine[4] = {0, 1, 2, 3}, theirs[1] = {4}, *rank_puts[2] = {mine, theirs};
    size_t rank_nputs[2] = {4, 1};
    wsync_node_plan_t np = {.local_ranks = 1, .world = 2, .nputs = 5, .puts = puts, .nruns = 5, .runs = runs};
    mcase_t c = {.kind = WSYNC_LAYOUT_EVEN, .world = 1, .L = 1, .chunk = 1u << 20};
    wsync_manifest_t *man = NULL;
    wsync_sync_layout_t *sl = NULL;
    unsigned char *image = malloc(IMAGE);
    uint64_t i, x = 0x2545f4914f6cdd1dULL;
    for (i = 0; image && i < IMAGE; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        image[i] = (unsigned char)x;
    }
    for (i = 0; i < 5; i++)
        puts[i] = (wsync_tput_t){.id = (uint32_t)i,
                                 .src_rank = i == 4,
                                 .dst_off = 65536 * i,
                                 .len = wsync_run2d_bytes(&runs[i]),
                                 .first_run = i,
                                 .nruns = 1};
    np.rank_nputs = rank_nputs;
    np.rank_puts = rank_puts;
    CHECK_OK(wsync_manifest_synthetic(IMAGE, &man));
    CHECK_OK(wsync_sync_layout_build(man, c.kind, 1, c.chunk, &sl));
    if (sl && image) {
        np.world = 1; /* rank 0's puts are all that is read */
        check_rank(sl, &np, image, &c);
        CHECK_EQ(c.merged, 1);
        CHECK_EQ(c.gaps, 1);
    }
    wsync_sync_layout_free(sl);
    free(image);
}

int main(void)
{
    RUN(test_merged_digests_equal_the_plain_ones);
    RUN(test_overlapping_puts_count_once_in_their_piece);
    TEST_EXIT();
}
