/* pull_port.h: the pull port, served by trainer ranks (trainer_side/pull_server.c)
 * and by engine nodes that relay (engine_side/relay.c): a TCP listener whose
 * every connection first proves the token (the data-plane handshake,
 * purpose WSYNC_HS_PULL, common/net/handshake.h), whose payload is the
 * first pull request (common/proto/pull_request.h); each answer may be followed
 * by the next request on the same connection (framed messages, common/
 * msg.h: an engine keeps one connection per peer between versions, so a
 * version costs no connect and no handshake), until the client closes it.
 * Each connection is served on a thread of its own. */
#ifndef WSYNC_COMMON_PULL_PORT_H
#define WSYNC_COMMON_PULL_PORT_H

#include <jansson.h>

#include "common/net/auth.h"
#include "common/net/handshake.h"
#include "common/wsync.h"

/* Answers one request that proved the token: fills `reply` ({"ok": true, ...}
 * or {"error": "..."}). Called on the connection's thread, any number at
 * once; it must return by itself when its owner stops (the port waits for it). */
typedef void (*wsync_pull_serve_fn)(void *ctx, const json_t *req, json_t *reply);

typedef struct wsync_pull_port wsync_pull_port_t;

/* Listens on `listen` ("host:port"; NULL or "": every address, a free port)
 * and serves each connection with serve(ctx, ...). `auth` is copied; `who`
 * names the server in warnings ("trainer rank 3", "engine e0's relay"). */
wsync_status_t wsync_pull_port_start(const char *listen, const wsync_auth_t *auth, const char *who,
                                     wsync_pull_serve_fn serve, void *ctx, wsync_pull_port_t **out);
/* The same for handshake purpose `purpose` (start: WSYNC_HS_PULL, a trainer
 * rank's port; an engine's relay port: WSYNC_HS_RELAY). */
wsync_status_t wsync_pull_port_start_as(const char *listen, const wsync_auth_t *auth, wsync_hs_purpose_t purpose,
                                        const char *who, wsync_pull_serve_fn serve, void *ctx,
                                        wsync_pull_port_t **out);
/* The port it listens on. */
int wsync_pull_port_number(const wsync_pull_port_t *pp);
/* Stops accepting, waits for every request being served to be answered (the
 * serve function must see its owner stopping and return), closes. NULL: nothing. */
void wsync_pull_port_stop(wsync_pull_port_t *pp);

#endif
