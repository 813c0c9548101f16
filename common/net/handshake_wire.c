/* handshake_wire.c: the handshake's three messages, its two proofs and the
 * server's judgement of a hello; no sockets here (see handshake.c). */
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/le.h"
#include "common/net/handshake.h"

enum { TYPE_CHALLENGE = 1, TYPE_HELLO = 2, TYPE_FINISH = 3 };
#define HELLO_PROOF_OFF 48
#define FINISH_PROOF_OFF 20

/* Per purpose: its key's label, and what its two ends are called. */
static const struct purpose_info {
    const char *label, *what, *client, *server;
} purposes[WSYNC_HS_NPURPOSES] = {
    [WSYNC_HS_PULL] = {"wsync pull request", "pull request", "engine", "trainer"},
    [WSYNC_HS_TCP] = {"wsync tcp transport", "tcp connection", "trainer", "engine"},
    [WSYNC_HS_NCCL] = {"wsync nccl transport", "nccl handshake", "trainer", "engine"},
    [WSYNC_HS_VERBS] = {"wsync verbs transport", "verbs handshake", "trainer", "engine"},
    [WSYNC_HS_LOCAL] = {"wsync local transport", "local transport connection", "trainer", "engine"},
    [WSYNC_HS_BOARD] = {"wsync node board", "node board connection", "engine rank", "engine local rank 0"},
    /* a pull request as to a trainer, but an engine node serves it: its
     * refusals name that engine, and a proof for one is no proof for the other */
    [WSYNC_HS_RELAY] = {"wsync relay pull request", "relay pull request", "engine", "relaying engine"},
};

static const struct purpose_info *info(wsync_hs_purpose_t p)
{
    static const struct purpose_info unknown = {"", "connection", "peer", "peer"};
    return (int)p > 0 && (int)p < WSYNC_HS_NPURPOSES ? &purposes[p] : &unknown;
}

const char *wsync_hs_what(wsync_hs_purpose_t p)
{
    return info(p)->what;
}
const char *wsync_hs_client_role(wsync_hs_purpose_t p)
{
    return info(p)->client;
}
const char *wsync_hs_server_role(wsync_hs_purpose_t p)
{
    return info(p)->server;
}

wsync_status_t wsync_hs_key(const wsync_auth_t *auth, wsync_hs_purpose_t p, unsigned char key[WSYNC_AUTH_KEY_LEN])
{
    if ((int)p <= 0 || (int)p >= WSYNC_HS_NPURPOSES)
        return wsync_error(WSYNC_ERR_INTERNAL, "handshake purpose %d unknown", (int)p);
    return wsync_auth_key(auth, purposes[p].label, key);
}

static void put_head(unsigned char *b, int type, uint8_t purpose, uint8_t flags)
{
    wsync_put32(b, WSYNC_HS_MAGIC);
    b[4] = WSYNC_HS_VERSION;
    b[5] = (unsigned char)type;
    b[6] = purpose;
    b[7] = flags;
}

/* Magic, version, type, purpose and length of any message. */
static wsync_status_t check_head(const unsigned char *b, size_t n, size_t want, int type, const char *name)
{
    if (n < 8 || wsync_get32(b) != WSYNC_HS_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake %s: not a wsync handshake (magic %08x)", name,
                           n >= 4 ? wsync_get32(b) : 0);
    if (b[4] != WSYNC_HS_VERSION)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "handshake %s: version %u, this build speaks %d (upgrade both sides "
                           "to the same wsync)",
                           name, b[4], WSYNC_HS_VERSION);
    if (b[5] != type)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake %s: message type %u, expected %d", name, b[5], type);
    if (b[6] == 0 || b[6] >= WSYNC_HS_NPURPOSES)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake %s: unknown purpose %u", name, b[6]);
    if (n < want)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake %s: %zu bytes, expected %zu", name, n, want);
    return WSYNC_OK;
}

void wsync_hs_challenge_encode(const wsync_hs_challenge_t *c, unsigned char b[WSYNC_HS_CHALLENGE_LEN])
{
    memset(b, 0, WSYNC_HS_CHALLENGE_LEN);
    put_head(b, TYPE_CHALLENGE, c->purpose, c->flags);
    memcpy(b + 8, c->nonce, WSYNC_HS_NONCE_LEN);
}

wsync_status_t wsync_hs_challenge_decode(const unsigned char *b, size_t n, wsync_hs_challenge_t *c)
{
    WSYNC_CHECK(check_head(b, n, WSYNC_HS_CHALLENGE_LEN, TYPE_CHALLENGE, "challenge"));
    c->purpose = b[6];
    c->flags = b[7];
    memcpy(c->nonce, b + 8, WSYNC_HS_NONCE_LEN);
    return WSYNC_OK;
}

void wsync_hs_hello_encode(const wsync_hs_hello_t *h, unsigned char b[WSYNC_HS_HELLO_LEN])
{
    memset(b, 0, WSYNC_HS_HELLO_LEN);
    put_head(b, TYPE_HELLO, h->purpose, h->flags);
    wsync_put32(b + 8, h->payload_len);
    memcpy(b + 16, h->nonce, WSYNC_HS_NONCE_LEN);
    memcpy(b + HELLO_PROOF_OFF, h->proof, WSYNC_AUTH_MAC_LEN);
}

wsync_status_t wsync_hs_hello_decode(const unsigned char *b, size_t n, wsync_hs_hello_t *h)
{
    WSYNC_CHECK(check_head(b, n, WSYNC_HS_HELLO_LEN, TYPE_HELLO, "hello"));
    if (wsync_get32(b + 12) != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake hello: reserved field is %08x, must be 0",
                           wsync_get32(b + 12));
    h->purpose = b[6];
    h->flags = b[7];
    h->payload_len = wsync_get32(b + 8);
    memcpy(h->nonce, b + 16, WSYNC_HS_NONCE_LEN);
    memcpy(h->proof, b + HELLO_PROOF_OFF, WSYNC_AUTH_MAC_LEN);
    return WSYNC_OK;
}

void wsync_hs_finish_encode(const wsync_hs_finish_t *f, unsigned char b[WSYNC_HS_FINISH_LEN])
{
    memset(b, 0, WSYNC_HS_FINISH_LEN);
    put_head(b, TYPE_FINISH, f->purpose, f->flags);
    wsync_put32(b + 8, (uint32_t)f->status);
    wsync_put16(b + 12, f->msg_len);
    wsync_put32(b + 16, f->reply_len);
    memcpy(b + FINISH_PROOF_OFF, f->proof, WSYNC_AUTH_MAC_LEN);
}

wsync_status_t wsync_hs_finish_decode(const unsigned char *b, size_t n, wsync_hs_finish_t *f)
{
    WSYNC_CHECK(check_head(b, n, WSYNC_HS_FINISH_LEN, TYPE_FINISH, "finish"));
    if (wsync_get16(b + 14) != 0)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake finish: reserved field is %04x, must be 0",
                           wsync_get16(b + 14));
    f->purpose = b[6];
    f->flags = b[7];
    f->status = (int32_t)wsync_get32(b + 8);
    f->msg_len = wsync_get16(b + 12);
    f->reply_len = wsync_get32(b + 16);
    memcpy(f->proof, b + FINISH_PROOF_OFF, WSYNC_AUTH_MAC_LEN);
    if (f->msg_len > WSYNC_HS_MSG_MAX)
        return wsync_error(WSYNC_ERR_FORMAT, "handshake finish: reason of %u bytes (limit %d)", f->msg_len,
                           WSYNC_HS_MSG_MAX);
    if (f->status > 0 || (f->status == 0 && f->msg_len != 0))
        return wsync_error(WSYNC_ERR_FORMAT, "handshake finish: status %d with a %u-byte reason", f->status,
                           f->msg_len);
    return WSYNC_OK;
}

wsync_status_t wsync_hs_client_proof(const unsigned char key[WSYNC_AUTH_KEY_LEN],
                                     const unsigned char challenge[WSYNC_HS_CHALLENGE_LEN],
                                     const unsigned char hello[WSYNC_HS_HELLO_LEN], const void *payload,
                                     size_t payload_len, unsigned char out[WSYNC_AUTH_MAC_LEN])
{
    static const char dir[] = "client";
    wsync_auth_part_t parts[] = {{dir, sizeof(dir)},
                                 {challenge, WSYNC_HS_CHALLENGE_LEN},
                                 {hello, HELLO_PROOF_OFF},
                                 {payload, payload_len}};
    return wsync_auth_mac(key, parts, (int)WSYNC_ARRAY_LEN(parts), out);
}

wsync_status_t wsync_hs_server_proof(const unsigned char key[WSYNC_AUTH_KEY_LEN],
                                     const unsigned char challenge[WSYNC_HS_CHALLENGE_LEN],
                                     const unsigned char hello[WSYNC_HS_HELLO_LEN],
                                     const unsigned char finish[WSYNC_HS_FINISH_LEN], const void *msg,
                                     size_t msg_len, const void *reply, size_t reply_len,
                                     unsigned char out[WSYNC_AUTH_MAC_LEN])
{
    static const char dir[] = "server";
    wsync_auth_part_t parts[] = {{dir, sizeof(dir)},
                                 {challenge, WSYNC_HS_CHALLENGE_LEN},
                                 {hello, WSYNC_HS_HELLO_LEN},
                                 {finish, FINISH_PROOF_OFF},
                                 {msg, msg_len},
                                 {reply, reply_len}};
    return wsync_auth_mac(key, parts, (int)WSYNC_ARRAY_LEN(parts), out);
}

wsync_status_t wsync_hs_judge(const wsync_auth_t *auth, wsync_hs_purpose_t purpose, int peer_same_uid,
                              const unsigned char challenge[WSYNC_HS_CHALLENGE_LEN],
                              const unsigned char hello[WSYNC_HS_HELLO_LEN], const void *payload, char *why,
                              size_t whylen)
{
    const struct purpose_info *pi = info(purpose);
    unsigned char key[WSYNC_AUTH_KEY_LEN], want[WSYNC_AUTH_MAC_LEN];
    wsync_hs_hello_t h;

    if (wsync_hs_hello_decode(hello, WSYNC_HS_HELLO_LEN, &h) != WSYNC_OK) {
        snprintf(why, whylen, "%s", wsync_last_error());
        return WSYNC_ERR_FORMAT;
    }
    if (h.purpose != purpose) {
        snprintf(why, whylen, "this port takes a %s, the peer sent a %s (it dialled the wrong address)", pi->what,
                 info((wsync_hs_purpose_t)h.purpose)->what);
        return WSYNC_ERR_FORMAT;
    }
    if (!wsync_auth_on(auth))
        return WSYNC_OK;
    if (peer_same_uid)
        return WSYNC_OK;
    if (!(h.flags & WSYNC_HS_FLAG_TOKEN)) {
        snprintf(why, whylen,
                 "no proof: the %s has no token but the %s requires one; set the same --token-file / "
                 "WSYNC_TOKEN on both",
                 pi->client, pi->server);
        return WSYNC_ERR_AUTH;
    }
    if (wsync_hs_key(auth, purpose, key) != WSYNC_OK ||
        wsync_hs_client_proof(key, challenge, hello, payload, h.payload_len, want) != WSYNC_OK) {
        snprintf(why, whylen, "cannot check the proof: %s", wsync_last_error());
        return WSYNC_ERR_INTERNAL;
    }
    if (!wsync_auth_equal(want, h.proof, WSYNC_AUTH_MAC_LEN)) {
        snprintf(why, whylen,
                 "proof does not match: the %s's token differs from the %s's (or the bytes were "
                 "altered or replayed); set the same --token-file / WSYNC_TOKEN on both",
                 pi->client, pi->server);
        return WSYNC_ERR_AUTH;
    }
    return WSYNC_OK;
}
