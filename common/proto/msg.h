/* msg.h: the small request/response channel beside the data path: framed
 * JSON messages over a TCP socket (pull requests to trainer ranks), plus the
 * hex helpers it needs; the sockets are common/net/sock.h's. Weight bytes
 * never travel here. */
#ifndef WSYNC_COMMON_MSG_H
#define WSYNC_COMMON_MSG_H

#include <jansson.h>
#include <stddef.h>

#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/blob.h"
#include "common/wsync.h"

#define WSYNC_MSG_MAX (1u << 20)

/* One message: 4-byte little-endian length, then compact JSON. recv waits up
 * to timeout_ms (-1 forever) and refuses frames over WSYNC_MSG_MAX. The
 * caller owns the returned reference. */
wsync_status_t wsync_msg_send(int fd, const json_t *msg);
wsync_status_t wsync_msg_recv(int fd, int timeout_ms, json_t **out);

/* A request that must prove the token (the pull port): the client sends
 * `req` as the payload of the data-plane handshake (common/net/handshake.h)
 * and, once the server accepted it, waits for the reply message; all within
 * timeout_ms. A refusal comes back as the server's status and reason. */
wsync_status_t wsync_msg_call(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, const char *peer,
                              const json_t *req, int timeout_ms, json_t **reply);
/* The server's side: handshake, the payload parsed as a JSON object (a
 * malformed one is refused saying why), the handshake answered. Nothing is
 * returned from a peer that did not prove the token, when one is set. The
 * caller owns *req and answers with wsync_msg_send. */
wsync_status_t wsync_msg_accept(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, int timeout_ms,
                                json_t **req);

/* Blobs as hex strings inside JSON. */
/* Bytes as a lowercase hex JSON string, and back (at most `max` bytes;
 * *len gets the count). */
json_t *wsync_hex_to_json(const void *data, size_t len);
wsync_status_t wsync_hex_from_json(const json_t *j, const char *what, void *out, size_t max, size_t *len);
json_t *wsync_blob_to_json(const wsync_blob_t *b);
wsync_status_t wsync_blob_from_json(const json_t *j, const char *what, wsync_blob_t *out);

#endif
