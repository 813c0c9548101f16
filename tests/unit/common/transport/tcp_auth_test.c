/* tcp_auth_test.c: the tcp transport with a token. A receiver's region is
 * written only by a sender that proved the same token: a sender with
 * another token or none cannot connect (the error says what to do), and a
 * client that writes raw puts at the port (the pre-handshake hello, or a
 * handshake without proof, with the receiver's real nonce and region) is
 * dropped with the region byte for byte unchanged and nothing LANDED. The
 * attacker is a thread of raw sockets (not a forked child: valgrind would
 * count the dead parent threads' libcrypto state as the child's leak). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/transport/tcp_wire.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "tests/test.h"

#define T (&wsync_transport_tcp)
#define LEN (1u << 20)

static wsync_transport_config_t cfg(const wsync_auth_t *a)
{
    return (wsync_transport_config_t){.bind_host = "127.0.0.1",
                                      .conns_per_peer = 2,
                                      .device = -1,
                                      .timeout_ms = 5000,
                                      .auth = a};
}

static int port_of(const tcp_addr_t *a)
{
    const char *colon = strrchr(a->hostport, ':');
    return colon ? atoi(colon + 1) : -1;
}

/* An attacker with raw sockets only (its own thread): puts of 0xEE over
 * the whole region, both ways; 0, or where it could not even try. */
typedef struct attack {
    const tcp_addr_t *a;
    uint32_t region;
    int rc;
} attack_t;

static int raw_attack(const tcp_addr_t *a, uint32_t region)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port_of(a))};
    unsigned char hello[TCP_HELLO_LEN], hdr[TCP_HDR_LEN], hs[WSYNC_HS_HELLO_LEN], ch[WSYNC_HS_CHALLENGE_LEN];
    tcp_hello_t h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .sender = 0, .nonce = a->nonce};
    tcp_hdr_t ph = {.magic = TCP_MAGIC, .version = TCP_VERSION, .sender = 0, .region = region, .len = LEN, .tag = 9};
    wsync_hs_hello_t nh = {.purpose = WSYNC_HS_TCP, .payload_len = TCP_HELLO_LEN};
    unsigned char *junk = malloc(LEN);
    int i;
    memset(junk, 0xEE, LEN);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    tcp_hello_encode(&h, hello);
    tcp_hdr_encode(&ph, hdr);
    wsync_hs_hello_encode(&nh, hs);
    for (i = 0; i < 2; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        char sink[4096];
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
            return 2;
        if (i == 1) { /* the handshake's hello, flags 0: no proof */
            if (wsync_recv_all(fd, ch, sizeof(ch), 0) != 0)
                return 3;
            (void)!send(fd, hs, sizeof(hs), MSG_NOSIGNAL);
        }
        (void)!send(fd, hello, sizeof(hello), MSG_NOSIGNAL);
        (void)!send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL);
        (void)!send(fd, junk, LEN, MSG_NOSIGNAL);
        while (recv(fd, sink, sizeof(sink), 0) > 0)
            ;
        close(fd);
    }
    free(junk);
    return 0;
}

static void *attack_main(void *arg)
{
    attack_t *at = arg;
    at->rc = raw_attack(at->a, at->region);
    return NULL;
}

static void only_a_sender_with_the_token_writes_the_region(void)
{
    wsync_auth_t good, other, none;
    wsync_transport_config_t rc, sc;
    wsync_transport_t *rx = NULL, *tx = NULL;
    wsync_region_t *reg = NULL, *src = NULL;
    wsync_blob_t addr, key, skey;
    wsync_conn_t *conn = NULL;
    wsync_completion_t c[16];
    unsigned char *image, *want, *s;
    tcp_addr_t a;
    tcp_key_t k;
    int n = 0, i, landed = 0;

    wsync_auth_init(&good, "s3cret");
    wsync_auth_init(&other, "guess");
    wsync_auth_init(&none, "");
    rc = cfg(&good);
    image = malloc(LEN);
    want = malloc(LEN);
    s = malloc(LEN);
    wsync_fill_pattern(image, LEN, 0, 5);
    memcpy(want, image, LEN);
    wsync_fill_pattern(s, LEN, 0, 6);
    CHECK_OK(T->open(&rc, &rx));
    CHECK_OK(T->reg(rx, image, LEN, WSYNC_MEM_HOST, &reg, &key));
    CHECK_OK(T->listen(rx, &addr));
    tcp_addr_decode(addr.data, &a);
    tcp_key_decode(key.data, &k);

    sc = cfg(&other);
    CHECK_OK(T->open(&sc, &tx));
    CHECK_FAILS(T->connect(tx, &addr, 1, &conn), WSYNC_ERR_AUTH,
                "proof does not match: the trainer's token differs from the engine's");
    T->close(tx);
    sc = cfg(&none);
    CHECK_OK(T->open(&sc, &tx));
    CHECK_FAILS(T->connect(tx, &addr, 1, &conn), WSYNC_ERR_AUTH,
                "no proof: the trainer has no token but the engine requires one; set the same --token-file");
    T->close(tx);

    {
        attack_t at = {.a = &a, .region = k.region, .rc = -1};
        pthread_t th;
        CHECK_EQ(pthread_create(&th, NULL, attack_main, &at), 0);
        pthread_join(th, NULL);
        CHECK_EQ(at.rc, 0);
    }
    CHECK(memcmp(image, want, LEN) == 0);
    do {
        CHECK_OK(T->poll(rx, c, 16, &n, 200));
        for (i = 0; i < n; i++)
            landed += c[i].kind == WSYNC_COMPLETION_LANDED;
    } while (n > 0);
    CHECK_EQ(landed, 0);

    /* The genuine sender writes it (so the check above could see a write). */
    sc = cfg(&good);
    CHECK_OK(T->open(&sc, &tx));
    CHECK_OK(T->reg(tx, s, LEN, WSYNC_MEM_HOST, &src, &skey));
    CHECK_OK(T->connect(tx, &addr, 1, &conn));
    CHECK_OK(T->put(conn, src, 0, &key, 0, LEN, 77));
    for (i = 0; i < 200 && !landed; i++) {
        int j;
        CHECK_OK(T->poll(rx, c, 16, &n, 100));
        for (j = 0; j < n; j++)
            landed += c[j].kind == WSYNC_COMPLETION_LANDED && c[j].tag == 77;
    }
    CHECK_EQ(landed, 1);
    CHECK(memcmp(image, s, LEN) == 0);
    T->disconnect(conn);
    T->close(tx);
    T->close(rx);
    free(image);
    free(want);
    free(s);
}

int main(void)
{
    RUN(only_a_sender_with_the_token_writes_the_region);
    TEST_EXIT();
}
