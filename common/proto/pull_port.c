/* pull_port.c: the pull port's listener and its per-connection threads
 * (pull_port.h). Nothing reaches the serve function from a peer that did not
 * prove the token (when one is set); connections still in their handshake
 * are capped per address and in all (common/net/preauth.h), and their
 * failures logged at most PREAUTH_LOG_BURST lines per PREAUTH_LOG_MS, then
 * with a count. */
#include "common/proto/pull_port.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/proto/msg.h"
#include "common/net/preauth.h"
#include "common/base/settings.h"
#include "common/base/util.h"

/* Handshakes pending at once: per address, in all; one silent for
 * PREAUTH_EVICT_MS gives way to a newcomer (a real one takes milliseconds).
 * A kept, proved connection counts in neither. */
#define PREAUTH_PER_ADDR 16
#define PREAUTH_TOTAL 128
#define PREAUTH_EVICT_MS 250
#define PREAUTH_LOG_MS 10000
#define PREAUTH_LOG_BURST 5

struct wsync_pull_port {
    wsync_auth_t auth;
    wsync_hs_purpose_t purpose; /* WSYNC_HS_PULL (a trainer rank) or WSYNC_HS_RELAY (an engine node) */
    char who[128];
    wsync_pull_serve_fn serve;
    void *ctx;
    int fd, port;
    pthread_t acceptor;
    int stopping; /* atomic */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int active; /* connections being served (lock) */
    wsync_preauth_t pre;
    wsync_loglimit_t warned;
};

typedef struct conn_arg {
    wsync_pull_port_t *pp;
    int fd;
    wsync_preauth_ticket_t ticket;
} conn_arg_t;

/* A connection refused or failed before its proof: a flood of them writes
 * PREAUTH_LOG_BURST lines per PREAUTH_LOG_MS, then one with how many it
 * held back. */
static void warn_preauth(wsync_pull_port_t *pp, const char *what)
{
    uint64_t held = 0;
    if (!wsync_loglimit_take(&pp->warned, wsync_now_ns(), &held))
        return;
    if (held)
        LOG_WARN("%s: %s (and %llu more connections refused or failed before their proof since the last such "
                 "line)",
                 pp->who, what, (unsigned long long)held);
    else
        LOG_WARN("%s: %s", pp->who, what);
}

/* Waits for the next request on a kept connection: 1 with *req, 0 when the
 * client closed it, the port stops, or a malformed frame came. */
static int next_request(wsync_pull_port_t *pp, int fd, json_t **req)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n;
        if (__atomic_load_n(&pp->stopping, __ATOMIC_ACQUIRE))
            return 0;
        n = poll(&pfd, 1, 200);
        if (n < 0 || (n > 0 && !(pfd.revents & POLLIN)))
            return 0;
        if (n > 0)
            return wsync_msg_recv(fd, wsync_connect_timeout_ms(0), req) == WSYNC_OK && json_is_object(*req);
    }
}

/* One connection: the first request comes with the handshake that proves
 * the token; the client may keep the connection and send the next
 * versions' requests over it, answered in turn, until it closes it. */
static void *conn_main(void *arg)
{
    conn_arg_t *h = arg;
    wsync_pull_port_t *pp = h->pp;
    json_t *req = NULL;
    wsync_status_t st = wsync_msg_accept(h->fd, &pp->auth, pp->purpose, wsync_connect_timeout_ms(0), &req);
    wsync_preauth_leave(&pp->pre, h->ticket); /* proved, failed or shut down: no longer pending */
    if (st != WSYNC_OK) {
        warn_preauth(pp, wsync_last_error());
        req = NULL;
    }
    while (req) {
        json_t *reply = json_object();
        int sent = reply != NULL;
        if (sent) {
            pp->serve(pp->ctx, req, reply);
            sent = wsync_msg_send(h->fd, reply) == WSYNC_OK;
        }
        json_decref(req);
        json_decref(reply);
        req = NULL;
        if (!sent || !next_request(pp, h->fd, &req)) {
            json_decref(req);
            req = NULL;
        }
    }
    close(h->fd);
    free(h);
    pthread_mutex_lock(&pp->lock);
    pp->active--;
    pthread_cond_broadcast(&pp->cond);
    pthread_mutex_unlock(&pp->lock);
    return NULL;
}

static void *accept_main(void *arg)
{
    wsync_pull_port_t *pp = arg;
    while (!__atomic_load_n(&pp->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd = {.fd = pp->fd, .events = POLLIN};
        conn_arg_t *h;
        pthread_t th;
        char peer[WSYNC_PREAUTH_PEER_LEN], why[256];
        wsync_preauth_ticket_t ticket;
        int fd;
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        fd = accept4(pp->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        wsync_preauth_peer_of(fd, peer, sizeof(peer));
        if (!wsync_preauth_enter(&pp->pre, peer, fd, wsync_now_ns(), &ticket)) {
            close(fd);
            snprintf(why, sizeof(why),
                     "turned a connection from %s away: too many handshakes pending (at most %d per address, %d "
                     "in "
                     "all, each for up to connect_timeout_ms)",
                     peer, PREAUTH_PER_ADDR, PREAUTH_TOTAL);
            warn_preauth(pp, why);
            continue;
        }
        h = malloc(sizeof(*h));
        if (h == NULL) {
            wsync_preauth_leave(&pp->pre, ticket);
            close(fd);
            continue;
        }
        *h = (conn_arg_t){.pp = pp, .fd = fd, .ticket = ticket};
        pthread_mutex_lock(&pp->lock);
        pp->active++;
        pthread_mutex_unlock(&pp->lock);
        if (pthread_create(&th, NULL, conn_main, h) != 0) {
            wsync_preauth_leave(&pp->pre, ticket);
            close(fd);
            free(h);
            pthread_mutex_lock(&pp->lock);
            pp->active--;
            pthread_mutex_unlock(&pp->lock);
            continue;
        }
        pthread_detach(th);
    }
    return NULL;
}

wsync_status_t wsync_pull_port_start(const char *listen, const wsync_auth_t *auth, const char *who,
                                     wsync_pull_serve_fn serve, void *ctx, wsync_pull_port_t **out)
{
    return wsync_pull_port_start_as(listen, auth, WSYNC_HS_PULL, who, serve, ctx, out);
}

wsync_status_t wsync_pull_port_start_as(const char *listen, const wsync_auth_t *auth, wsync_hs_purpose_t purpose,
                                        const char *who, wsync_pull_serve_fn serve, void *ctx,
                                        wsync_pull_port_t **out)
{
    char host[128] = "0.0.0.0";
    int port = 0;
    wsync_pull_port_t *pp;
    wsync_status_t st;
    if (listen && listen[0])
        WSYNC_CHECK(wsync_split_hostport(listen, host, sizeof(host), &port));
    pp = calloc(1, sizeof(*pp));
    WSYNC_CHECK_ALLOC(pp);
    pp->auth = *auth;
    pp->purpose = purpose;
    snprintf(pp->who, sizeof(pp->who), "%s", who);
    pp->serve = serve;
    pp->ctx = ctx;
    WSYNC_CHECK_GOTO(wsync_preauth_init(&pp->pre, PREAUTH_TOTAL, PREAUTH_PER_ADDR, PREAUTH_EVICT_MS), st, err_alloc);
    wsync_loglimit_init(&pp->warned, PREAUTH_LOG_MS, PREAUTH_LOG_BURST);
    pthread_mutex_init(&pp->lock, NULL);
    pthread_cond_init(&pp->cond, NULL);
    WSYNC_CHECK_GOTO(wsync_tcp_listen(host, port, &pp->fd, &pp->port), st, err_free);
    if (pthread_create(&pp->acceptor, NULL, accept_main, pp) != 0) {
        st = wsync_error(WSYNC_ERR_IO, "%s: cannot start the pull port's thread", who);
        goto err_close;
    }
    *out = pp;
    return WSYNC_OK;
err_close:
    close(pp->fd);
err_free:
    pthread_mutex_destroy(&pp->lock);
    pthread_cond_destroy(&pp->cond);
    wsync_loglimit_destroy(&pp->warned);
    wsync_preauth_destroy(&pp->pre);
err_alloc:
    free(pp);
    return st;
}

int wsync_pull_port_number(const wsync_pull_port_t *pp)
{
    return pp->port;
}

void wsync_pull_port_stop(wsync_pull_port_t *pp)
{
    if (pp == NULL)
        return;
    __atomic_store_n(&pp->stopping, 1, __ATOMIC_RELEASE);
    pthread_join(pp->acceptor, NULL);
    pthread_mutex_lock(&pp->lock);
    while (pp->active > 0)
        pthread_cond_wait(&pp->cond, &pp->lock);
    pthread_mutex_unlock(&pp->lock);
    close(pp->fd);
    pthread_mutex_destroy(&pp->lock);
    pthread_cond_destroy(&pp->cond);
    wsync_loglimit_destroy(&pp->warned);
    wsync_preauth_destroy(&pp->pre);
    free(pp);
}
