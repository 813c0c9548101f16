/* requests_test.c: pull requests over kept connections (engine_side/requests.c
 * against common/pull_port.c, with a token). Three requests in turn to one
 * pull port go over one connection (the kept descriptor and its local port
 * stay the same; the port's serve function sees the three, in order); a
 * port that restarted on the same port meanwhile closed the kept
 * connection, and the next request still gets its answer over a new one;
 * a request without the token's proof is refused however it is sent. */
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/net/auth.h"
#include "common/pull_port.h"
#include "common/util.h"
#include "engine_side/receiver_internal.h"
#include "tests/test.h"

static int served; /* atomic: requests the serve function answered */

static void serve(void *ctx, const json_t *req, json_t *reply)
{
    json_object_set_new(reply, "ok", json_true());
    json_object_set_new(reply, "echo", json_incref(json_object_get(req, "n")));
    json_object_set_new(reply, "served", json_integer(__atomic_add_fetch(&served, 1, __ATOMIC_RELAXED)));
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
    ok = q.status == WSYNC_OK && json_integer_value(json_object_get(q.reply, "echo")) == n;
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

int main(void)
{
    RUN(requests_share_one_connection_and_survive_a_restart);
    TEST_EXIT();
}
