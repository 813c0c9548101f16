/* nccl_peer.c: the nccl transport's put path: each pair's worker sets up
 * its communicator, issues queued sends/receives in groups on its stream and
 * retires them in order as their events complete, failing only its pair on
 * an error or a stuck group. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/net/handshake.h"
#include "common/net/sock.h"
#include "common/base/settings.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"
#include "common/base/util.h"
#include "common/base/log.h"
#include "common/transport/nccl_internal.h"

#if WSYNC_HAVE_NCCL && WSYNC_HAVE_CUDA
/* Waits for the pair's non-blocking communicator to leave ncclInProgress,
 * up to timeout_ms, or until the pair is being closed (a close never waits
 * out a set-up whose peer is gone). The caller aborts it on failure. */
static wsync_status_t comm_wait(nc_peer_t *p, int timeout_ms, const char *what)
{
    ncclComm_t comm = p->comm;
    int peer = p->id;
    uint64_t deadline = wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    ncclResult_t r = ncclInProgress;
    for (;;) {
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess)
            r = ncclInternalError;
        if (r != ncclInProgress)
            break;
        if (wsync_now_ns() > deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "nccl %s with peer %d: no progress in %d ms", what, peer,
                               timeout_ms);
        if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
            return wsync_error(WSYNC_ERR_PEER, "nccl %s with peer %d: transport closed", what, peer);
        usleep(20);
    }
    if (r != ncclSuccess)
        return wsync_error(WSYNC_ERR_NCCL, "nccl %s with peer %d: %s", what, peer, ncclGetErrorString(r));
    return WSYNC_OK;
}

static wsync_status_t comm_init(nc_peer_t *p)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    wsync_status_t st;
    cfg.blocking = 0;
    CUDA_CHECK(cudaSetDevice(p->t->device));
    NCCL_CHECK(ncclCommInitRankConfig(&p->comm, 2, p->uid, p->sender ? 0 : 1, &cfg));
    st = comm_wait(p, p->t->timeout_ms, "communicator set-up");
    if (st != WSYNC_OK) {
        ncclCommAbort(p->comm);
        p->comm = NULL;
    }
    return st;
}

static void fail_ops(nc_peer_t *p, nc_op_t *ops, const char *why)
{
    while (ops) {
        nc_op_t *n = ops->next;
        wsync_cqueue_push_error(&p->t->cq, ops->tag, p->sender ? -1 : p->id, WSYNC_ERR_PEER, "%s", why);
        free(ops);
        ops = n;
    }
}

int nc_group_max = NC_GROUP_MAX;

/* A full group, or a batch's end, is queued: a group can be issued. */
static int group_ready(const nc_peer_t *p)
{
    return p->head && (p->nqueued >= nc_group_max || p->nlast > 0);
}

/* Issues up to NC_GROUP_MAX queued ops as one group. Called with p->lock
 * held; drops it while calling NCCL. */
static wsync_status_t issue_group(nc_peer_t *p, cudaStream_t s, nc_group_t *g)
{
    wsync_status_t st = WSYNC_OK;
    ncclResult_t r;
    int i;
    g->n = 0;
    while (p->head && g->n < nc_group_max) {
        nc_op_t *o = p->head;
        g->ops[g->n++] = o;
        p->head = o->next;
        p->nqueued--;
        if (o->last) {
            p->nlast--;
            break;
        }
    }
    if (p->head == NULL)
        p->tail = NULL;
    pthread_mutex_unlock(&p->lock);
    ncclGroupStart();
    for (i = 0; i < g->n; i++) {
        nc_op_t *o = g->ops[i];
        r = o->send ? ncclSend(o->ptr, o->len, ncclUint8, 1, p->comm, s)
                    : ncclRecv(o->ptr, o->len, ncclUint8, 0, p->comm, s);
        if (r != ncclSuccess && r != ncclInProgress) {
            st = wsync_error(WSYNC_ERR_NCCL, "nccl %s of %zu bytes (tag %llu): %s", o->send ? "send" : "recv",
                             o->len, (unsigned long long)o->tag, ncclGetErrorString(r));
            break;
        }
    }
    r = ncclGroupEnd();
    if (st == WSYNC_OK && r != ncclSuccess && r != ncclInProgress)
        st = wsync_error(WSYNC_ERR_NCCL, "nccl group: %s", ncclGetErrorString(r));
    if (st == WSYNC_OK)
        st = comm_wait(p, p->t->op_timeout_ms, "enqueue");
    if (st == WSYNC_OK && cudaEventRecord(g->done, s) != cudaSuccess)
        st = wsync_error(WSYNC_ERR_CUDA, "cudaEventRecord after a nccl group failed");
    g->issued_ns = wsync_now_ns();
    pthread_mutex_lock(&p->lock);
    return st;
}

static void complete_group(nc_peer_t *p, nc_group_t *g)
{
    int i;
    for (i = 0; i < g->n; i++) {
        nc_op_t *o = g->ops[i];
        wsync_completion_t c = {.kind = o->send ? WSYNC_COMPLETION_SENT : WSYNC_COMPLETION_LANDED,
                                .status = WSYNC_OK,
                                .tag = o->tag,
                                .len = o->len,
                                .peer = o->send ? -1 : p->id};
        wsync_cqueue_push(&p->t->cq, &c);
        free(o);
    }
    g->n = 0;
}

/* Expects may be queued before their sender connects; a sender that never
 * comes fails them after op_timeout rather than never. Returns with
 * p->lock released. */
static wsync_status_t wait_for_uid(nc_peer_t *p)
{
    nc_transport_t *t = p->t;
    pthread_mutex_lock(&p->lock);
    while (!p->have_uid && !p->stop) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 100);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        if (p->head && wsync_now_ns() - p->first_op_ns > (uint64_t)t->op_timeout_ms * 1000000ULL) {
            pthread_mutex_unlock(&p->lock);
            return wsync_error(WSYNC_ERR_TIMEOUT, "nccl: sender %d never connected within %d ms", p->id,
                               t->op_timeout_ms);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return WSYNC_OK;
}

/* The oldest group in flight: retired (*retired = 1) once its event fired;
 * an error when the stream or the communicator failed or it is stuck past
 * op_timeout; else a short wait. Called without p->lock. */
static wsync_status_t poll_group(nc_peer_t *p, nc_group_t *g, int *retired)
{
    nc_transport_t *t = p->t;
    cudaError_t e = cudaEventQuery(g->done);
    ncclResult_t r = ncclSuccess;
    wsync_status_t st = WSYNC_OK;
    *retired = 0;
    if (e == cudaSuccess) {
        complete_group(p, g);
        *retired = 1;
    } else if (e != cudaErrorNotReady) {
        st = wsync_error(WSYNC_ERR_CUDA, "nccl transfer with peer %d: %s", p->id, cudaGetErrorString(e));
    } else if (ncclCommGetAsyncError(p->comm, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
        st = wsync_error(WSYNC_ERR_PEER, "nccl transfer with peer %d failed: %s", p->id, ncclGetErrorString(r));
    } else if (wsync_now_ns() - g->issued_ns > (uint64_t)t->op_timeout_ms * 1000000ULL) {
        st = wsync_error(WSYNC_ERR_TIMEOUT,
                         "nccl transfer with peer %d: no completion in %d ms "
                         "(peer dead or not posting the matching ops)",
                         p->id, t->op_timeout_ms);
    } else {
        usleep(10);
    }
    return st;
}

/* The pair failed (the last error says why): abort its communicator, mark
 * it dead and fail every op, the gn groups in flight from gh and the queued
 * ones. */
static void peer_fail(nc_peer_t *p, nc_group_t *groups, int gh, int gn)
{
    char why[160];
    int i;
    snprintf(why, sizeof(why), "%s", wsync_last_error());
    wsync_log(WSYNC_LOG_WARN, "%s", why);
    if (p->comm) {
        ncclCommAbort(p->comm);
        p->comm = NULL;
    }
    pthread_mutex_lock(&p->lock);
    p->dead = 1;
    pthread_cond_broadcast(&p->cond);
    for (i = 0; i < gn; i++) {
        nc_group_t *g = &groups[(gh + i) % NC_INFLIGHT_MAX];
        int k;
        for (k = 0; k < g->n; k++) {
            g->ops[k]->next = NULL;
            fail_ops(p, g->ops[k], why);
        }
        g->n = 0;
    }
    fail_ops(p, p->head, why);
    p->head = p->tail = NULL;
    p->nqueued = p->nlast = 0;
    pthread_mutex_unlock(&p->lock);
}

/* Ops still in flight at close: give them a short grace so the
 * communicator is not destroyed under running kernels; past it the caller
 * has given up on them (a failed pull closes its transport) and abort stops
 * the kernels. Waiting the full op timeout here made a failed pull's close
 * take a minute. */
static void drain_groups(nc_peer_t *p, nc_group_t *groups, int gh, int gn)
{
    int grace_ms = p->t->op_timeout_ms < 2000 ? p->t->op_timeout_ms : 2000;
    uint64_t deadline = wsync_now_ns() + (uint64_t)grace_ms * 1000000ULL;
    int i;
    for (i = 0; i < gn; i++) {
        cudaEvent_t ev = groups[(gh + i) % NC_INFLIGHT_MAX].done;
        while (cudaEventQuery(ev) == cudaErrorNotReady && wsync_now_ns() < deadline)
            usleep(100);
    }
    if (gn > 0 && wsync_now_ns() >= deadline && p->comm) {
        ncclCommAbort(p->comm);
        p->comm = NULL;
    }
}

/* The pair's worker: sets up the communicator, then keeps up to
 * NC_INFLIGHT_MAX groups in flight, retiring them in order as their events
 * complete. A communicator error or a group stuck past op_timeout aborts
 * the communicator and fails every op of this pair (and only this pair). */
static void *peer_main(void *arg)
{
    nc_peer_t *p = arg;
    nc_transport_t *t = p->t;
    nc_group_t groups[NC_INFLIGHT_MAX];
    int gh = 0, gn = 0, i, retired;
    cudaStream_t s = NULL;
    wsync_status_t st = WSYNC_OK;

    memset(groups, 0, sizeof(groups));
    if (cudaSetDevice(t->device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        st = wsync_error(WSYNC_ERR_CUDA, "nccl worker: cannot create a stream on cuda:%d", t->device);
        goto fail;
    }
    for (i = 0; i < NC_INFLIGHT_MAX; i++)
        if (cudaEventCreateWithFlags(&groups[i].done, cudaEventDisableTiming) != cudaSuccess) {
            st = wsync_error(WSYNC_ERR_CUDA, "nccl worker: cannot create events");
            goto fail;
        }
    if ((st = wait_for_uid(p)) != WSYNC_OK)
        goto fail;
    if (p->stop)
        goto out;
    if (p->comm == NULL) {
        st = comm_init(p);
        if (st != WSYNC_OK)
            goto fail;
    }
    pthread_mutex_lock(&p->lock);
    p->ready = 1;
    pthread_cond_broadcast(&p->cond);
    while (!p->stop) {
        if (group_ready(p) && gn < NC_INFLIGHT_MAX) {
            st = issue_group(p, s, &groups[(gh + gn) % NC_INFLIGHT_MAX]);
            gn++;
            if (st != WSYNC_OK) {
                pthread_mutex_unlock(&p->lock);
                goto fail;
            }
            continue;
        }
        if (gn == 0 && p->head) {
            /* A batch the caller never closed must not wait forever. */
            struct timespec ts;
            if (wsync_now_ns() - p->head->queued_ns > (uint64_t)t->op_timeout_ms * 1000000ULL) {
                pthread_mutex_unlock(&p->lock);
                st = wsync_error(WSYNC_ERR_INVALID,
                                 "nccl: %d ops with peer %d queued for %d ms in a batch "
                                 "that never ended (a put_flush/expect_flush is missing)",
                                 p->nqueued, p->id, t->op_timeout_ms);
                goto fail;
            }
            wsync_abstime_after_ms(&ts, 100);
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
            continue;
        }
        if (gn == 0) {
            pthread_cond_wait(&p->cond, &p->lock);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        st = poll_group(p, &groups[gh], &retired);
        if (retired) {
            gh = (gh + 1) % NC_INFLIGHT_MAX;
            gn--;
        }
        if (st != WSYNC_OK)
            goto fail;
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    goto out;

fail:
    peer_fail(p, groups, gh, gn);
    gn = 0;
out:
    drain_groups(p, groups, gh, gn);
    for (i = 0; i < NC_INFLIGHT_MAX; i++)
        if (groups[i].done)
            cudaEventDestroy(groups[i].done);
    if (s)
        cudaStreamDestroy(s);
    return NULL;
}

wsync_status_t nc_peer_new(nc_transport_t *t, int id, int sender, nc_peer_t **out)
{
    nc_peer_t *p = calloc(1, sizeof(*p));
    WSYNC_CHECK_ALLOC(p);
    p->super.transport = &t->super;
    p->t = t;
    p->id = id;
    p->sender = sender;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->worker, NULL, peer_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
        return wsync_error(WSYNC_ERR_IO, "nccl: cannot start a worker thread");
    }
    p->worker_started = 1;
    *out = p;
    return WSYNC_OK;
}

void nc_peer_free(nc_peer_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (p->worker_started)
        pthread_join(p->worker, NULL);
    /* Abort, not finalize + destroy: the worker has let every op finish
     * (or given up on it), and finalize/destroy synchronise with the other
     * rank of the pair, which may be gone or still using its side (a
     * trainer keeps serving after one engine closes): that waited forever. */
    if (p->comm)
        ncclCommAbort(p->comm);
    fail_ops(p, p->head, "transport closed");
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}

wsync_status_t nc_peer_enqueue(nc_peer_t *p, int send, void *ptr, size_t len, uint64_t tag)
{
    nc_op_t *o;
    if (p->dead)
        return wsync_error(WSYNC_ERR_PEER, "nccl: the pair with peer %d has failed; reconnect", p->id);
    o = calloc(1, sizeof(*o));
    WSYNC_CHECK_ALLOC(o);
    *o = (nc_op_t){.send = send, .ptr = ptr, .len = len, .tag = tag, .queued_ns = wsync_now_ns()};
    pthread_mutex_lock(&p->lock);
    if (p->first_op_ns == 0)
        p->first_op_ns = wsync_now_ns();
    if (p->tail)
        p->tail->next = o;
    else
        p->head = o;
    p->tail = o;
    p->nqueued++;
    if (p->nqueued >= nc_group_max)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return WSYNC_OK;
}

/* The batch ends with the last queued op. Nothing queued: the batch ended
 * on a full group, already issued. */
void nc_peer_flush(nc_peer_t *p)
{
    pthread_mutex_lock(&p->lock);
    if (p->tail && !p->tail->last) {
        p->tail->last = 1;
        p->nlast++;
    }
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

#endif
