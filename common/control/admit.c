/* admit.c: what the control endpoint decides before a request's body: who
 * may connect (connections per address, at accept), what the headers alone
 * refuse (no route, too many connections, a missing token, a declared body
 * over the cap; answered before a body byte is read), and each connection's
 * request deadline (slow and idle clients hold no slot past it). */
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/base/util.h"
#include "common/control/server_internal.h"

/* Constant-time: the time taken does not depend on where a guess differs. */
int ctl_token_ok(const wsync_control_server_t *s, struct MHD_Connection *conn)
{
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    size_t tl = strlen(s->token), hl, i;
    unsigned char diff = 0;
    if (h == NULL || strncmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    hl = strlen(h);
    diff = (unsigned char)(hl != tl);
    for (i = 0; i < tl; i++)
        diff |= (unsigned char)(s->token[i] ^ (i < hl ? h[i] : 0));
    return diff == 0;
}

/* The connection's deadline record (NULL when it could not be made). */
ctl_conn_track_t *ctl_track_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The request is whole: its answer may take long (a long poll), so the
 * request deadline stops until the next request begins. */
void ctl_request_received(wsync_control_server_t *s, struct MHD_Connection *conn)
{
    pthread_mutex_lock(&s->wait_lock);
    ctl_conns_receiving(ctl_track_of(conn), 0, wsync_now_ns());
    pthread_mutex_unlock(&s->wait_lock);
}

/* A refusal decided by the headers alone, queued before any body byte is
 * read: MHD then reads no body and closes the connection after the answer. */
static enum MHD_Result refuse_now(wsync_control_server_t *s, struct MHD_Connection *conn, const char *route,
                                  int code, const char *msg)
{
    json_t *j = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", code, "status", ctl_status_name(code), "message",
                          msg);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    struct MHD_Response *r;
    enum MHD_Result ret;
    json_decref(j);
    if (text == NULL)
        return MHD_NO;
    if ((r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)) == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Connection", "close");
    ctl_count(s, route, code);
    ctl_request_received(s, conn);
    ret = MHD_queue_response(conn, (unsigned)code, r);
    MHD_destroy_response(r);
    return ret;
}

/* The headers are in and no body byte is read: what they alone decide
 * (no such route, too many connections, a missing token, a declared body
 * over the cap) is answered now, so a refused client never makes the
 * endpoint buffer its body. 1 when a refusal was queued (*ret set). */
int ctl_refuse_on_headers(wsync_control_server_t *s, req_ctx_t *c, const char *url, const char *method,
                          enum MHD_Result *ret)
{
    const ctl_route_t *route;
    const char *clen;
    int method_ok = 0;
    char msg[256];

    route = ctl_route_find(url, method, &method_ok);
    if (route == NULL) {
        *ret = refuse_now(s, c->conn, method_ok ? "method_not_allowed" : "not_found", method_ok ? 405 : 404,
                          method_ok ? "method not allowed on this route" : "no such route");
        return 1;
    }
    if (c->over_limit) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        char who[64];
        ctl_clients_name(ci ? ci->client_addr : NULL, who, sizeof(who));
        snprintf(msg, sizeof(msg),
                 "too many connections from %s: at most %d per client (wsync serve "
                 "--max-client-connections); close some and retry",
                 who, s->max_client_conns);
        *ret = refuse_now(s, c->conn, route->name, 429, msg);
        return 1;
    }
    if ((route->mutating || (route->topology && s->private_status)) && s->token && !ctl_token_ok(s, c->conn)) {
        *ret = refuse_now(s, c->conn, route->name, 401,
                          "missing or wrong bearer token (Authorization: Bearer <token>)");
        return 1;
    }
    clen = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (clen && strtoull(clen, NULL, 10) > route->body_cap) {
        snprintf(msg, sizeof(msg), "request body over the %zu-byte limit of this route", route->body_cap);
        *ret = refuse_now(s, c->conn, route->name, 413, msg);
        return 1;
    }
    return 0;
}

/* Before MHD takes a connection: an address that holds its limit and the
 * slack (CTL_CLIENT_SLACK, the connections told 429) gets no more. Runs on
 * MHD's thread, as the STARTED notification that counts the connection,
 * so the count cannot be passed between the two. */
enum MHD_Result ctl_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    wsync_control_server_t *s = cls;
    uint64_t now;
    int open;
    if (s->max_client_conns <= 0)
        return MHD_YES;
    pthread_mutex_lock(&s->wait_lock);
    open = ctl_clients_open(&s->clients, addr);
    if (open < s->max_client_conns + CTL_CLIENT_SLACK) {
        pthread_mutex_unlock(&s->wait_lock);
        return MHD_YES;
    }
    s->refused_accepts++;
    now = wsync_now_ns();
    if (now - s->refused_logged_ns >= 10000000000ULL) { /* one line per 10 s, however many */
        char who[64];
        ctl_clients_name(addr, who, sizeof(who));
        s->refused_logged_ns = now;
        LOG_WARN("closed a new connection from %s at accept: it holds %d (wsync serve --max-client-connections "
                 "%d, and %d more to answer 429); %llu refused so far",
                 who, open, s->max_client_conns, CTL_CLIENT_SLACK, (unsigned long long)s->refused_accepts);
    }
    pthread_mutex_unlock(&s->wait_lock);
    return MHD_NO;
}

/* Nagle off on every accepted socket: MHD writes headers and a large body
 * separately, and the tail segment otherwise waits on the peer's delayed ACK
 * (measured: /v1/status with 1000 engines, p50 63 ms with Nagle vs <5 ms).
 * Counts connections per address and keeps each one's request deadline. */
void ctl_on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                       enum MHD_ConnectionNotificationCode code)
{
    wsync_control_server_t *s = cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int one = 1, started = code == MHD_CONNECTION_NOTIFY_STARTED;
    pthread_mutex_lock(&s->wait_lock);
    if (s->max_client_conns > 0) {
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        ctl_clients_add(&s->clients, ai ? ai->client_addr : NULL, started ? 1 : -1);
    }
    /* CLOSED comes before MHD closes the descriptor: the timer never shuts
     * down a descriptor that is reused. */
    if (started)
        *socket_ctx = ci ? ctl_conns_open(&s->conns, ci->connect_fd, wsync_now_ns()) : NULL;
    else
        ctl_conns_close(&s->conns, *socket_ctx), *socket_ctx = NULL;
    pthread_mutex_unlock(&s->wait_lock);
    /* A send buffer that takes GET /v1/status whole (182 KB for 1000 engine
     * nodes) in one send, not a round of the event loop per autotuned step:
     * /v1/status ran at 0.43 of /healthz's rate without it, 0.56 with
     * (medians of 8 rounds, control_bench on the 2-core VM). A cap, not an
     * allocation: a held long poll's socket queues 100 bytes. */
    if (started && ci != NULL) {
        int sndbuf = 1 << 20;
        setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }
}
