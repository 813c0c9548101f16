/* control_server.h: the control endpoint (libmicrohttpd + jansson). It
 * coordinates versions and readiness and never carries weight bytes. Runs
 * standalone (`wsync serve`) or inside trainer rank 0 / `wsync demo`. */
#ifndef WSYNC_CONTROL_SERVER_H
#define WSYNC_CONTROL_SERVER_H

#include "common/wsync.h"

#define WSYNC_CONTROL_PORT 8470

typedef struct wsync_control_server wsync_control_server_t;

typedef struct wsync_control_server_config {
    const char *listen;         /* "HOST:PORT"; default "0.0.0.0:8470"; port 0 picks one */
    const char *state_file;     /* NULL: state lives in memory only */
    const char *token_file;     /* NULL: no auth; else mutating calls need this bearer token */
    int max_connections;        /* default 16384 */
    int idle_timeout_s;         /* default 120 (long polls are capped below it) */
    int request_timeout_s;      /* default 30: a connection that has not sent a whole request
                                   (headers and body) within it of opening or of its previous
                                   answer is closed (slow or idle clients hold no slot) */
    int max_engines;            /* engine nodes registered at once; default 100000; past it
                                   a new node's registration is answered 403 */
    int max_client_connections; /* open connections per client address; 0 (default): no
                                   limit; past it requests are answered 429 */
    int private_status;         /* 1: GET /v1/status and /v1/trainers (who runs where) need
                                   the bearer token too; needs token_file */
    int threads;                /* MHD threads serving requests; 0 (default): one per two
                                   CPUs, 1 to 16 (a publish answers every held long poll
                                   at once: each thread answers its share of them) */
    double lease_s;             /* a trainer rank or engine node not seen for this long shows
                                   as gone; 0: 30 s */
    double forget_after_s;      /* ... and is removed after this long; 0 (default): never */
} wsync_control_server_config_t;

/* Loads the state file (a corrupt one is refused with the reason), binds,
 * and serves from MHD's own threads (cfg->threads). */
wsync_status_t wsync_control_server_start(const wsync_control_server_config_t *cfg, wsync_control_server_t **out);
/* "http://HOST:PORT" clients should use (loopback when bound to any). */
const char *wsync_control_server_url(const wsync_control_server_t *s);
/* Stops serving and frees; NULL is fine. */
void wsync_control_server_stop(wsync_control_server_t *s);

#endif
