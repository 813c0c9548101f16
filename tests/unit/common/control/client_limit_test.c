/* client_limit_test.c: connections counted per address (IPv4 and IPv6 apart,
 * forgotten at the last close), and the request deadline: a connection
 * still receiving past it is shut down (its peer reads the end), one that
 * delivered its request (an answer pending, a long poll) is left alone. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/test.h"
#include "common/control/client_limit.h"

static void test_counts_per_address(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET}, b = {.sin_family = AF_INET};
    struct sockaddr_in6 c = {.sin6_family = AF_INET6};
    ctl_clients_t cl = {0};
    char name[64];
    inet_pton(AF_INET, "10.0.0.7", &a.sin_addr);
    inet_pton(AF_INET, "10.0.0.8", &b.sin_addr);
    inet_pton(AF_INET6, "::ffff:10.0.0.7", &c.sin6_addr);
    CHECK_EQ(ctl_clients_add(&cl, (struct sockaddr *)&a, 1), 1);
    CHECK_EQ(ctl_clients_add(&cl, (struct sockaddr *)&a, 1), 2);
    CHECK_EQ(ctl_clients_add(&cl, (struct sockaddr *)&b, 1), 1);
    CHECK_EQ(ctl_clients_add(&cl, (struct sockaddr *)&c, 1), 1);
    CHECK_EQ(ctl_clients_open(&cl, (struct sockaddr *)&a), 2);
    CHECK_EQ(ctl_clients_add(&cl, (struct sockaddr *)&a, -1), 1);
    CHECK_EQ(ctl_clients_add(&cl, (struct sockaddr *)&a, -1), 0);
    CHECK_EQ(ctl_clients_open(&cl, (struct sockaddr *)&a), 0);
    CHECK_EQ(cl.n, 2); /* a forgotten */
    CHECK_EQ(ctl_clients_add(&cl, NULL, 1), 0);
    ctl_clients_name((struct sockaddr *)&b, name, sizeof(name));
    CHECK_STR(name, "10.0.0.8");
    ctl_clients_free(&cl);
}

static void test_deadline_shuts_down_only_receiving(void)
{
    ctl_conns_t cs = {0};
    ctl_conn_track_t *slow, *answered;
    int s1[2], s2[2];
    char ch;
    const uint64_t sec = 1000000000ULL;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s1) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, s2) == 0);
    slow = ctl_conns_open(&cs, s1[1], 0);
    answered = ctl_conns_open(&cs, s2[1], 0);
    CHECK(slow && answered);
    CHECK_EQ(cs.n, 2);
    ctl_conns_receiving(answered, 0, 1 * sec); /* its request is in: no deadline */
    CHECK_EQ(ctl_conns_expire(&cs, 29 * sec, 30 * sec), 0);
    CHECK_EQ(ctl_conns_expire(&cs, 31 * sec, 30 * sec), 1);
    CHECK_EQ(read(s1[0], &ch, 1), 0);                       /* the peer reads the end */
    CHECK_EQ(ctl_conns_expire(&cs, 62 * sec, 30 * sec), 0); /* once, and never the answered one */
    ctl_conns_receiving(answered, 1, 100 * sec);            /* answered: the next request's deadline */
    CHECK_EQ(ctl_conns_expire(&cs, 129 * sec, 30 * sec), 0);
    CHECK_EQ(ctl_conns_expire(&cs, 131 * sec, 30 * sec), 1);
    ctl_conns_close(&cs, slow);
    ctl_conns_close(&cs, answered);
    ctl_conns_close(&cs, NULL);
    CHECK(cs.head == NULL && cs.n == 0);
    close(s1[0]), close(s1[1]), close(s2[0]), close(s2[1]);
}

int main(void)
{
    RUN(test_counts_per_address);
    RUN(test_deadline_shuts_down_only_receiving);
    TEST_EXIT();
}
