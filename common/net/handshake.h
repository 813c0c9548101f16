/* handshake.h: how every data-plane connection opens, whatever rides on it
 * (a pull request to a trainer, a tcp/nccl/verbs transport connection to an
 * engine, the local transport, the node board). Three messages:
 *
 *   server -> client  CHALLENGE  purpose, "I hold a token", 32 fresh random bytes
 *   client -> server  HELLO      purpose, its own 32 fresh bytes, the payload
 *                                (the pull request; a transport's hello), and
 *                                proof = HMAC(K, "client" | CHALLENGE | HELLO
 *                                without proof | payload)
 *   server -> client  FINISH     status and message (a refusal says why), a
 *                                reply (nccl's unique id, verbs' queue pairs) and
 *                                proof = HMAC(K, "server" | CHALLENGE | client's
 *                                bytes and proof | FINISH without proof | message
 *                                | reply)
 *
 * K is the purpose's key (auth.h). With a token, the server acts on nothing
 * before the client's proof checks out, so a request made without the token,
 * altered, or replayed (on a new connection the challenge differs) is refused
 * before a byte of weights moves; the client trusts the reply only with the
 * server's proof, bound to its own fresh bytes (mutual). On a Unix socket a
 * peer of the same uid (SO_PEERCRED) needs no proof. Without a token both
 * sides still exchange the three messages and anyone is let in, as before.
 * A client with a token refuses a server without one (it could be anyone).
 * Nothing here encrypts: the weights themselves cross the wire in clear.
 *
 * All integers little-endian; the parsers trust no length. Blocking calls,
 * each bounded by timeout_ms; no shared state: any thread may run any number. */
#ifndef WSYNC_COMMON_NET_HANDSHAKE_H
#define WSYNC_COMMON_NET_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "common/net/auth.h"

typedef enum wsync_hs_purpose {
    WSYNC_HS_PULL = 1,  /* engine -> trainer's pull port */
    WSYNC_HS_TCP = 2,   /* trainer -> engine's tcp receive port */
    WSYNC_HS_NCCL = 3,  /* trainer -> engine's nccl handshake port */
    WSYNC_HS_VERBS = 4, /* trainer -> engine's verbs handshake port */
    WSYNC_HS_LOCAL = 5, /* trainer -> engine's local transport socket */
    WSYNC_HS_BOARD = 6, /* engine rank -> its node's rank 0 board service */
    WSYNC_HS_RELAY = 7, /* engine -> another engine node's relay port (relay:F) */
} wsync_hs_purpose_t;
#define WSYNC_HS_NPURPOSES 8

#define WSYNC_HS_MAGIC 0x73687377u /* "wshs" */
#define WSYNC_HS_VERSION 1
#define WSYNC_HS_NONCE_LEN 32
#define WSYNC_HS_CHALLENGE_LEN 40
#define WSYNC_HS_HELLO_LEN 80  /* then payload_len bytes */
#define WSYNC_HS_FINISH_LEN 52 /* then msg_len + reply_len bytes */
#define WSYNC_HS_MSG_MAX 400   /* a refusal's reason */
#define WSYNC_HS_FLAG_TOKEN 1u /* the sender holds a token (and proves it) */

/* What a purpose is called in messages: "pull request", and who the client
 * and server are ("engine", "trainer"). */
const char *wsync_hs_what(wsync_hs_purpose_t p);
const char *wsync_hs_client_role(wsync_hs_purpose_t p);
const char *wsync_hs_server_role(wsync_hs_purpose_t p);

/* The purpose's key (requires a token). */
wsync_status_t wsync_hs_key(const wsync_auth_t *auth, wsync_hs_purpose_t p, unsigned char key[WSYNC_AUTH_KEY_LEN]);

/* --- the three messages (pure: no sockets; unit-tested and fuzzed) ------- */
typedef struct wsync_hs_challenge {
    uint8_t purpose, flags;
    unsigned char nonce[WSYNC_HS_NONCE_LEN];
} wsync_hs_challenge_t;

typedef struct wsync_hs_hello {
    uint8_t purpose, flags;
    uint32_t payload_len;
    unsigned char nonce[WSYNC_HS_NONCE_LEN];
    unsigned char proof[WSYNC_AUTH_MAC_LEN];
} wsync_hs_hello_t;

typedef struct wsync_hs_finish {
    uint8_t purpose, flags;
    int32_t status; /* WSYNC_OK: accepted; else the refusal's status */
    uint16_t msg_len;
    uint32_t reply_len;
    unsigned char proof[WSYNC_AUTH_MAC_LEN];
} wsync_hs_finish_t;

void wsync_hs_challenge_encode(const wsync_hs_challenge_t *c, unsigned char b[WSYNC_HS_CHALLENGE_LEN]);
void wsync_hs_hello_encode(const wsync_hs_hello_t *h, unsigned char b[WSYNC_HS_HELLO_LEN]);
void wsync_hs_finish_encode(const wsync_hs_finish_t *f, unsigned char b[WSYNC_HS_FINISH_LEN]);
/* Decoders check magic, version, type and every length they can (n: bytes
 * in b); WSYNC_ERR_FORMAT says which field is wrong. */
wsync_status_t wsync_hs_challenge_decode(const unsigned char *b, size_t n, wsync_hs_challenge_t *c);
wsync_status_t wsync_hs_hello_decode(const unsigned char *b, size_t n, wsync_hs_hello_t *h);
wsync_status_t wsync_hs_finish_decode(const unsigned char *b, size_t n, wsync_hs_finish_t *f);

/* The two proofs, over the encoded messages as they crossed the wire: the
 * client's covers `hello` up to its proof field; the server's covers the
 * whole `hello` (the client's proof with it) and `finish` up to its own. */
wsync_status_t wsync_hs_client_proof(const unsigned char key[WSYNC_AUTH_KEY_LEN],
                                     const unsigned char challenge[WSYNC_HS_CHALLENGE_LEN],
                                     const unsigned char hello[WSYNC_HS_HELLO_LEN], const void *payload,
                                     size_t payload_len, unsigned char out[WSYNC_AUTH_MAC_LEN]);
wsync_status_t wsync_hs_server_proof(const unsigned char key[WSYNC_AUTH_KEY_LEN],
                                     const unsigned char challenge[WSYNC_HS_CHALLENGE_LEN],
                                     const unsigned char hello[WSYNC_HS_HELLO_LEN],
                                     const unsigned char finish[WSYNC_HS_FINISH_LEN], const void *msg,
                                     size_t msg_len, const void *reply, size_t reply_len,
                                     unsigned char out[WSYNC_AUTH_MAC_LEN]);

/* The server's decision on a decoded hello (pure): WSYNC_OK to go on, else
 * the refusal, its reason in `why` (what the client is told). peer_same_uid:
 * the peer is a local process of this uid. */
wsync_status_t wsync_hs_judge(const wsync_auth_t *auth, wsync_hs_purpose_t purpose, int peer_same_uid,
                              const unsigned char challenge[WSYNC_HS_CHALLENGE_LEN],
                              const unsigned char hello[WSYNC_HS_HELLO_LEN], const void *payload, char *why,
                              size_t whylen);

/* --- over a socket ------------------------------------------------------ */
typedef struct wsync_hs {
    int fd;
    wsync_hs_purpose_t purpose;
    const wsync_auth_t *auth;
    unsigned char challenge[WSYNC_HS_CHALLENGE_LEN];
    unsigned char hello[WSYNC_HS_HELLO_LEN];
    int client_token; /* the client proved a token: FINISH carries a proof */
    int answered;     /* FINISH sent */
    char peer[96];
} wsync_hs_t;

/* Server: send a CHALLENGE on accepted `fd`, read the HELLO and its payload
 * (at most max_payload bytes) within timeout_ms, judge it. On success
 * *payload (malloc'd, NUL-terminated past its *payload_len bytes; the
 * caller frees) holds what the client sent, and the caller must answer with
 * wsync_hs_accept or wsync_hs_refuse. On failure the refusal has been sent
 * (when the socket still works) and the error says what failed, naming
 * `peer` (for messages: "10.0.0.5:41234"); the caller closes fd. */
wsync_status_t wsync_hs_serve(wsync_hs_t *hs, int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose,
                              const char *peer, size_t max_payload, int timeout_ms, unsigned char **payload,
                              size_t *payload_len);
/* Server: FINISH with WSYNC_OK and `reply` (may be empty). */
wsync_status_t wsync_hs_accept(wsync_hs_t *hs, const void *reply, size_t reply_len);
/* Server: FINISH refusing with status `st` and reason `why`. */
wsync_status_t wsync_hs_refuse(wsync_hs_t *hs, wsync_status_t st, const char *why);

/* Client, on connected `fd` to `peer` (for messages): read the CHALLENGE,
 * send the HELLO with `payload`, read the FINISH and check it. On success
 * the reply (at most reply_max bytes) is in `reply` and *reply_len (both may
 * be NULL/0 when none is expected). A refusal comes back as the server's
 * status, its reason in the error: "pull request refused: proof does not
 * match: ... (trainer at HOST:PORT)". */
wsync_status_t wsync_hs_connect(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, const char *peer,
                                const void *payload, size_t payload_len, int timeout_ms, void *reply,
                                size_t reply_max, size_t *reply_len);

/* 1 if `fd` is a Unix socket whose peer runs under this process's uid. */
int wsync_hs_peer_same_uid(int fd);

#endif
