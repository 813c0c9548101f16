/* requests_test.c: pull requests over kept connections (engine_side/requests.c
 * against common/proto/pull_port.c, with a token). Three requests in turn to one
 * pull port go over one connection (the kept descriptor and its local port
 * stay the same; the port's serve function sees the three, in order); a
 * port that restarted on the same port meanwhile closed the kept
 * connection, and the next request still gets its answer over a new one;
 * a request without the token's proof is refused however it is sent. A
 * request to an address where nothing listens any more fails at once, not
 * at its deadline; a relay's refusal names the engine that serves it; a
 * malformed reply is refused naming who sent it and the field. */
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/net/auth.h"
#include "common/proto/pull_port.h"
#include "common/base/util.h"
#include "engine_side/requests.h"
#include "engine_side/relay.h"
#include "tests/test.h"

static int served; /* atomic: requests the serve function answered */

/* Answers as a trainer rank would, with the request's n as its piece count. */
static void serve(void *ctx, const json_t *req, json_t *reply)
{
    wsync_pull_reply_t r = {.pieces = (uint64_t)json_integer_value(json_object_get(req, "n")),
                            .bytes = (uint64_t)__atomic_add_fetch(&served, 1, __ATOMIC_RELAXED)};
    wsync_pull_reply_write(&r, reply);
}

/* Answers {"ok": true} without the counts a reply must carry. */
static void serve_malformed(void *ctx, const json_t *req, json_t *reply)
{
    json_object_set_new(reply, "ok", json_true());
}

static int local_port(int fd)
{
    struct sockaddr_in a;
    socklen_t n = sizeof(a);
    return getsockname(fd, (struct sockaddr *)&a, &n) == 0 ? ntohs(a.sin_port) : -1;
}

/* One request with {"n": n}; its answer's echo must be n. */
static int ask(recv_pull_conns_t *pc, const wsync_auth_t *auth, const char *addr, int n)
{
    recv_request_t q = {0};
    int ok;
    if (recv_request_start(&q, pc, auth, 0, addr, json_pack("{s:i}", "n", n), wsync_now_ns() + 10000000000ULL) !=
        WSYNC_OK)
        return 0;
    while (!recv_request_done(&q))
        usleep(200);
    ok = q.status == WSYNC_OK && q.reply.pieces == (uint64_t)n && q.reply.error[0] == '\0';
    if (!ok)
        fprintf(stderr, "  request %d: %s\n", n, q.error);
    recv_request_end(&q);
    return ok;
}

static void requests_share_one_connection_and_survive_a_restart(void)
{
    wsync_auth_t auth, none;
    wsync_pull_port_t *pp = NULL;
    recv_pull_conns_t pc;
    char addr[64];
    int fd, lport, port;
    CHECK_OK(wsync_auth_init(&auth, "requests-test-token"));
    CHECK_OK(wsync_auth_init(&none, NULL));
    recv_pull_conns_init(&pc);
    CHECK_OK(wsync_pull_port_start("127.0.0.1:0", &auth, "test pull port", serve, NULL, &pp));
    port = wsync_pull_port_number(pp);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);

    CHECK(ask(&pc, &auth, addr, 1));
    CHECK_EQ(pc.n, 1);
    fd = pc.c[0].fd;
    lport = local_port(fd);
    CHECK(ask(&pc, &auth, addr, 2));
    CHECK(ask(&pc, &auth, addr, 3));
    CHECK(pc.n == 1 && pc.c[0].fd == fd && local_port(pc.c[0].fd) == lport); /* the same connection */
    CHECK_EQ(__atomic_load_n(&served, __ATOMIC_RELAXED), 3);

    /* The port goes and comes back on the same port: the kept connection is
     * closed by then, and the next request opens a new one. */
    wsync_pull_port_stop(pp);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    CHECK_OK(wsync_pull_port_start(addr, &auth, "test pull port", serve, NULL, &pp));
    CHECK(ask(&pc, &auth, addr, 4));
    CHECK(pc.n == 1 && local_port(pc.c[0].fd) != lport);
    CHECK_EQ(__atomic_load_n(&served, __ATOMIC_RELAXED), 4);

    /* Without the token: refused on a connection of its own (kept ones are
     * looked up by address and proved the token themselves). */
    {
        recv_pull_conns_t other;
        recv_pull_conns_init(&other);
        CHECK(!ask(&other, &none, addr, 5));
        CHECK_EQ(other.n, 0);
        pthread_mutex_destroy(&other.lock);
    }
    CHECK_EQ(__atomic_load_n(&served, __ATOMIC_RELAXED), 4);
    recv_pull_conns_drop(&pc);
    pthread_mutex_destroy(&pc.lock);
    wsync_pull_port_stop(pp);
}

/* One request to `addr` as `rank` (-1: a relay) with a 10 s deadline; its
 * status, its error into err, and how long it took. */
static wsync_status_t request_once(const wsync_auth_t *auth, int rank, const char *addr, char *err, size_t len,
                                   double *took)
{
    recv_request_t q = {0};
    wsync_status_t st;
    double t0 = wsync_now_s();
    if (rank < 0) /* as fetch_relay.c names it */
        snprintf(q.who, sizeof(q.who), "relay of engine relay-test-engine");
    if (recv_request_start(&q, NULL, auth, rank, addr, json_pack("{s:i}", "n", 1),
                           wsync_now_ns() + 10000000000ULL) != WSYNC_OK)
        return WSYNC_ERR_INTERNAL;
    while (!recv_request_done(&q))
        usleep(1000);
    *took = wsync_now_s() - t0;
    st = q.status;
    snprintf(err, len, "%s", q.error);
    recv_request_end(&q);
    return st;
}

/* A registered address where nothing listens any more (the trainer rank
 * died): refused, and the request fails at once with the address, not at
 * its deadline 10 s later (issue 26 item 1: every attempt waited its whole
 * timeout). */
static void request_to_a_gone_peer_fails_at_once(void)
{
    wsync_auth_t none;
    wsync_pull_port_t *pp = NULL;
    char addr[64], err[512];
    double took = 0;
    CHECK_OK(wsync_auth_init(&none, NULL));
    CHECK_OK(wsync_pull_port_start("127.0.0.1:0", &none, "test pull port", serve, NULL, &pp));
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", wsync_pull_port_number(pp));
    wsync_pull_port_stop(pp);
    CHECK_EQ(request_once(&none, 1, addr, err, sizeof(err), &took), WSYNC_ERR_PEER);
    CHECK(strstr(err, "trainer rank 1") && strstr(err, addr) && strstr(err, "refused"));
    CHECK(took < 2.0);
    fprintf(stderr, "  %.3f s: %s\n", took, err);
}

/* An engine's relay port with another token: the refusal says the engine's
 * token differs from the relaying engine's, not from "the trainer's" (issue
 * 25 item 13); a plain pull request to it is told it reached a relay port. */
static void relay_refusal_names_the_relaying_engine(void)
{
    wsync_auth_t mine, other;
    recv_relay_t *rl = NULL;
    char err[512];
    double took = 0;
    CHECK_OK(wsync_auth_init(&mine, "relay-test-token"));
    CHECK_OK(wsync_auth_init(&other, "another-token"));
    CHECK_OK(relay_start("127.0.0.1", &mine, "relay-test-engine", WSYNC_MEM_HOST, -1, &rl));
    if (rl == NULL)
        return;
    CHECK_EQ(request_once(&other, -1, relay_address(rl), err, sizeof(err), &took), WSYNC_ERR_AUTH);
    fprintf(stderr, "  %s\n", err);
    CHECK(strstr(err, "the engine's token differs from the relaying engine's") != NULL);
    CHECK(strstr(err, "trainer") == NULL);
    CHECK(request_once(&mine, 0, relay_address(rl), err, sizeof(err), &took) != WSYNC_OK);
    fprintf(stderr, "  %s\n", err);
    CHECK(strstr(err, "relaying engine expects a relay pull request, this side sends a pull request") != NULL);
    relay_stop(rl);
}

/* A reply without its counts is not taken for a served pull: the request
 * fails naming who answered, where, and the field. */
static void malformed_reply_names_the_peer_and_field(void)
{
    wsync_auth_t none;
    wsync_pull_port_t *pp = NULL;
    char addr[64], err[512];
    double took = 0;
    CHECK_OK(wsync_auth_init(&none, NULL));
    CHECK_OK(wsync_pull_port_start("127.0.0.1:0", &none, "test pull port", serve_malformed, NULL, &pp));
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", wsync_pull_port_number(pp));
    CHECK_EQ(request_once(&none, 2, addr, err, sizeof(err), &took), WSYNC_ERR_PEER);
    fprintf(stderr, "  %s\n", err);
    CHECK(strstr(err, "trainer rank 2") && strstr(err, addr) && strstr(err, "field 'pieces'"));
    wsync_pull_port_stop(pp);
}

int main(void)
{
    RUN(requests_share_one_connection_and_survive_a_restart);
    RUN(request_to_a_gone_peer_fails_at_once);
    RUN(relay_refusal_names_the_relaying_engine);
    RUN(malformed_reply_names_the_peer_and_field);
    TEST_EXIT();
}
