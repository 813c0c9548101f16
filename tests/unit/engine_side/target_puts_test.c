/* target_puts_test.c: verification put by put (engine_side/target_puts.c) on
 * a hand-made node plan of 2 ranks: a chunk of 2 puts (24 and 13 bytes, from
 * trainer ranks 0 and 1) lands on rank 0, rank 1 copies it in 2 copies
 * placed apart. The copies' parts are summed where they land here, keyed at
 * their word of their put, and add up to the trainer's put digests; a byte
 * flipped in a copy is caught on the rank holding it and named; a plan whose
 * copies cut a put inside a word, overlap, or land bytes twice is verified
 * by segment instead (off). On the landing rank, the puts' own sums are
 * compared, or, where one brought none, the chunk is digested at the check. */
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "engine_side/target_puts.h"
#include "tests/test.h"

#define LEN 37

static wsync_tput_t tputs[2] = {
    {.id = 0, .src_rank = 0, .land_rank = 0, .chunk = 0, .dst_off = 0, .len = 24},
    {.id = 1, .src_rank = 1, .land_rank = 0, .chunk = 0, .dst_off = 24, .len = 13},
};
static wsync_tchunk_t chunk = {.land_rank = 0, .first_put = 0, .nputs = 2, .first_copy = 0, .ncopies = 2};
/* rank 1's image: source bytes [16, 37) at 0, [0, 16) at 64 */
static wsync_tcopy_t copies[3] = {
    {.chunk = 0, .from_rank = 0, .from_off = 16, .to_rank = 1, .to_off = 0, .len = 21},
    {.chunk = 0, .from_rank = 0, .from_off = 0, .to_rank = 1, .to_off = 64, .len = 16},
    {.chunk = 0, .from_rank = 0, .from_off = 0, .to_rank = 0, .to_off = 40, .len = 8},
};

static wsync_node_plan_t plan(size_t ncopies)
{
    chunk.ncopies = ncopies;
    return (wsync_node_plan_t){.local_ranks = 2,
                               .world = 2,
                               .nputs = 2,
                               .puts = tputs,
                               .nchunks = 1,
                               .chunks = &chunk,
                               .ncopies = ncopies,
                               .copies = copies};
}

/* The trainer rank's answer: the digest of each of its puts. */
static void answer(recv_tputs_t *t, int src, const char *source)
{
    wsync_pull_reply_t rep = {0};
    uint32_t id = (uint32_t)src;
    uint64_t d = wsync_digest(source + tputs[src].dst_off, tputs[src].len, tputs[src].dst_off);
    rep.puts = json_object();
    rep.nputs = 1;
    rep.put_ids = &id;
    rep.put_digests = &d;
    CHECK_OK(recv_tputs_answer(t, src, &rep));
    json_decref(rep.puts);
}

/* Rank 1 holding `image`: its copies summed, both answers in, checked. */
static wsync_status_t rank1_check(const char *source, const char *image)
{
    wsync_node_plan_t np = plan(2);
    wsync_receiver_t r;
    wsync_target_t tg;
    wsync_target_t *tgs[2] = {&tg, &tg};
    recv_tlayout_t tl;
    recv_pull_t p;
    recv_tputs_t t;
    wsync_status_t st;
    memset(&r, 0, sizeof(r));
    memset(&tg, 0, sizeof(tg));
    memset(&tl, 0, sizeof(tl));
    memset(&p, 0, sizeof(p));
    r.engine_id = "e9";
    tl.tg = tgs;
    p.r = &r;
    p.v = 3;
    CHECK_OK(recv_tputs_begin(&t, &np, 1, 1));
    CHECK_EQ(t.on, 1);
    recv_tputs_copied(&t, 0);
    answer(&t, 0, source);
    answer(&t, 1, source);
    st = recv_tputs_check(&t, &p, &tl, &wsync_mem_host, NULL, image);
    recv_tputs_end(&t);
    return st;
}

static void copied_parts_add_up_to_the_put_digests(void)
{
    char source[LEN], image[128];
    wsync_fill_pattern(source, LEN, 0, 11);
    memset(image, 0, sizeof(image));
    memcpy(image, source + 16, 21);
    memcpy(image + 64, source, 16);
    CHECK_OK(rank1_check(source, image));
    image[70] ^= 0x10; /* put 0's byte 6, copied in at 70 */
    CHECK_FAILS(rank1_check(source, image), WSYNC_ERR_DIGEST, "failed verification on engine e9 rank 1");
    CHECK_FAILS(rank1_check(source, image), WSYNC_ERR_DIGEST, "from trainer rank 0");
    image[70] ^= 0x10;
    image[20] ^= 0x01; /* put 1's byte 12 (its last, a part of a word) */
    CHECK_FAILS(rank1_check(source, image), WSYNC_ERR_DIGEST, "from trainer rank 1");
}

static size_t units(const recv_pull_t *p, uint32_t c, size_t *first)
{
    *first = 0;
    return 2;
}

static uint64_t unit_off(const recv_pull_t *p, size_t u)
{
    return tputs[u].dst_off;
}

static int unit_at(const recv_pull_t *p, uint32_t id, uint32_t *chunk_of, uint64_t *len)
{
    *chunk_of = tputs[id].chunk;
    *len = tputs[id].len;
    return 1;
}

/* Rank 0, where the chunk lands in `image`: put 0 brought its sum along
 * (`sum0`), put 1 too with `both` (the sum of its bytes in image), else
 * none, and then the chunk is digested whole: as it lands with `now` (host
 * memory, the image passed), else at the check. */
static wsync_status_t rank0_check(const char *source, const char *image, uint64_t sum0, int both, int now)
{
    static const recv_pull_ops_t ops = {.chunk_units = units, .unit_off = unit_off, .unit_at = unit_at};
    wsync_node_plan_t np = plan(2);
    wsync_receiver_t r;
    wsync_target_t tg;
    wsync_target_t *tgs[2] = {&tg, &tg};
    recv_tlayout_t tl;
    recv_pull_t p;
    recv_verify_t ver;
    recv_tputs_t t;
    uint64_t put_sum[2] = {sum0, wsync_digest_sum(image + 24, 13, 24)};
    unsigned char has[2] = {1, (unsigned char)both};
    wsync_status_t st;
    memset(&r, 0, sizeof(r));
    memset(&tg, 0, sizeof(tg));
    memset(&tl, 0, sizeof(tl));
    memset(&p, 0, sizeof(p));
    memset(&ver, 0, sizeof(ver));
    r.engine_id = "e9";
    tl.tg = tgs;
    p.r = &r;
    p.v = 3;
    p.ops = &ops;
    wsync_digest_range_t rg[2];
    ver.put_sum = put_sum;
    ver.has_put_sum = has;
    ver.rg = rg; /* one chunk's ranges (recv_verify_begin's scratch) */
    CHECK_OK(recv_tputs_begin(&t, &np, 0, 1));
    CHECK_EQ(t.on, 1);
    CHECK_OK(recv_tputs_landed(&t, &p, &ver, 0, &wsync_mem_host, NULL, now ? image : NULL));
    CHECK_EQ(t.state[0], both || now ? TPUTS_SUMMED : TPUTS_LANDED_RAW);
    answer(&t, 0, source);
    answer(&t, 1, source);
    st = recv_tputs_check(&t, &p, &tl, &wsync_mem_host, NULL, image);
    recv_tputs_end(&t);
    return st;
}

static void landed_chunks_are_checked_by_their_sums_or_digested(void)
{
    char source[LEN], image[LEN];
    int now;
    for (now = 0; now < 2; now++) { /* digested at the check, or as the chunk landed */
        wsync_fill_pattern(source, LEN, 0, 12);
        memcpy(image, source, LEN);
        CHECK_OK(rank0_check(source, image, wsync_digest_sum(source, 24, 0), 1, now));
        CHECK_OK(rank0_check(source, image, 5, 0, now)); /* a put without its sum: the chunk digested whole */
        CHECK_FAILS(rank0_check(source, image, 5, 1, now), WSYNC_ERR_DIGEST,
                    "from trainer rank 0) failed verification on engine e9 rank 0");
        image[30] ^= 4; /* put 1's bytes as they landed */
        CHECK_FAILS(rank0_check(source, image, wsync_digest_sum(source, 24, 0), 1, now), WSYNC_ERR_DIGEST,
                    "from trainer rank 1");
        CHECK_FAILS(rank0_check(source, image, wsync_digest_sum(source, 24, 0), 0, now), WSYNC_ERR_DIGEST,
                    "from trainer rank 1");
        image[30] ^= 4;
        image[3] ^= 1; /* put 0's bytes, no sums brought: caught by the digest either way */
        CHECK_FAILS(rank0_check(source, image, 5, 0, now), WSYNC_ERR_DIGEST, "from trainer rank 0");
    }
}

static void answers_are_checked(void)
{
    wsync_node_plan_t np = plan(2);
    wsync_pull_reply_t rep = {0};
    recv_tputs_t t;
    uint32_t id = 1;
    uint64_t d = 7;
    CHECK_OK(recv_tputs_begin(&t, &np, 1, 1));
    rep.puts = json_object();
    rep.nputs = 1;
    rep.put_ids = &id;
    rep.put_digests = &d;
    CHECK_FAILS(recv_tputs_answer(&t, 0, &rep), WSYNC_ERR_PEER, "put 1, which it does not send");
    id = 9;
    CHECK_FAILS(recv_tputs_answer(&t, 1, &rep), WSYNC_ERR_PEER, "put 9, which is none");
    json_decref(rep.puts);
    rep.puts = NULL; /* an older trainer rank: segments instead */
    CHECK_OK(recv_tputs_answer(&t, 1, &rep));
    CHECK_EQ(t.on, 0);
    recv_tputs_end(&t);
}

/* Whether rank `me` verifies by put with copy 0 and 1 as given. */
static int on_with(int me, size_t ncopies, uint64_t split, uint64_t first_len)
{
    wsync_node_plan_t np = plan(ncopies);
    recv_tputs_t t;
    int on;
    copies[0].from_off = split;
    copies[0].len = LEN - split;
    copies[1].len = first_len;
    CHECK_OK(recv_tputs_begin(&t, &np, me, 1));
    on = t.on;
    recv_tputs_end(&t);
    copies[0].from_off = 16;
    copies[0].len = 21;
    copies[1].len = 16;
    return on;
}

static void plans_that_do_not_tile_are_off(void)
{
    wsync_node_plan_t np = plan(2);
    recv_tputs_t t;
    CHECK_EQ(on_with(1, 2, 16, 16), 1);
    CHECK_EQ(on_with(0, 2, 16, 16), 1);        /* the landing rank: its puts' own sums */
    CHECK_EQ(on_with(1, 2, 8, 8), 1);          /* cut on another word */
    CHECK_EQ(on_with(1, 2, 12, 12), 0);        /* inside a word of put 0 */
    CHECK_EQ(on_with(1, 2, 16, 20), 0);        /* the copies overlap */
    CHECK_EQ(on_with(1, 2, 20, 20), 0);        /* inside a word, contiguous */
    CHECK_EQ(on_with(0, 3, 16, 16), 0);        /* rank 0 holds bytes of its chunk twice */
    CHECK_OK(recv_tputs_begin(&t, &np, 1, 0)); /* not allowed (in place into the caller's tensors ...) */
    CHECK_EQ(t.on, 0);
    recv_tputs_end(&t);
}

int main(void)
{
    RUN(copied_parts_add_up_to_the_put_digests);
    RUN(landed_chunks_are_checked_by_their_sums_or_digested);
    RUN(answers_are_checked);
    RUN(plans_that_do_not_tile_are_off);
    TEST_EXIT();
}
