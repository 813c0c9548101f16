/* handshake.c: the data-plane handshake over a socket (the protocol is in
 * handshake.h; the messages and proofs in handshake_wire.c). */
#include "common/net/handshake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/base/util.h"

static uint64_t deadline_after(int timeout_ms)
{
    return wsync_now_ns() + (uint64_t)wsync_connect_timeout_ms(timeout_ms) * 1000000ULL;
}

/* wsync_recv_all with its failure said: which message, from whom. */
static wsync_status_t recv_part(int fd, void *buf, size_t len, uint64_t deadline, const char *what, const char *peer)
{
    int rc = wsync_recv_all(fd, buf, len, deadline);
    if (rc == 0)
        return WSYNC_OK;
    if (rc < 0 && errno == ETIMEDOUT)
        return wsync_error(WSYNC_ERR_TIMEOUT, "%s: no %s within the handshake timeout", peer, what);
    return wsync_error(WSYNC_ERR_PEER, "%s closed the connection %s its %s", peer, rc == 1 ? "before" : "inside",
                       what);
}

int wsync_hs_peer_same_uid(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int domain = 0;
    socklen_t dlen = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0 || domain != AF_UNIX)
        return 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return 0;
    return cred.uid == geteuid();
}

wsync_status_t wsync_hs_serve(wsync_hs_t *hs, int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose,
                              const char *peer, size_t max_payload, int timeout_ms, unsigned char **payload,
                              size_t *payload_len)
{
    uint64_t deadline = deadline_after(timeout_ms);
    wsync_hs_challenge_t c = {.purpose = (uint8_t)purpose, .flags = wsync_auth_on(auth) ? WSYNC_HS_FLAG_TOKEN : 0};
    wsync_hs_hello_t h;
    unsigned char *body = NULL;
    char why[WSYNC_HS_MSG_MAX];
    wsync_status_t st;

    memset(hs, 0, sizeof(*hs));
    hs->fd = fd;
    hs->purpose = purpose;
    hs->auth = auth;
    snprintf(hs->peer, sizeof(hs->peer), "%s", peer ? peer : "a peer");
    WSYNC_CHECK(wsync_auth_random(c.nonce, sizeof(c.nonce)));
    wsync_hs_challenge_encode(&c, hs->challenge);
    if (wsync_send_all(fd, hs->challenge, sizeof(hs->challenge)) != 0)
        return wsync_error(WSYNC_ERR_PEER, "%s from %s: gone before the challenge: %s", wsync_hs_what(purpose),
                           hs->peer, strerror(errno));
    WSYNC_CHECK(recv_part(fd, hs->hello, sizeof(hs->hello), deadline, "handshake hello", hs->peer));
    if (wsync_hs_hello_decode(hs->hello, sizeof(hs->hello), &h) != WSYNC_OK) {
        snprintf(why, sizeof(why), "%s", wsync_last_error());
        st = WSYNC_ERR_FORMAT;
        goto refuse;
    }
    if (h.payload_len > max_payload) {
        snprintf(why, sizeof(why), "a %s of %u bytes is over the limit of %zu", wsync_hs_what(purpose),
                 h.payload_len, max_payload);
        st = WSYNC_ERR_FORMAT;
        goto refuse;
    }
    body = malloc((size_t)h.payload_len + 1);
    WSYNC_CHECK_ALLOC(body);
    st = recv_part(fd, body, h.payload_len, deadline, wsync_hs_what(purpose), hs->peer);
    if (st != WSYNC_OK) {
        free(body);
        return st;
    }
    body[h.payload_len] = '\0';
    st = wsync_hs_judge(auth, purpose, wsync_hs_peer_same_uid(fd), hs->challenge, hs->hello, body, why, sizeof(why));
    if (st != WSYNC_OK) {
        free(body);
        goto refuse;
    }
    hs->client_token = (h.flags & WSYNC_HS_FLAG_TOKEN) && wsync_auth_on(auth);
    *payload = body;
    *payload_len = h.payload_len;
    return WSYNC_OK;
refuse:
    wsync_hs_refuse(hs, st, why);
    return wsync_error(st, "%s from %s refused: %s", wsync_hs_what(purpose), hs->peer, why);
}

/* One FINISH; the proof only when both sides hold the token. */
static wsync_status_t finish(wsync_hs_t *hs, wsync_status_t st, const char *msg, const void *reply, size_t reply_len)
{
    size_t mlen = msg ? strlen(msg) : 0;
    wsync_hs_finish_t f = {.purpose = (uint8_t)hs->purpose, .status = st, .reply_len = (uint32_t)reply_len};
    unsigned char b[WSYNC_HS_FINISH_LEN], key[WSYNC_AUTH_KEY_LEN], *out;
    int rc;
    if (hs->answered)
        return WSYNC_OK;
    hs->answered = 1;
    if (mlen > WSYNC_HS_MSG_MAX)
        mlen = WSYNC_HS_MSG_MAX;
    f.msg_len = (uint16_t)mlen;
    f.flags = wsync_auth_on(hs->auth) ? WSYNC_HS_FLAG_TOKEN : 0;
    wsync_hs_finish_encode(&f, b);
    if (st == WSYNC_OK && hs->client_token) {
        WSYNC_CHECK(wsync_hs_key(hs->auth, hs->purpose, key));
        WSYNC_CHECK(wsync_hs_server_proof(key, hs->challenge, hs->hello, b, msg, mlen, reply, reply_len, f.proof));
        wsync_hs_finish_encode(&f, b);
    }
    /* One write, so a client reads the reason with the status (a refused
     * peer's connection may be reset right after). */
    out = malloc(sizeof(b) + mlen + reply_len);
    WSYNC_CHECK_ALLOC(out);
    memcpy(out, b, sizeof(b));
    if (mlen)
        memcpy(out + sizeof(b), msg, mlen);
    if (reply_len)
        memcpy(out + sizeof(b) + mlen, reply, reply_len);
    rc = wsync_send_all(hs->fd, out, sizeof(b) + mlen + reply_len);
    free(out);
    if (rc != 0)
        return wsync_error(WSYNC_ERR_PEER, "%s from %s: gone before the handshake's answer: %s",
                           wsync_hs_what(hs->purpose), hs->peer, strerror(errno));
    return WSYNC_OK;
}

wsync_status_t wsync_hs_accept(wsync_hs_t *hs, const void *reply, size_t reply_len)
{
    return finish(hs, WSYNC_OK, NULL, reply, reply_len);
}

wsync_status_t wsync_hs_refuse(wsync_hs_t *hs, wsync_status_t st, const char *why)
{
    return finish(hs, st < 0 ? st : WSYNC_ERR_PEER, why ? why : "refused", NULL, 0);
}

/* Client: the FINISH and what follows it, checked. */
static wsync_status_t read_finish(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, const char *peer,
                                  const unsigned char *challenge, const unsigned char *hello, uint64_t deadline,
                                  void *reply, size_t reply_max, size_t *reply_len)
{
    unsigned char b[WSYNC_HS_FINISH_LEN], key[WSYNC_AUTH_KEY_LEN], want[WSYNC_AUTH_MAC_LEN];
    char msg[WSYNC_HS_MSG_MAX + 1];
    unsigned char *body = NULL;
    wsync_hs_finish_t f;
    wsync_status_t st;

    WSYNC_CHECK(recv_part(fd, b, sizeof(b), deadline, "handshake answer", peer));
    WSYNC_CHECK(wsync_hs_finish_decode(b, sizeof(b), &f));
    WSYNC_CHECK(recv_part(fd, msg, f.msg_len, deadline, "handshake answer", peer));
    msg[f.msg_len] = '\0';
    if (f.status != WSYNC_OK) /* a status this build does not know is the peer's failure */
        return wsync_error(f.status >= WSYNC_ERR_INTERNAL ? (wsync_status_t)f.status : WSYNC_ERR_PEER,
                           "%s refused: %s (%s at %s)", wsync_hs_what(purpose), msg, wsync_hs_server_role(purpose),
                           peer);
    if (f.reply_len > reply_max)
        return wsync_error(WSYNC_ERR_FORMAT, "%s at %s answered the %s with %u bytes, expected at most %zu",
                           wsync_hs_server_role(purpose), peer, wsync_hs_what(purpose), f.reply_len, reply_max);
    body = malloc(f.reply_len ? f.reply_len : 1);
    WSYNC_CHECK_ALLOC(body);
    WSYNC_CHECK_GOTO(recv_part(fd, body, f.reply_len, deadline, "handshake answer", peer), st, out);
    if (wsync_auth_on(auth)) {
        WSYNC_CHECK_GOTO(wsync_hs_key(auth, purpose, key), st, out);
        WSYNC_CHECK_GOTO(wsync_hs_server_proof(key, challenge, hello, b, msg, f.msg_len, body, f.reply_len, want),
                         st, out);
        if (!wsync_auth_equal(want, f.proof, WSYNC_AUTH_MAC_LEN)) {
            st = wsync_error(WSYNC_ERR_AUTH,
                             "%s to %s at %s: the answer's proof does not match: the %s's token "
                             "differs from the %s's (or the answer was forged or replayed); set the same "
                             "--token-file / WSYNC_TOKEN on both",
                             wsync_hs_what(purpose), wsync_hs_server_role(purpose), peer,
                             wsync_hs_server_role(purpose), wsync_hs_client_role(purpose));
            goto out;
        }
    }
    if (f.reply_len)
        memcpy(reply, body, f.reply_len);
    if (reply_len)
        *reply_len = f.reply_len;
    st = WSYNC_OK;
out:
    free(body);
    return st;
}

wsync_status_t wsync_hs_connect(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, const char *peer,
                                const void *payload, size_t payload_len, int timeout_ms, void *reply,
                                size_t reply_max, size_t *reply_len)
{
    uint64_t deadline = deadline_after(timeout_ms);
    unsigned char challenge[WSYNC_HS_CHALLENGE_LEN], hello[WSYNC_HS_HELLO_LEN], key[WSYNC_AUTH_KEY_LEN];
    wsync_hs_challenge_t c;
    wsync_hs_hello_t h = {.purpose = (uint8_t)purpose, .payload_len = (uint32_t)payload_len};

    if (payload_len > UINT32_MAX)
        return wsync_error(WSYNC_ERR_INVALID, "%s of %zu bytes is too large", wsync_hs_what(purpose), payload_len);
    WSYNC_CHECK(recv_part(fd, challenge, sizeof(challenge), deadline, "handshake challenge", peer));
    WSYNC_CHECK(wsync_hs_challenge_decode(challenge, sizeof(challenge), &c));
    if (c.purpose != purpose)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: %s expects a %s, this side sends a %s (wrong address?)", peer,
                           wsync_hs_server_role((wsync_hs_purpose_t)c.purpose),
                           wsync_hs_what((wsync_hs_purpose_t)c.purpose), wsync_hs_what(purpose));
    if (wsync_auth_on(auth) && !(c.flags & WSYNC_HS_FLAG_TOKEN))
        return wsync_error(WSYNC_ERR_AUTH,
                           "%s not sent: the %s at %s has no token but this %s has one, so it "
                           "cannot prove it is genuine; set the same --token-file / WSYNC_TOKEN on both",
                           wsync_hs_what(purpose), wsync_hs_server_role(purpose), peer,
                           wsync_hs_client_role(purpose));
    WSYNC_CHECK(wsync_auth_random(h.nonce, sizeof(h.nonce)));
    if (wsync_auth_on(auth))
        h.flags = WSYNC_HS_FLAG_TOKEN;
    wsync_hs_hello_encode(&h, hello);
    if (wsync_auth_on(auth)) {
        WSYNC_CHECK(wsync_hs_key(auth, purpose, key));
        WSYNC_CHECK(wsync_hs_client_proof(key, challenge, hello, payload, payload_len, h.proof));
        wsync_hs_hello_encode(&h, hello);
    }
    if (wsync_send_all(fd, hello, sizeof(hello)) != 0 || wsync_send_all(fd, payload, payload_len) != 0)
        return wsync_error(WSYNC_ERR_PEER, "%s at %s closed the connection during the %s: %s",
                           wsync_hs_server_role(purpose), peer, wsync_hs_what(purpose), strerror(errno));
    return read_finish(fd, auth, purpose, peer, challenge, hello, deadline, reply, reply_max, reply_len);
}
