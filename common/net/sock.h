/* sock.h: TCP sockets below everything that talks over the network (the
 * message channel, the transports, the data-plane handshake): listen and
 * connect, host:port parsing, the address peers should dial, and
 * whole-buffer I/O with a deadline. No protocol lives here. */
#ifndef WSYNC_COMMON_NET_SOCK_H
#define WSYNC_COMMON_NET_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

/* Listen on host:port (host NULL/"" = any, port 0 = pick one); the chosen
 * port is returned in *port_out. */
wsync_status_t wsync_tcp_listen(const char *host, int port, int *fd_out, int *port_out);
/* Connect to "host:port" within timeout_ms; a refusal is retried until
 * then (the peer may be starting). */
wsync_status_t wsync_tcp_connect(const char *hostport, int timeout_ms, int *fd_out);
/* The same; retry_refused 0 fails at once on a refusal, for a peer known to
 * have listened there (it registered the address): it is gone. */
wsync_status_t wsync_tcp_dial(const char *hostport, int timeout_ms, int retry_refused, int *fd_out);
/* Split "host:port" (IPv4 or name). */
wsync_status_t wsync_split_hostport(const char *hostport, char *host, size_t hostlen, int *port);
/* This host's primary IPv4 address as text ("127.0.0.1" if none). */
void wsync_primary_ipv4(char *out, size_t len);
/* "HOST:PORT" peers should dial for a socket listening on `fd` that was bound
 * to `bind_host` (its primary IPv4 when bound to any address). */
void wsync_listen_hostport(int fd, const char *bind_host, char *out, size_t len);

/* "HOST:PORT" of a connected TCP socket's peer ("local peer" for a Unix
 * socket, "unknown peer" if it cannot be told), for messages. */
void wsync_peer_name(int fd, char *out, size_t len);

/* Whole-buffer socket I/O (TCP or Unix stream sockets).
 * wsync_send_all: every byte, or -1 (errno set; never raises SIGPIPE).
 * wsync_recv_all: 0 when all `len` bytes arrived; 1 when the peer closed
 * before the first byte; -1 on an error, a close part way (errno
 * ECONNRESET) or the deadline passing (errno ETIMEDOUT). deadline_ns is on
 * wsync_now_ns()'s clock; 0 waits as long as it takes. */
int wsync_send_all(int fd, const void *buf, size_t len);
int wsync_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns);

#endif
