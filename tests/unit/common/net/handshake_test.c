/* handshake_test.c: the data-plane handshake over real sockets: good
 * proofs, wrong and missing tokens, an altered request, replayed hellos and
 * answers, truncated messages, the same-uid rule on Unix sockets (a child
 * of another uid), and that the proof comparison is CRYPTO_memcmp's. HMAC
 * is checked against RFC 4231's published value. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/net/auth.h"
#include "common/net/fdpass.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "tests/test.h"

/* The library's comparisons land here (this definition interposes
 * libcrypto's): counted, and forced to "equal" when a test asks. */
static int memcmp_calls, memcmp_force_equal;
int CRYPTO_memcmp(const void *in_a, const void *in_b, size_t len)
{
    const volatile unsigned char *a = in_a, *b = in_b;
    unsigned char d = 0;
    size_t i;
    __atomic_add_fetch(&memcmp_calls, 1, __ATOMIC_RELAXED);
    for (i = 0; i < len; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return memcmp_force_equal ? 0 : d != 0;
}

static wsync_auth_t auth_of(const char *token)
{
    wsync_auth_t a;
    wsync_auth_init(&a, token);
    return a;
}

/* --- a server thread on a loopback TCP port --------------------------- */
typedef struct server {
    int lfd, port;
    wsync_auth_t auth;
    wsync_hs_purpose_t purpose;
    size_t max_payload;
    const char *reply;
    pthread_t th;
    wsync_status_t st;
    char err[512];
    unsigned char payload[256];
    size_t payload_len;
} server_t;

static void *server_main(void *arg)
{
    server_t *s = arg;
    unsigned char *payload = NULL;
    wsync_hs_t hs;
    int fd = accept(s->lfd, NULL, NULL);
    s->st = wsync_hs_serve(&hs, fd, &s->auth, s->purpose, "test client", s->max_payload, 3000, &payload,
                           &s->payload_len);
    if (s->st == WSYNC_OK) {
        memcpy(s->payload, payload, s->payload_len < sizeof(s->payload) ? s->payload_len : sizeof(s->payload));
        s->st = wsync_hs_accept(&hs, s->reply, s->reply ? strlen(s->reply) : 0);
    }
    snprintf(s->err, sizeof(s->err), "%s", s->st == WSYNC_OK ? "" : wsync_last_error());
    free(payload);
    close(fd);
    return NULL;
}

static int server_up(server_t *s, const char *token, wsync_hs_purpose_t purpose, const char *reply)
{
    memset(s, 0, sizeof(*s));
    s->auth = auth_of(token);
    s->purpose = purpose;
    s->max_payload = 200;
    s->reply = reply;
    if (wsync_tcp_listen("127.0.0.1", 0, &s->lfd, &s->port) != WSYNC_OK)
        return -1;
    return pthread_create(&s->th, NULL, server_main, s) == 0 ? 0 : -1;
}

static void server_down(server_t *s)
{
    pthread_join(s->th, NULL);
    close(s->lfd);
}

static int dial(const server_t *s)
{
    char hp[32];
    int fd = -1;
    snprintf(hp, sizeof(hp), "127.0.0.1:%d", s->port);
    return wsync_tcp_connect(hp, 3000, &fd) == WSYNC_OK ? fd : -1;
}

/* A client's whole exchange through the library. */
static wsync_status_t client(const server_t *s, const char *token, wsync_hs_purpose_t purpose, const char *payload,
                             char *reply, size_t reply_max)
{
    wsync_auth_t a = auth_of(token);
    size_t rlen = 0;
    int fd = dial(s);
    wsync_status_t st = wsync_hs_connect(fd, &a, purpose, "test server", payload, strlen(payload), 3000, reply,
                                         reply_max, &rlen);
    if (st == WSYNC_OK && reply)
        reply[rlen] = '\0';
    close(fd);
    return st;
}

/* A raw client: reads the challenge, sends `hello` (built here with `token`'s
 * proof over `proven`) followed by `sent` as the payload; returns the
 * server's FINISH status. *hello_out gets the hello bytes as sent. */
static int raw_client(const server_t *s, const char *token, const char *proven, const char *sent,
                      const unsigned char *replay_hello, unsigned char *hello_out)
{
    unsigned char ch[WSYNC_HS_CHALLENGE_LEN], hb[WSYNC_HS_HELLO_LEN], fb[WSYNC_HS_FINISH_LEN], key[32];
    wsync_auth_t a = auth_of(token);
    wsync_hs_hello_t h = {.purpose = WSYNC_HS_PULL,
                          .flags = WSYNC_HS_FLAG_TOKEN,
                          .payload_len = (uint32_t)strlen(sent)};
    wsync_hs_finish_t f;
    int fd = dial(s), status = 1;
    if (fd < 0 || wsync_recv_all(fd, ch, sizeof(ch), 0) != 0)
        goto out;
    if (replay_hello) {
        memcpy(hb, replay_hello, sizeof(hb));
    } else {
        memset(h.nonce, 0x5a, sizeof(h.nonce));
        wsync_hs_hello_encode(&h, hb);
        wsync_hs_key(&a, WSYNC_HS_PULL, key);
        wsync_hs_client_proof(key, ch, hb, proven, strlen(proven), h.proof);
        wsync_hs_hello_encode(&h, hb);
    }
    if (hello_out)
        memcpy(hello_out, hb, sizeof(hb));
    if (wsync_send_all(fd, hb, sizeof(hb)) != 0 || wsync_send_all(fd, sent, strlen(sent)) != 0)
        goto out;
    if (wsync_recv_all(fd, fb, sizeof(fb), 0) == 0 && wsync_hs_finish_decode(fb, sizeof(fb), &f) == WSYNC_OK)
        status = f.status;
out:
    if (fd >= 0)
        close(fd);
    return status;
}

static void hmac_matches_rfc4231_and_keys_depend_on_token_and_purpose(void)
{
    /* RFC 4231 test case 2: key "Jefe" (HMAC pads short keys with zeros). */
    static const unsigned char want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                           0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                           0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    unsigned char key[32] = "Jefe", out[32], k1[32], k2[32], k3[32];
    wsync_auth_part_t parts[] = {{"what do ya ", 11}, {"want for nothing?", 17}};
    wsync_auth_t a = auth_of("s3cret"), b = auth_of("s3cret"), c = auth_of("other");
    CHECK_OK(wsync_auth_mac(key, parts, 2, out));
    CHECK(memcmp(out, want, 32) == 0);
    CHECK(a.on && c.on);
    CHECK_OK(wsync_hs_key(&a, WSYNC_HS_PULL, k1));
    CHECK_OK(wsync_hs_key(&b, WSYNC_HS_PULL, k2));
    CHECK(memcmp(k1, k2, 32) == 0);
    CHECK_OK(wsync_hs_key(&a, WSYNC_HS_TCP, k2));
    CHECK(memcmp(k1, k2, 32) != 0);
    CHECK_OK(wsync_hs_key(&c, WSYNC_HS_PULL, k3));
    CHECK(memcmp(k1, k3, 32) != 0);
    unsetenv("WSYNC_TOKEN");
    wsync_settings_reload();
    CHECK(!auth_of(NULL).on);
    CHECK(!auth_of("").on);
    setenv("WSYNC_TOKEN", "s3cret", 1);
    wsync_settings_reload();
    a = auth_of(NULL);
    CHECK_OK(wsync_hs_key(&a, WSYNC_HS_PULL, k3));
    CHECK(memcmp(k1, k3, 32) == 0);
    unsetenv("WSYNC_TOKEN");
    wsync_settings_reload();
}

static void the_same_token_passes_payload_and_proven_reply(void)
{
    const char *tokens[] = {"s3cret", NULL};
    int i;
    for (i = 0; i < 2; i++) {
        server_t s;
        char reply[64] = "";
        CHECK_EQ(server_up(&s, tokens[i] ? tokens[i] : "", WSYNC_HS_PULL, "nccl-id-bytes"), 0);
        CHECK_OK(client(&s, tokens[i] ? tokens[i] : "", WSYNC_HS_PULL, "{\"version\":3}", reply, sizeof(reply) - 1));
        server_down(&s);
        CHECK_OK(s.st);
        CHECK_EQ(s.payload_len, 13);
        CHECK(memcmp(s.payload, "{\"version\":3}", 13) == 0);
        CHECK_STR(reply, "nccl-id-bytes");
    }
}

static void a_wrong_or_missing_token_is_refused_with_what_to_do(void)
{
    server_t s;
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_PULL, NULL), 0);
    CHECK_FAILS(client(&s, "guess", WSYNC_HS_PULL, "{}", NULL, 0), WSYNC_ERR_AUTH,
                "pull request refused: proof does not match: the engine's token differs from the trainer's");
    CHECK(strstr(wsync_last_error(), "set the same --token-file / WSYNC_TOKEN on both") != NULL);
    server_down(&s);
    CHECK_EQ(s.st, WSYNC_ERR_AUTH);
    CHECK(strstr(s.err, "pull request from test client refused: proof does not match") != NULL);

    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_TCP, NULL), 0);
    CHECK_FAILS(client(&s, "", WSYNC_HS_TCP, "hello", NULL, 0), WSYNC_ERR_AUTH,
                "tcp connection refused: no proof: the trainer has no token but the engine requires one");
    server_down(&s);
    CHECK_EQ(s.st, WSYNC_ERR_AUTH);

    /* A client with a token will not talk to a server without one. */
    CHECK_EQ(server_up(&s, "", WSYNC_HS_PULL, NULL), 0);
    CHECK_FAILS(client(&s, "s3cret", WSYNC_HS_PULL, "{}", NULL, 0), WSYNC_ERR_AUTH,
                "the trainer at test server has no token but this engine has one");
    server_down(&s);
    CHECK(s.st != WSYNC_OK);

    /* The wrong port: a pull request at a tcp receiver. */
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_TCP, NULL), 0);
    CHECK_FAILS(client(&s, "s3cret", WSYNC_HS_PULL, "{}", NULL, 0), WSYNC_ERR_FORMAT, "wrong address");
    server_down(&s);
    CHECK_EQ(s.st, WSYNC_ERR_PEER);
}

static void an_altered_request_and_a_replayed_hello_are_refused(void)
{
    server_t s;
    unsigned char captured[WSYNC_HS_HELLO_LEN];
    /* Proof made for one request, another one sent. */
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_PULL, NULL), 0);
    CHECK_EQ(raw_client(&s, "s3cret", "{\"addr\":\"mine\"}", "{\"addr\":\"evil\"}", NULL, NULL), WSYNC_ERR_AUTH);
    server_down(&s);
    CHECK(strstr(s.err, "proof does not match") != NULL);
    /* A genuine exchange, captured... */
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_PULL, NULL), 0);
    CHECK_EQ(raw_client(&s, "s3cret", "{\"v\":1}", "{\"v\":1}", NULL, captured), WSYNC_OK);
    server_down(&s);
    CHECK_OK(s.st);
    /* ...and replayed byte for byte on a new connection (new challenge). */
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_PULL, NULL), 0);
    CHECK_EQ(raw_client(&s, "", "", "{\"v\":1}", captured, NULL), WSYNC_ERR_AUTH);
    server_down(&s);
    CHECK_EQ(s.st, WSYNC_ERR_AUTH);
    CHECK(strstr(s.err, "proof does not match") != NULL);
}

/* A fake server that replays a genuine server's challenge and answer. */
typedef struct replayer {
    int lfd;
    unsigned char bytes[WSYNC_HS_CHALLENGE_LEN + WSYNC_HS_FINISH_LEN];
    pthread_t th;
} replayer_t;

static void *replayer_main(void *arg)
{
    replayer_t *r = arg;
    unsigned char sink[WSYNC_HS_HELLO_LEN + 2];
    int fd = accept(r->lfd, NULL, NULL);
    wsync_send_all(fd, r->bytes, WSYNC_HS_CHALLENGE_LEN);
    wsync_recv_all(fd, sink, sizeof(sink), 0);
    wsync_send_all(fd, r->bytes + WSYNC_HS_CHALLENGE_LEN, WSYNC_HS_FINISH_LEN);
    close(fd);
    return NULL;
}

static void a_replayed_answer_does_not_fool_the_client(void)
{
    server_t s;
    replayer_t r;
    wsync_auth_t a = auth_of("s3cret");
    unsigned char hb[WSYNC_HS_HELLO_LEN];
    int fd, port;
    /* Capture a genuine challenge and accepting answer (payload "hi"). */
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_TCP, NULL), 0);
    fd = dial(&s);
    CHECK_EQ(wsync_recv_all(fd, r.bytes, WSYNC_HS_CHALLENGE_LEN, 0), 0);
    {
        wsync_hs_hello_t h = {.purpose = WSYNC_HS_TCP, .flags = WSYNC_HS_FLAG_TOKEN, .payload_len = 2};
        unsigned char key[32];
        wsync_hs_hello_encode(&h, hb);
        wsync_hs_key(&a, WSYNC_HS_TCP, key);
        wsync_hs_client_proof(key, r.bytes, hb, "hi", 2, h.proof);
        wsync_hs_hello_encode(&h, hb);
    }
    wsync_send_all(fd, hb, sizeof(hb));
    wsync_send_all(fd, "hi", 2);
    CHECK_EQ(wsync_recv_all(fd, r.bytes + WSYNC_HS_CHALLENGE_LEN, WSYNC_HS_FINISH_LEN, 0), 0);
    close(fd);
    server_down(&s);
    CHECK_OK(s.st);
    /* The real client, with the token, against the replay: refused. */
    CHECK_OK(wsync_tcp_listen("127.0.0.1", 0, &r.lfd, &port));
    pthread_create(&r.th, NULL, replayer_main, &r);
    s.port = port;
    CHECK_FAILS(client(&s, "s3cret", WSYNC_HS_TCP, "hi", NULL, 0), WSYNC_ERR_AUTH,
                "the answer's proof does not match");
    pthread_join(r.th, NULL);
    close(r.lfd);
}

static void truncated_and_oversized_messages_fail_cleanly(void)
{
    server_t s;
    unsigned char ch[WSYNC_HS_CHALLENGE_LEN], hb[WSYNC_HS_HELLO_LEN];
    wsync_hs_hello_t h = {.purpose = WSYNC_HS_PULL, .payload_len = 5000};
    wsync_hs_finish_t f;
    int fd;
    /* A hello cut short. */
    CHECK_EQ(server_up(&s, "s3cret", WSYNC_HS_PULL, NULL), 0);
    fd = dial(&s);
    wsync_recv_all(fd, ch, sizeof(ch), 0);
    wsync_send_all(fd, "wshs", 4);
    shutdown(fd, SHUT_WR);
    server_down(&s);
    close(fd);
    CHECK_EQ(s.st, WSYNC_ERR_PEER);
    CHECK(strstr(s.err, "inside its handshake hello") != NULL);
    /* A payload over the limit is refused before it is read. */
    CHECK_EQ(server_up(&s, "", WSYNC_HS_PULL, NULL), 0);
    fd = dial(&s);
    wsync_recv_all(fd, ch, sizeof(ch), 0);
    wsync_hs_hello_encode(&h, hb);
    wsync_send_all(fd, hb, sizeof(hb));
    CHECK_EQ(wsync_recv_all(fd, hb, WSYNC_HS_FINISH_LEN, 0), 0);
    CHECK_OK(wsync_hs_finish_decode(hb, WSYNC_HS_FINISH_LEN, &f));
    CHECK_EQ(f.status, WSYNC_ERR_FORMAT);
    close(fd);
    server_down(&s);
    CHECK(strstr(s.err, "5000 bytes is over the limit of 200") != NULL);
    /* A payload cut short. */
    CHECK_EQ(server_up(&s, "", WSYNC_HS_PULL, NULL), 0);
    fd = dial(&s);
    wsync_recv_all(fd, ch, sizeof(ch), 0);
    h.payload_len = 100;
    wsync_hs_hello_encode(&h, hb);
    wsync_send_all(fd, hb, sizeof(hb));
    wsync_send_all(fd, "{\"v\":", 5);
    shutdown(fd, SHUT_WR);
    server_down(&s);
    close(fd);
    CHECK_EQ(s.st, WSYNC_ERR_PEER);
    /* A server that closes inside its challenge. */
    {
        int lfd, port, cfd;
        char hp[32];
        CHECK_OK(wsync_tcp_listen("127.0.0.1", 0, &lfd, &port));
        snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
        CHECK_OK(wsync_tcp_connect(hp, 3000, &fd));
        cfd = accept(lfd, NULL, NULL);
        wsync_send_all(cfd, "wshs\x01\x01", 6);
        close(cfd);
        CHECK_FAILS(wsync_hs_connect(fd, NULL, WSYNC_HS_PULL, "x", "{}", 2, 3000, NULL, 0, NULL), WSYNC_ERR_PEER,
                    "inside its handshake challenge");
        close(fd);
        close(lfd);
    }
}

static void decoders_name_the_bad_field(void)
{
    unsigned char b[WSYNC_HS_FINISH_LEN + 40];
    wsync_hs_challenge_t c = {.purpose = WSYNC_HS_TCP, .flags = 1}, c2;
    wsync_hs_hello_t h = {.purpose = WSYNC_HS_PULL, .payload_len = 7}, h2;
    wsync_hs_finish_t f = {.purpose = WSYNC_HS_PULL, .status = WSYNC_ERR_AUTH, .msg_len = 3}, f2;
    memset(c.nonce, 7, sizeof(c.nonce));
    wsync_hs_challenge_encode(&c, b);
    CHECK_OK(wsync_hs_challenge_decode(b, WSYNC_HS_CHALLENGE_LEN, &c2));
    CHECK(c2.purpose == WSYNC_HS_TCP && c2.flags == 1 && memcmp(c2.nonce, c.nonce, 32) == 0);
    CHECK_FAILS(wsync_hs_challenge_decode(b, WSYNC_HS_CHALLENGE_LEN - 1, &c2), WSYNC_ERR_FORMAT, "39 bytes");
    CHECK_FAILS(wsync_hs_hello_decode(b, WSYNC_HS_HELLO_LEN, &h2), WSYNC_ERR_FORMAT, "message type 1");
    b[4] = 9;
    CHECK_FAILS(wsync_hs_challenge_decode(b, WSYNC_HS_CHALLENGE_LEN, &c2), WSYNC_ERR_FORMAT, "version 9");
    b[0] = 'G';
    CHECK_FAILS(wsync_hs_challenge_decode(b, WSYNC_HS_CHALLENGE_LEN, &c2), WSYNC_ERR_FORMAT,
                "not a wsync handshake");
    wsync_hs_hello_encode(&h, b);
    CHECK_OK(wsync_hs_hello_decode(b, WSYNC_HS_HELLO_LEN, &h2));
    CHECK_EQ(h2.payload_len, 7);
    b[6] = 99;
    CHECK_FAILS(wsync_hs_hello_decode(b, WSYNC_HS_HELLO_LEN, &h2), WSYNC_ERR_FORMAT, "unknown purpose 99");
    b[6] = WSYNC_HS_PULL;
    b[12] = 1;
    CHECK_FAILS(wsync_hs_hello_decode(b, WSYNC_HS_HELLO_LEN, &h2), WSYNC_ERR_FORMAT, "reserved");
    wsync_hs_finish_encode(&f, b);
    CHECK_OK(wsync_hs_finish_decode(b, WSYNC_HS_FINISH_LEN, &f2));
    CHECK_EQ(f2.status, WSYNC_ERR_AUTH);
    f.msg_len = WSYNC_HS_MSG_MAX + 1;
    wsync_hs_finish_encode(&f, b);
    CHECK_FAILS(wsync_hs_finish_decode(b, WSYNC_HS_FINISH_LEN, &f2), WSYNC_ERR_FORMAT, "reason of 401 bytes");
    f = (wsync_hs_finish_t){.purpose = WSYNC_HS_PULL, .status = 5};
    wsync_hs_finish_encode(&f, b);
    CHECK_FAILS(wsync_hs_finish_decode(b, WSYNC_HS_FINISH_LEN, &f2), WSYNC_ERR_FORMAT, "status 5");
}

static void the_proof_is_compared_with_crypto_memcmp(void)
{
    wsync_auth_t a = auth_of("s3cret");
    unsigned char ch[WSYNC_HS_CHALLENGE_LEN], hb[WSYNC_HS_HELLO_LEN];
    wsync_hs_challenge_t c = {.purpose = WSYNC_HS_PULL, .flags = 1};
    wsync_hs_hello_t h = {.purpose = WSYNC_HS_PULL, .flags = WSYNC_HS_FLAG_TOKEN, .payload_len = 2};
    char why[400];
    int before;
    wsync_hs_challenge_encode(&c, ch);
    memset(h.proof, 0xee, sizeof(h.proof)); /* not the proof */
    wsync_hs_hello_encode(&h, hb);
    before = memcmp_calls;
    CHECK_EQ(wsync_hs_judge(&a, WSYNC_HS_PULL, 0, ch, hb, "{}", why, sizeof(why)), WSYNC_ERR_AUTH);
    CHECK(memcmp_calls > before);
    /* The verdict is CRYPTO_memcmp's: forced to "equal", the bad proof passes. */
    memcmp_force_equal = 1;
    CHECK_EQ(wsync_hs_judge(&a, WSYNC_HS_PULL, 0, ch, hb, "{}", why, sizeof(why)), WSYNC_OK);
    memcmp_force_equal = 0;
    CHECK(wsync_auth_equal("abc", "abc", 3) && !wsync_auth_equal("abc", "abd", 3));
}

/* On a Unix socket the peer's uid decides: a process of this uid needs no
 * proof; one of another uid (a child that dropped to nobody) does. */
static void unix_peers_of_this_uid_need_no_proof_others_do(void)
{
    wsync_auth_t a = auth_of("s3cret"), none = auth_of("");
    char name[64];
    int lfd = -1, i;
    if (geteuid() != 0)
        SKIP("needs root to run a peer under another uid");
    /* Credentials are the connecting process's at connect() time. */
    snprintf(name, sizeof(name), "wsync-test/handshake/%d", (int)getpid());
    CHECK_OK(wsync_unix_listen(name, &lfd));
    for (i = 0; i < 2; i++) {
        unsigned char *payload = NULL;
        size_t len = 0;
        wsync_hs_t hs;
        pid_t pid;
        int status = 0, fd;
        wsync_status_t st;
        pid = fork();
        if (pid == 0) {
            int cfd = -1;
            if (i == 1 && setuid(65534) != 0)
                _exit(3);
            if (wsync_unix_connect(name, 3000, &cfd) != WSYNC_OK)
                _exit(4);
            _exit(wsync_hs_connect(cfd, &none, WSYNC_HS_BOARD, "board", NULL, 0, 3000, NULL, 0, NULL) == WSYNC_OK
                      ? 0
                      : 1);
        }
        fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0);
        CHECK_EQ(wsync_hs_peer_same_uid(fd), i == 0);
        st = wsync_hs_serve(&hs, fd, &a, WSYNC_HS_BOARD, "a local process", 0, 3000, &payload, &len);
        if (st == WSYNC_OK)
            wsync_hs_accept(&hs, NULL, 0);
        free(payload);
        waitpid(pid, &status, 0);
        close(fd);
        if (i == 0) {
            CHECK_OK(st);
            CHECK_EQ(WEXITSTATUS(status), 0);
        } else {
            CHECK_EQ(st, WSYNC_ERR_AUTH);
            CHECK(strstr(wsync_last_error(), "no proof: the engine rank has no token") != NULL);
            CHECK_EQ(WEXITSTATUS(status), 1);
        }
    }
    close(lfd);
}

int main(void)
{
    RUN(hmac_matches_rfc4231_and_keys_depend_on_token_and_purpose);
    RUN(the_same_token_passes_payload_and_proven_reply);
    RUN(a_wrong_or_missing_token_is_refused_with_what_to_do);
    RUN(an_altered_request_and_a_replayed_hello_are_refused);
    RUN(a_replayed_answer_does_not_fool_the_client);
    RUN(truncated_and_oversized_messages_fail_cleanly);
    RUN(decoders_name_the_bad_field);
    RUN(the_proof_is_compared_with_crypto_memcmp);
    RUN(unix_peers_of_this_uid_need_no_proof_others_do);
    TEST_EXIT();
}
