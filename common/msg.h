/* msg.h: the small request/response channel beside the data path: framed
 * JSON messages over a TCP socket (pull requests to trainer ranks), plus the
 * socket and hex helpers it needs. Weight bytes never travel here. */
#ifndef WSYNC_COMMON_MSG_H
#define WSYNC_COMMON_MSG_H

#include <jansson.h>
#include <stddef.h>

#include "common/transport/transport.h"

#define WSYNC_MSG_MAX (1u << 20)

/* Listen on host:port (host NULL/"" = any, port 0 = pick one); the chosen
 * port is returned in *port_out. */
wsync_status_t wsync_tcp_listen(const char *host, int port, int *fd_out, int *port_out);
/* Connect to "host:port" within timeout_ms. */
wsync_status_t wsync_tcp_connect(const char *hostport, int timeout_ms, int *fd_out);
/* Split "host:port" (IPv4 or name). */
wsync_status_t wsync_split_hostport(const char *hostport, char *host, size_t hostlen, int *port);
/* This host's primary IPv4 address as text ("127.0.0.1" if none). */
void wsync_primary_ipv4(char *out, size_t len);
/* "HOST:PORT" peers should dial for a socket listening on `fd` that was bound
 * to `bind_host` (its primary IPv4 when bound to any address). */
void wsync_listen_hostport(int fd, const char *bind_host, char *out, size_t len);

/* Whole-buffer socket I/O, shared by the message channel and the transports.
 * wsync_send_all: every byte, or -1 (errno set; never raises SIGPIPE).
 * wsync_recv_all: 0 when all `len` bytes arrived; 1 when the peer closed
 * before the first byte; -1 on an error, a close part way (errno
 * ECONNRESET) or the deadline passing (errno ETIMEDOUT). deadline_ns is on
 * wsync_now_ns()'s clock; 0 waits as long as it takes. */
int wsync_send_all(int fd, const void *buf, size_t len);
int wsync_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns);

/* One message: 4-byte little-endian length, then compact JSON. recv waits up
 * to timeout_ms (-1 forever) and refuses frames over WSYNC_MSG_MAX. The
 * caller owns the returned reference. */
wsync_status_t wsync_msg_send(int fd, const json_t *msg);
wsync_status_t wsync_msg_recv(int fd, int timeout_ms, json_t **out);

/* Blobs as hex strings inside JSON. */
/* Bytes as a lowercase hex JSON string, and back (at most `max` bytes;
 * *len gets the count). */
json_t *wsync_hex_to_json(const void *data, size_t len);
wsync_status_t wsync_hex_from_json(const json_t *j, const char *what, void *out, size_t max, size_t *len);
json_t *wsync_blob_to_json(const wsync_blob_t *b);
wsync_status_t wsync_blob_from_json(const json_t *j, const char *what, wsync_blob_t *out);

#endif
