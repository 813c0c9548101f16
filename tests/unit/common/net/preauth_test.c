/* preauth_test.c: the pre-auth caps (common/net/preauth.h): a peer never
 * holds more than its share, a newcomer takes the place of a silent one
 * only once it has waited, a ticket frees only its own use, an evicted
 * connection's socket is shut down (its blocked reader wakes), and the log
 * limiter writes a few lines per interval, then one with the count it held
 * back. */
#include <sys/socket.h>
#include <unistd.h>

#include "common/net/preauth.h"
#include "tests/test.h"

#define MS 1000000ULL

static void per_peer_cap_turns_newcomers_away(void)
{
    wsync_preauth_t pa;
    wsync_preauth_ticket_t t[8], x;
    int i;
    CHECK(wsync_preauth_init(&pa, 8, 3, 250) == WSYNC_OK);
    for (i = 0; i < 3; i++)
        CHECK(wsync_preauth_enter(&pa, "10.0.0.9", -1, 1000 * MS, &t[i]) == 1);
    /* The fourth from that address, at once: none has waited 250 ms. */
    CHECK(wsync_preauth_enter(&pa, "10.0.0.9", -1, 1100 * MS, &x) == 0);
    /* Another address still gets in. */
    CHECK(wsync_preauth_enter(&pa, "10.0.0.5", -1, 1100 * MS, &t[3]) == 1);
    CHECK_EQ(wsync_preauth_pending(&pa), 4);
    CHECK_EQ(pa.refused, 1);
    wsync_preauth_leave(&pa, t[0]);
    CHECK(wsync_preauth_enter(&pa, "10.0.0.9", -1, 1100 * MS, &t[0]) == 1);
    wsync_preauth_destroy(&pa);
}

static void total_cap_holds_across_addresses(void)
{
    wsync_preauth_t pa;
    wsync_preauth_ticket_t t;
    char peer[32];
    int i, in = 0;
    CHECK(wsync_preauth_init(&pa, 16, 2, 250) == WSYNC_OK);
    for (i = 0; i < 100; i++) {
        snprintf(peer, sizeof(peer), "10.0.%d.%d", i / 7, i % 7);
        in += wsync_preauth_enter(&pa, peer, -1, 5000 * MS, &t);
    }
    CHECK_EQ(in, 16);
    CHECK_EQ(wsync_preauth_pending(&pa), 16);
    wsync_preauth_destroy(&pa);
}

static void silent_one_gives_way_and_is_shut_down(void)
{
    wsync_preauth_t pa;
    wsync_preauth_ticket_t old, fresh, newer;
    int sv[2];
    char c;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(wsync_preauth_init(&pa, 4, 1, 250) == WSYNC_OK);
    CHECK(wsync_preauth_enter(&pa, "uid 65534", sv[0], 0, &old) == 1);
    CHECK(wsync_preauth_enter(&pa, "uid 65534", -1, 100 * MS, &fresh) == 0); /* 100 ms: not yet */
    CHECK(wsync_preauth_enter(&pa, "uid 65534", -1, 300 * MS, &fresh) == 1); /* 300 ms: its place */
    CHECK_EQ(pa.evicted, 1);
    CHECK_EQ(wsync_preauth_pending(&pa), 1);
    /* The evicted socket reads end-of-file at once (its thread would wake). */
    CHECK(read(sv[0], &c, 1) == 0);
    /* The evicted connection's late leave frees nothing: the newcomer stays. */
    wsync_preauth_leave(&pa, old);
    CHECK_EQ(wsync_preauth_pending(&pa), 1);
    CHECK(wsync_preauth_enter(&pa, "uid 65534", -1, 310 * MS, &newer) == 0);
    wsync_preauth_leave(&pa, fresh);
    CHECK_EQ(wsync_preauth_pending(&pa), 0);
    wsync_preauth_leave(&pa, fresh); /* twice: harmless */
    CHECK_EQ(wsync_preauth_pending(&pa), 0);
    wsync_preauth_destroy(&pa);
    close(sv[0]);
    close(sv[1]);
}

static void bad_caps_refused(void)
{
    wsync_preauth_t pa;
    CHECK(wsync_preauth_init(&pa, 0, 1, 250) == WSYNC_ERR_INVALID);
    CHECK(strstr(wsync_last_error(), "at least 1") != NULL);
    wsync_preauth_destroy(&pa); /* after a failed init: harmless */
}

static void log_limiter_bursts_then_counts(void)
{
    wsync_loglimit_t l;
    uint64_t held = 99, t;
    int lines = 0, i;
    wsync_loglimit_init(&l, 1000, 3);
    /* A few refusals each get their line. */
    for (i = 0; i < 3; i++) {
        CHECK(wsync_loglimit_take(&l, 5000 * MS + (uint64_t)i * MS, &held) == 1);
        CHECK_EQ(held, 0);
    }
    /* 400 more within the next 1.5 s: the first 1 s window is spent, the
     * next window's first line counts those held back, then 2 more. */
    for (t = 0; t < 400; t++) {
        uint64_t h = 0;
        if (wsync_loglimit_take(&l, 5000 * MS + (t + 1) * 1500 * MS / 400, &h)) {
            if (lines++ == 0)
                held = h;
        }
    }
    CHECK_EQ(lines, 3);
    CHECK(held >= 260 && held <= 270); /* the ~266 that came in the rest of the first second */
    wsync_loglimit_destroy(&l);
}

int main(void)
{
    RUN(per_peer_cap_turns_newcomers_away);
    RUN(total_cap_holds_across_addresses);
    RUN(silent_one_gives_way_and_is_shut_down);
    RUN(bad_caps_refused);
    RUN(log_limiter_bursts_then_counts);
    TEST_EXIT();
}
