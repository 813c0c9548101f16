/* pull_watch_test.c: what a failed pull says (engine_side/pull_watch.c), the
 * same words for a whole-image fetch ("pieces") and a node of targets
 * ("puts"): what happened, the version, the chunks in, the trainer ranks
 * whose units of a chunk asked for here had not landed, the local ranks
 * whose chunks had not landed, the relay the units came from, the fetch's
 * own clause, the trainer ranks that had not answered. The expected text is
 * written out here from the toy plan, not computed by the module. */
#include <stdio.h>
#include <string.h>

#include "engine_side/pull.h"
#include "tests/test.h"

/* Toy plan: chunk c holds units 2c and 2c+1; unit u comes from trainer rank
 * u % 3; chunks 0 and 2 land here, 1 and 3 on local rank 1. */
static size_t toy_units(const recv_pull_t *p, uint32_t c, size_t *first)
{
    *first = 2 * (size_t)c;
    return 2;
}

static int toy_src(const recv_pull_t *p, size_t u)
{
    return (int)(u % 3);
}

static int toy_land(const recv_pull_t *p, uint32_t c)
{
    return c % 2 ? 1 : 0;
}

static void toy_more(const recv_pull_t *p, char *out, size_t len)
{
    snprintf(out, len, "; and the toy's own clause");
}

static void message_for(const char *unit, int more, char *out, size_t len)
{
    const recv_pull_ops_t ops = {.unit = unit,
                                 .chunk_units = toy_units,
                                 .unit_src = toy_src,
                                 .land_rank = toy_land,
                                 .waiting_more = more ? toy_more : NULL};
    static const uint8_t land[4] = {0, 1, 0, 1};
    uint32_t remaining[4] = {0, 0, 1, 0}, pending[1] = {3};
    unsigned char mine[1] = {0x05};
    recv_request_t reqs[3];
    wsync_receiver_t r;
    char id[] = "e-test";
    recv_pull_t p = {.ops = &ops,
                     .r = &r,
                     .v = 7,
                     .me = 0,
                     .world = 3,
                     .nchunks = 4,
                     .land = land,
                     .remaining = remaining,
                     .mine = mine,
                     .pending = pending,
                     .npending = 1,
                     .ndone = 2,
                     .nwant = 3,
                     .reqs = reqs};
    memset(&r, 0, sizeof(r));
    memset(reqs, 0, sizeof(reqs));
    r.engine_id = id;
    reqs[0].started = reqs[0].done = 1; /* answered */
    reqs[2].started = 1;                /* not yet */
    p.relay.on = 1;
    snprintf(p.relay.id, sizeof(p.relay.id), "n0");
    snprintf(p.relay.addr, sizeof(p.relay.addr), "10.0.0.1:7000");
    CHECK_EQ(recv_pull_fail(&p, WSYNC_ERR_PEER, "trainer rank 2 at 10.0.0.9:5000: peer closed"), WSYNC_ERR_PEER);
    snprintf(out, len, "%s", wsync_last_error());
}

static void whole_image_and_targets_say_the_same(void)
{
    char got[1024];
    message_for("pieces", 0, got, sizeof(got));
    CHECK_STR(got, "trainer rank 2 at 10.0.0.9:5000: peer closed; version 7: 2 of 3 chunks in on engine e-test "
                   "rank 0; pieces missing from trainer rank 1, 2; still waiting for chunks landing on local "
                   "rank 1 (stalled or stopped?); pieces come from the relay of engine n0 at 10.0.0.1:7000; no "
                   "answer yet from trainer rank 2");
    message_for("puts", 0, got, sizeof(got));
    CHECK_STR(got, "trainer rank 2 at 10.0.0.9:5000: peer closed; version 7: 2 of 3 chunks in on engine e-test "
                   "rank 0; puts missing from trainer rank 1, 2; still waiting for chunks landing on local "
                   "rank 1 (stalled or stopped?); puts come from the relay of engine n0 at 10.0.0.1:7000; no "
                   "answer yet from trainer rank 2");
}

static void the_fetchs_own_clause_comes_before_the_answers(void)
{
    char got[1024];
    message_for("pieces", 1, got, sizeof(got));
    CHECK(strstr(got, "10.0.0.1:7000; and the toy's own clause; no answer yet from trainer rank 2") != NULL);
}

int main(void)
{
    RUN(whole_image_and_targets_say_the_same);
    RUN(the_fetchs_own_clause_comes_before_the_answers);
    TEST_EXIT();
}
