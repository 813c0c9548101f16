/* requests.c: an attempt's requests to the trainer ranks: where each one
 * listens for pull requests, and one thread per request that sends it and
 * waits for the answer (the puts land meanwhile, over the data transport),
 * over a connection kept from the last version when there is one. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/proto/msg.h"
#include "common/base/util.h"
#include "engine_side/receiver_internal.h"

/* A kept connection to `addr`, taken out of the list, or -1. */
static int take_conn(recv_pull_conns_t *pc, const char *addr)
{
    int k, fd = -1;
    if (pc == NULL)
        return -1;
    pthread_mutex_lock(&pc->lock);
    for (k = 0; k < pc->n; k++)
        if (strcmp(pc->c[k].addr, addr) == 0) {
            fd = pc->c[k].fd;
            pc->c[k] = pc->c[--pc->n];
            break;
        }
    pthread_mutex_unlock(&pc->lock);
    return fd;
}

static void give_conn(recv_pull_conns_t *pc, const char *addr, int fd)
{
    if (pc == NULL) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&pc->lock);
    if (pc->n < RECV_PULL_CONNS) {
        snprintf(pc->c[pc->n].addr, sizeof(pc->c[pc->n].addr), "%s", addr);
        pc->c[pc->n++].fd = fd;
        fd = -1;
    }
    pthread_mutex_unlock(&pc->lock);
    if (fd >= 0)
        close(fd); /* the list is full */
}

void recv_pull_conns_init(recv_pull_conns_t *pc)
{
    pthread_mutex_init(&pc->lock, NULL);
    pc->n = 0;
}

void recv_pull_conns_drop(recv_pull_conns_t *pc)
{
    pthread_mutex_lock(&pc->lock);
    while (pc->n > 0)
        close(pc->c[--pc->n].fd);
    pthread_mutex_unlock(&pc->lock);
}

static void set_fd(recv_request_t *q, int fd)
{
    pthread_mutex_lock(&q->lock);
    q->fd = fd;
    if (fd >= 0 && q->aborted)
        shutdown(fd, SHUT_RDWR);
    pthread_mutex_unlock(&q->lock);
}

static int aborted(recv_request_t *q)
{
    int a;
    pthread_mutex_lock(&q->lock);
    a = q->aborted;
    pthread_mutex_unlock(&q->lock);
    return a;
}

static int left_ms(const recv_request_t *q)
{
    int left = (int)((q->deadline - wsync_now_ns()) / 1000000ULL);
    return left > 0 ? left : 1;
}

/* The request over a new connection: connect, then the handshake proving
 * the token (bound to the trainer's challenge) carries it. */
static wsync_status_t call_new(recv_request_t *q, int *fd, json_t **reply)
{
    int left = left_ms(q);
    wsync_status_t st;
    if (q->connect_ms > 0 && left > q->connect_ms)
        left = q->connect_ms;
    /* The address is a registration: the peer listened there. A refusal
     * means it is gone (died, or restarted elsewhere): the attempt ends now
     * and the next one reads the registrations again; only a silent peer
     * waits for the deadline. */
    st = wsync_tcp_dial(q->pull_addr, left, 0, fd);
    if (st != WSYNC_OK && strstr(wsync_last_error(), "refused"))
        return wsync_error(WSYNC_ERR_PEER, "%s; nothing listens there any more (the process stopped or restarted)",
                           wsync_last_error());
    if (st != WSYNC_OK)
        return st;
    set_fd(q, *fd);
    /* rank -1: another engine node's relay, which proves and refuses as itself */
    return wsync_msg_call(*fd, q->auth, q->rank < 0 ? WSYNC_HS_RELAY : WSYNC_HS_PULL, q->pull_addr, q->msg,
                          left_ms(q), reply);
}

static void *req_main(void *arg)
{
    recv_request_t *q = arg;
    json_t *reply = NULL;
    int fd = take_conn(q->conns, q->pull_addr);

    if (fd >= 0) {
        /* A kept connection proved the token when it opened; one the peer
         * closed meanwhile (it restarted, or dropped an idle one) fails at
         * once, before the peer read anything: then a new one. */
        set_fd(q, fd);
        q->status = wsync_msg_send(fd, q->msg);
        if (q->status == WSYNC_OK)
            q->status = wsync_msg_recv(fd, left_ms(q), &reply);
        if (q->status != WSYNC_OK && !aborted(q) && wsync_now_ns() < q->deadline) {
            set_fd(q, -1);
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0)
        q->status = call_new(q, &fd, &reply);
    if (q->status == WSYNC_OK && wsync_pull_reply_from_json(reply, &q->reply) != WSYNC_OK)
        q->status = WSYNC_ERR_PEER; /* malformed: named with who sent it below */
    if (q->status != WSYNC_OK) {
        snprintf(q->error, sizeof(q->error), "%s at %s: %s", q->who, q->pull_addr, wsync_last_error());
    } else if (q->reply.error[0] != '\0') {
        q->status = WSYNC_ERR_PEER;
        snprintf(q->error, sizeof(q->error), "%.*s", (int)sizeof(q->error) - 1, q->reply.error);
        wsync_pull_reply_clear(&q->reply);
    } /* else q->reply is read after done, by the attempt */
    json_decref(reply);
    set_fd(q, -1);
    if (fd >= 0 && q->status == WSYNC_OK && !aborted(q))
        q->keep_fd = fd; /* answered: given back by recv_request_end */
    else if (fd >= 0)
        close(fd);
    pthread_mutex_lock(&q->lock);
    __atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

wsync_status_t recv_request_start(recv_request_t *q, recv_pull_conns_t *conns, const wsync_auth_t *auth, int rank,
                                  const char *addr, json_t *msg, uint64_t deadline)
{
    q->conns = conns;
    q->keep_fd = -1;
    q->auth = auth;
    q->rank = rank;
    q->deadline = deadline;
    q->msg = msg;
    q->fd = -1;
    q->aborted = 0;
    snprintf(q->pull_addr, sizeof(q->pull_addr), "%s", addr);
    if (q->who[0] == '\0')
        snprintf(q->who, sizeof(q->who), "trainer rank %d", rank);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    if (msg == NULL || pthread_create(&q->th, NULL, req_main, q) != 0) {
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        return wsync_error(WSYNC_ERR_NOMEM, "cannot start the request to %s", q->who);
    }
    q->started = 1;
    return WSYNC_OK;
}

int recv_request_failed(const recv_request_t *q)
{
    return q->started && __atomic_load_n(&q->done, __ATOMIC_ACQUIRE) && q->status != WSYNC_OK;
}

int recv_request_done(const recv_request_t *q)
{
    return !q->started || __atomic_load_n(&q->done, __ATOMIC_ACQUIRE);
}

void recv_request_wait(recv_request_t *q, int ms)
{
    struct timespec until;
    if (!q->started)
        return;
    wsync_abstime_after_ms(&until, ms);
    pthread_mutex_lock(&q->lock);
    while (!__atomic_load_n(&q->done, __ATOMIC_ACQUIRE) && pthread_cond_timedwait(&q->cond, &q->lock, &until) == 0)
        ;
    pthread_mutex_unlock(&q->lock);
}

void recv_request_abort(recv_request_t *q)
{
    if (!q->started)
        return;
    pthread_mutex_lock(&q->lock);
    q->aborted = 1;
    if (q->fd >= 0)
        shutdown(q->fd, SHUT_RDWR);
    pthread_mutex_unlock(&q->lock);
}

void recv_request_end(recv_request_t *q)
{
    if (q->started) {
        pthread_join(q->th, NULL);
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        if (q->keep_fd >= 0)
            give_conn(q->conns, q->pull_addr, q->keep_fd);
        q->keep_fd = -1;
    }
    json_decref(q->msg);
    wsync_pull_reply_clear(&q->reply);
    q->msg = NULL;
    q->started = 0;
}

int recv_trainer_replaced(wsync_receiver_t *r, const recv_request_t *reqs, int world, uint64_t quiet_ns, char *why,
                          size_t len)
{
    json_t *arr = NULL, *e;
    long http = 0;
    size_t i;
    int found = 0;
    /* Once, not retried: with the endpoint away the deadline still holds. */
    if (wsync_control_request(r->control, "GET", "/v1/trainers", NULL, 2000, &http, &arr) != WSYNC_OK ||
        http != 200 || !json_is_array(arr)) {
        json_decref(arr);
        return 0;
    }
    json_array_foreach(arr, i, e)
    {
        json_int_t rk = json_integer_value(json_object_get(e, "rank"));
        const char *pull = json_string_value(json_object_get(json_object_get(e, "endpoint"), "pull"));
        if (found || rk < 0 || rk >= world || pull == NULL || !reqs[rk].started || recv_request_done(&reqs[rk]) ||
            strcmp(pull, reqs[rk].pull_addr) == 0)
            continue;
        snprintf(why, len,
                 "trainer rank %d at %s sent nothing for %.1f s and another process registered as trainer rank %d "
                 "(at %s): the one asked was replaced and will not answer",
                 (int)rk, reqs[rk].pull_addr, (double)quiet_ns / 1e9, (int)rk, pull);
        found = 1;
    }
    json_decref(arr);
    return found;
}

wsync_status_t recv_trainers(wsync_receiver_t *r, json_t **out)
{
    if (r->run.trainers) {
        *out = json_incref(r->run.trainers);
        return WSYNC_OK;
    }
    return wsync_control_trainers(r->control, out);
}

wsync_status_t recv_trainer_addrs(wsync_receiver_t *r, int world, char (*addrs)[160], const char **tnames)
{
    json_t *arr = NULL, *e;
    size_t i;
    int rank;
    WSYNC_CHECK(recv_trainers(r, &arr));
    for (rank = 0; rank < world; rank++) {
        addrs[rank][0] = '\0';
        tnames[rank] = r->transport_name;
    }
    json_array_foreach(arr, i, e)
    {
        json_int_t rk = json_integer_value(json_object_get(e, "rank"));
        json_t *ep = json_object_get(e, "endpoint");
        const char *pull = json_string_value(json_object_get(ep, "pull"));
        if (rk >= 0 && rk < world && pull) {
            snprintf(addrs[rk], 160, "%s", pull);
            tnames[rk] = recv_transport_for(r, json_string_value(json_object_get(ep, "host_id")),
                                            json_string_value(json_object_get(ep, "device")));
        }
    }
    json_decref(arr);
    return WSYNC_OK;
}

void recv_pull_request_init(wsync_pull_request_t *pr, const wsync_receiver_t *r, uint64_t v, uint32_t reqid,
                            const recv_transport_t *rt, int slot, const char *layout_digest, uint64_t deadline)
{
    uint64_t now = wsync_now_ns();
    *pr = (wsync_pull_request_t){.version = v,
                                 .local_rank = r->cfg.local_rank,
                                 .local_ranks = r->cfg.local_world,
                                 .req = reqid,
                                 .addr = rt->addr,
                                 .key = rt->key[slot],
                                 .timeout_ms = deadline > now ? (int64_t)((deadline - now) / 1000000ULL) : 1};
    snprintf(pr->engine, sizeof(pr->engine), "%s", r->engine_id);
    snprintf(pr->transport, sizeof(pr->transport), "%s", rt->ops->name);
    snprintf(pr->layout_digest, sizeof(pr->layout_digest), "%s", layout_digest);
}
