/* slots_test.c: a trainer rank's share (share.c) and its publish slots
 * (slots.c), without a network: the share's extents and pieces checked
 * against the layout by a plain scan, a wrong owned extent refused naming
 * it, the copy slots packing the extents back to back while the direct slot
 * points at the caller's memory, and the slot states a publish and pulls
 * move through (a free copy slot, announce, withdraw, the held version). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/settings.h"
#include "common/control/sync_layout.h"
#include "common/mem/mem.h"
#include "common/model/manifest.h"
#include "tests/test.h"
#include "trainer_side/share.h"
#include "trainer_side/slots.h"

#define IMAGE (3u << 20)
#define CHUNK (256u << 10)
#define WORLD 3
#define RANK 1

/* An FSDP layout: every tensor split across the ranks, so a rank owns
 * several extents. */
static wsync_sync_layout_t *fsdp_layout(void)
{
    wsync_manifest_t *m = NULL;
    wsync_sync_layout_t *sl = NULL;
    if (wsync_manifest_synthetic(IMAGE, &m) != WSYNC_OK ||
        wsync_sync_layout_build(m, 1, WORLD, CHUNK, &sl) != WSYNC_OK)
        return NULL;
    return sl;
}

static void test_share_matches_the_layout(void)
{
    wsync_sync_layout_t *sl = fsdp_layout();
    wsync_publisher_config_t cfg = {.rank = RANK, .world = WORLD};
    pub_share_t sh = {0};
    char *image = NULL;
    uint64_t bytes = 0, pbytes = 0;
    size_t i, e;
    CHECK(sl != NULL);
    if (sl == NULL)
        return;
    image = calloc(1, sl->layout->image_size);
    cfg.image = image;
    CHECK_OK(pub_share_init(&sh, sl, &cfg));
    CHECK(sl->layout->nextents[RANK] > 1);
    CHECK_EQ(sh.nspans, sl->layout->nextents[RANK]);
    for (e = 0; e < sh.nspans; e++) {
        CHECK_EQ(sh.owned[e].offset, sl->layout->extents[RANK][e].offset);
        CHECK_EQ(sh.owned[e].len, sl->layout->extents[RANK][e].len);
        CHECK(sh.owned[e].ptr == image + sh.owned[e].offset);
        bytes += sl->layout->extents[RANK][e].len;
    }
    CHECK_EQ(sh.owned_bytes, bytes);
    /* Every piece of mine lies inside the extent piece_slot_off names, found
     * here by scanning all of them. */
    CHECK_EQ(sh.nmy, sl->plan->rank_npieces[RANK]);
    for (i = 0; i < sh.nmy; i++) {
        const wsync_piece_t *pc = &sl->plan->pieces[sh.my_pieces[i]];
        size_t found = sh.nspans;
        for (e = 0; e < sh.nspans; e++)
            if (pc->offset >= sh.owned[e].offset && pc->offset + pc->len <= sh.owned[e].offset + sh.owned[e].len)
                found = e;
        CHECK_EQ(sh.piece_slot_off[pc->id], found);
        pbytes += pc->len;
    }
    CHECK_EQ(sh.pieces_tile, pbytes == bytes);
    CHECK(sh.pieces_tile);
    pub_share_free(&sh);
    free(image);
    wsync_sync_layout_free(sl);
}

static void test_share_refuses_a_wrong_extent(void)
{
    wsync_sync_layout_t *sl = fsdp_layout();
    wsync_publisher_config_t cfg = {.rank = RANK, .world = WORLD};
    wsync_owned_t *own;
    pub_share_t sh = {0};
    size_t e, n;
    CHECK(sl != NULL);
    if (sl == NULL)
        return;
    n = sl->layout->nextents[RANK];
    own = calloc(n, sizeof(*own));
    for (e = 0; e < n; e++)
        own[e] = (wsync_owned_t){sl->layout->extents[RANK][e].offset, sl->layout->extents[RANK][e].len, own};
    cfg.owned = own;
    cfg.nowned = (int)n - 1;
    CHECK_FAILS(pub_share_init(&sh, sl, &cfg), WSYNC_ERR_INVALID, "were given");
    pub_share_free(&sh);
    memset(&sh, 0, sizeof(sh));
    cfg.nowned = (int)n;
    own[1].len -= 1;
    CHECK_FAILS(pub_share_init(&sh, sl, &cfg), WSYNC_ERR_INVALID, "owned extent 1 of rank 1");
    pub_share_free(&sh);
    free(own);
    wsync_sync_layout_free(sl);
}

static void test_slots_layout_and_states(void)
{
    wsync_sync_layout_t *sl = fsdp_layout();
    wsync_publisher_config_t cfg = {.rank = RANK, .world = WORLD};
    const wsync_transport_ops_t *ops[PUB_MAX_TRANSPORTS] = {NULL};
    const wsync_mem_ops_t *mem = NULL;
    pub_share_t sh = {0};
    pub_slots_t ss;
    char *image = NULL;
    uint64_t pos = 0;
    size_t e, i;
    int dev = 0;
    CHECK(sl != NULL);
    if (sl == NULL)
        return;
    memset(&ss, 0, sizeof(ss));
    image = calloc(1, sl->layout->image_size);
    cfg.image = image;
    CHECK_OK(wsync_mem_get("host", &mem, &dev));
    CHECK_OK(pub_share_init(&sh, sl, &cfg));
    CHECK_OK(pub_slots_init(&ss, &sh, mem, 0));
    CHECK_EQ(ss.latest, -1);
    CHECK_EQ(ss.ncopy, 2); /* delta_bases 1: the newest and the one before */
    /* Copy slots: one buffer, the extents back to back; the direct slot:
     * each extent where the caller keeps it, an area of its own. */
    for (e = 0; e < sh.nspans; e++) {
        for (i = 0; i < (size_t)ss.ncopy; i++) {
            CHECK(ss.slot[i].spans[e].ptr == (char *)ss.slot[i].buf + pos);
            CHECK_EQ(ss.slot[i].spans[e].area, 0);
        }
        CHECK(ss.slot[PUB_DIRECT].spans[e].ptr == image + sh.owned[e].offset);
        CHECK_EQ(ss.slot[PUB_DIRECT].spans[e].area, (int)e);
        pos += sh.owned[e].len;
    }
    CHECK_EQ(ss.slot[0].nareas, 1);
    CHECK_EQ(ss.slot[PUB_DIRECT].nareas, (int)sh.nspans);

    /* A publish takes a copy slot that is neither newest nor pulled. */
    CHECK_EQ(pub_slots_free_copy(&ss), 0);
    pub_slots_announce(&ss, 0, 5, sh.nmy);
    CHECK_EQ(ss.latest, 0);
    CHECK_EQ(ss.slot[0].version, 5);
    CHECK_EQ(ss.slot[0].copied[0], 0); /* copied after the announce */
    CHECK_EQ(pub_slots_free_copy(&ss), 1);
    ss.slot[1].pins = 1; /* a pull of an older version */
    CHECK_EQ(pub_slots_free_copy(&ss), -1);
    ss.slot[1].pins = 0;
    pub_slots_take(&ss, 1);
    CHECK_EQ(ss.slot[1].version, 0);
    CHECK_EQ(ss.latest, 0);

    /* Single copy: every piece is in place at once; the version is held
     * until withdrawn (or released), which names why. */
    pub_slots_announce(&ss, PUB_DIRECT, 6, sh.nmy);
    CHECK_EQ(ss.latest, PUB_DIRECT);
    CHECK_EQ(ss.held_version, 6);
    CHECK_EQ(ss.held_released, 0);
    for (i = 0; i < sh.nmy; i++)
        CHECK_EQ(ss.slot[PUB_DIRECT].copied[i], 1);
    pub_slots_withdraw(&ss, PUB_DIRECT, 6, WSYNC_ERR_IO, "its report failed");
    CHECK_EQ(ss.latest, -1);
    CHECK_EQ(ss.slot[PUB_DIRECT].version, 0);
    CHECK_EQ(ss.slot[PUB_DIRECT].copy_status, WSYNC_ERR_IO);
    CHECK_EQ(ss.held_released, 1);
    CHECK_EQ(ss.withdrawn, 6);
    CHECK_STR(ss.withdrawn_why, "its report failed");

    pub_slots_free(&ss, mem, ops);

    /* delta_bases 3: four copy slots; a publish takes an empty one, then
     * the oldest version's, so the newest and the 3 before it stay. */
    memset(&ss, 0, sizeof(ss));
    setenv("WSYNC_DELTA_BASES", "3", 1);
    CHECK_OK(wsync_settings_reload());
    CHECK_OK(pub_slots_init(&ss, &sh, mem, 0));
    CHECK_EQ(ss.ncopy, 4);
    for (i = 0; i < 6; i++) {
        int s = pub_slots_free_copy(&ss);
        CHECK(s >= 0 && s < 4);
        if (i >= 4)
            CHECK_EQ(ss.slot[s].version, (uint64_t)(i - 3)); /* the oldest of the four */
        pub_slots_take(&ss, s);
        pub_slots_announce(&ss, s, i + 1, sh.nmy);
    }
    for (i = 0; i < 4; i++)
        CHECK(ss.slot[i].version >= 3); /* 3, 4, 5, 6 */
    unsetenv("WSYNC_DELTA_BASES");
    CHECK_OK(wsync_settings_reload());
    pub_slots_free(&ss, mem, ops);
    pub_share_free(&sh);
    free(image);
    wsync_sync_layout_free(sl);
}

int main(void)
{
    RUN(test_share_matches_the_layout);
    RUN(test_share_refuses_a_wrong_extent);
    RUN(test_slots_layout_and_states);
    TEST_EXIT();
}
