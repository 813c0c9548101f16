/* local_put.c: the local transport's put path: a put becomes a device copy
 * or joins a fused copy-digest kernel on the connection's stream; the
 * progress thread waits for each launch's event in order and tells both
 * sides (SENT here, a notice to the receiver). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/net/fdpass.h"
#include "common/pack/pack.h"
#include "common/transport/local_internal.h"

#if WSYNC_HAVE_CUDA
static void send_notice(lo_conn_t *c, uint64_t tag, uint64_t len, wsync_status_t st, const char *msg, int has_sum,
                        uint64_t sum)
{
    lo_notice_t n;
    memset(&n, 0, sizeof(n));
    n.tag = tag;
    n.len = len;
    n.status = st;
    n.has_sum = has_sum;
    n.sum = sum;
    if (msg)
        snprintf(n.message, sizeof(n.message), "%s", msg);
    if (!c->broken && lo_conn_send(c, &n, sizeof(n)) != WSYNC_OK) {
        __atomic_store_n(&c->broken, 1, __ATOMIC_RELEASE);
        wsync_cqueue_push_error(&((lo_transport_t *)c->base.transport)->cq, tag, -1, WSYNC_ERR_PEER,
                                "local: receiver at '%s' went away: %s", c->peer_name, wsync_last_error());
    }
}

/* The first n puts of op failed: both sides are told; the op goes back to
 * the free list. Called with c->lock. */
static void op_fail(lo_conn_t *c, lo_op_t *op, int n, wsync_status_t st, const char *msg)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    int i;
    for (i = 0; i < n; i++) {
        send_notice(c, op->it[i].tag, op->it[i].len, st, msg, 0, 0);
        wsync_cqueue_push_error(&t->cq, op->it[i].tag, -1, st, "local put to '%s': %s", c->peer_name, msg);
    }
    for (i = 0; i < op->n; i++)
        if (op->it[i].sum >= 0)
            __atomic_add_fetch(&c->sums_done, (uint64_t)op->it[i].nsum, __ATOMIC_RELEASE);
    op->next = c->free_ops;
    c->free_ops = op;
}

/* A free op (with its event), or NULL with the error set. Called with
 * c->lock on the transport's device. With WSYNC_TRACE its events time it
 * (lo_op_start; the progress thread's trace line). */
static lo_op_t *op_get(lo_conn_t *c)
{
    static int traced = -1;
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_op_t *op = c->free_ops;
    cudaError_t e;
    int timed = __atomic_load_n(&traced, __ATOMIC_RELAXED);
    if (timed < 0)
        __atomic_store_n(&traced, timed = wsync_setting_int(WSYNC_SET_TRACE) != 0, __ATOMIC_RELAXED);
    if (op != NULL) {
        c->free_ops = op->next;
    } else if ((op = calloc(1, sizeof(*op))) == NULL) {
        wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        return NULL;
    } else if ((e = cudaEventCreateWithFlags(&op->ev, timed ? cudaEventDefault : cudaEventDisableTiming)) !=
                   cudaSuccess ||
               (timed && (e = cudaEventCreate(&op->ev0)) != cudaSuccess)) {
        if (op->ev)
            cudaEventDestroy(op->ev);
        free(op);
        wsync_error(WSYNC_ERR_CUDA, "cannot create an event on cuda:%d: %s", t->device, cudaGetErrorString(e));
        return NULL;
    }
    op->next = NULL;
    op->n = 0;
    op->np = 0;
    op->ngparts = 0;
    op->kind = LO_OP_FUSED;
    op->bytes = 0;
    return op;
}

/* Traced ops: their start, before their launch on the stream. */
static void lo_op_start(lo_conn_t *c, lo_op_t *op)
{
    if (op->ev0)
        cudaEventRecord(op->ev0, c->stream);
}

/* Traced ops: how long the stream took over it, and the rate. */
static void trace_op_time(lo_conn_t *c, const lo_op_t *op)
{
    float ms = 0;
    if (op->ev0 == NULL || cudaEventElapsedTime(&ms, op->ev0, op->ev) != cudaSuccess || ms <= 0)
        return;
    wsync_trace("local: launch of %d put(s), %d piece(s), %llu bytes to '%s': %.1f us on the stream, %.0f GB/s",
                op->n, op->np, (unsigned long long)op->bytes, c->peer_name, ms * 1e3,
                (double)op->bytes / (ms * 1e6));
}

/* An op launched: into the queue the progress thread waits on. Called
 * with c->lock. */
static void op_queue(lo_conn_t *c, lo_op_t *op)
{
    if (c->tail)
        c->tail->next = op;
    else
        c->head = op;
    c->tail = op;
    c->nflight++;
    pthread_cond_signal(&c->cond);
}

/* Launches in flight on a connection before fused puts wait to go together:
 * LO_FLIGHT, or WSYNC_LOCAL_FLIGHT (1..64; a variable for measurement,
 * docs/CONFIG.md), read once. */
static int lo_flight(void)
{
    static int flight;
    int f = __atomic_load_n(&flight, __ATOMIC_RELAXED);
    if (f == 0) {
        const char *e = getenv("WSYNC_LOCAL_FLIGHT");
        f = e && atoi(e) >= 1 && atoi(e) <= 64 ? atoi(e) : LO_FLIGHT;
        __atomic_store_n(&flight, f, __ATOMIC_RELAXED);
    }
    return f;
}

/* The gathered fused puts as one kernel and its event. On failure every
 * put of it is failed to both sides but, with `own_last`, the last (the
 * caller's, which returns the error instead). Called with c->lock on the
 * transport's device. */
static wsync_status_t launch_pending(lo_conn_t *c, int own_last)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_op_t *op = c->pend;
    char msg[160];
    int e;
    if (op == NULL)
        return WSYNC_OK;
    c->pend = NULL;
    lo_op_start(c, op);
    if (op->kind == LO_OP_GATHER) {
        if (wsync_pack_cuda_launch_sum_batch(op->g, (size_t)op->np, c->dacc, c->dcount, c->stream) != WSYNC_OK) {
            snprintf(msg, sizeof(msg), "%s", wsync_last_error());
            op_fail(c, op, own_last ? op->n - 1 : op->n, WSYNC_ERR_CUDA, msg);
            return wsync_error(WSYNC_ERR_CUDA, "%s", msg);
        }
        e = (int)cudaEventRecord(op->ev, c->stream);
    } else {
        e = wsync_cuda_copy_digest_batch_async(op->pc, op->np, c->dacc, c->dcount, c->stream);
        if (e == 0)
            e = (int)cudaEventRecord(op->ev, c->stream);
    }
    if (e == 0) {
        op_queue(c, op);
        return WSYNC_OK;
    }
    snprintf(msg, sizeof(msg), "%s kernel of %d puts on cuda:%d: %s",
             op->kind == LO_OP_GATHER ? "pack-digest" : "copy-digest", op->n, t->device,
             cudaGetErrorString((cudaError_t)e));
    op_fail(c, op, own_last ? op->n - 1 : op->n, WSYNC_ERR_CUDA, msg);
    return wsync_error(WSYNC_ERR_CUDA, "%s", msg);
}

/* Sender: waits for each put's copy in order, then tells both sides. */
void *lo_progress_main(void *arg)
{
    lo_conn_t *c = arg;
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    cudaSetDevice(t->device);
    for (;;) {
        lo_op_t *op;
        cudaError_t e;
        int i;
        pthread_mutex_lock(&c->lock);
        while (c->head == NULL && !c->stopping)
            pthread_cond_wait(&c->cond, &c->lock);
        op = c->head;
        if (op) {
            c->head = op->next;
            if (c->head == NULL)
                c->tail = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        if (op == NULL)
            break; /* stopping and drained */
        e = cudaEventSynchronize(op->ev);
        if (e == cudaSuccess) {
            trace_op_time(c, op);
            for (i = 0; i < op->n; i++) {
                const lo_item_t *it = &op->it[i];
                wsync_completion_t done = {.kind = WSYNC_COMPLETION_SENT, .tag = it->tag, .len = it->len, .peer = -1};
                uint64_t sum = 0;
                int j;
                for (j = 0; it->sum >= 0 && j < it->nsum; j++) /* the kernel wrote them before the event fired */
                    sum += ((volatile uint64_t *)c->hsums)[(it->sum + j) % LO_SUMS];
                if (++c->ncopied % 32 == 0 || (uint32_t)it->tag == 0)
                    wsync_trace("local: put of piece %u (req %08x) copied, %llu on this connection",
                                (unsigned)it->tag, (unsigned)(it->tag >> 32), (unsigned long long)c->ncopied);
                send_notice(c, it->tag, it->len, WSYNC_OK, NULL, it->sum >= 0, sum);
                wsync_cqueue_push(&t->cq, &done);
            }
            for (i = 0; i < op->n; i++)
                if (op->it[i].sum >= 0)
                    __atomic_add_fetch(&c->sums_done, (uint64_t)op->it[i].nsum, __ATOMIC_RELEASE);
            pthread_mutex_lock(&c->lock); /* the op and its event serve later puts */
            op->next = c->free_ops;
            c->free_ops = op;
        } else {
            char msg[128];
            snprintf(msg, sizeof(msg), "device copy on cuda:%d failed: %s", t->device, cudaGetErrorString(e));
            pthread_mutex_lock(&c->lock);
            op_fail(c, op, op->n, WSYNC_ERR_CUDA, msg);
        }
        c->nflight--;
        if (c->pend && c->nflight < lo_flight())
            launch_pending(c, 0); /* a failure went to its puts */
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

/* Sums of the connection's ring free for `n` more parts. */
static int sums_free(lo_conn_t *c, size_t n)
{
    return c->sums_taken + n - __atomic_load_n(&c->sums_done, __ATOMIC_ACQUIRE) <= LO_SUMS;
}

/* One GPU: the put's parts join the gathered fused puts (each part's copy
 * computing its digest, keyed at its word of the put, lo_part_key, into
 * the next word of
 * the mapped ring, which the progress thread adds up once the launch of
 * its last part completed: stream order); they go as one kernel now if the
 * stream has less than LO_FLIGHT launches or the batch is full, else when
 * a launch completes. A put of more parts than a batch holds fills
 * batches, launched as they fill. Called with c->lock on the transport's
 * device. */
static wsync_status_t put_fused(lo_conn_t *c, uint64_t tag, const lo_part_t *ps, size_t n, const char *src,
                                uint64_t len)
{
    const int slot = (int)(c->sums_taken % LO_SUMS);
    lo_op_t *op;
    wsync_status_t st = WSYNC_OK;
    int mine = 0; /* this put's pieces in op, not launched yet */
    size_t i;
    if (c->pend && c->pend->kind != LO_OP_FUSED) /* packed puts before it go first (stream order) */
        WSYNC_CHECK(launch_pending(c, 0));
    op = c->pend;
    for (i = 0; i < n; i++) {
        if (op == NULL && (op = c->pend = op_get(c)) == NULL) {
            st = WSYNC_ERR_NOMEM;
            break;
        }
        op->pc[op->np++] = (wsync_cd_piece_t){.dst = ps[i].dst,
                                              .src = src + (ps[i].off - ps[0].off),
                                              .len = ps[i].len,
                                              .off = lo_part_key(ps, i),
                                              .hout = c->hsums_dev + (slot + (int)i) % LO_SUMS};
        mine++;
        if (op->np == LO_BATCH && i + 1 < n) { /* full before the put's last part */
            mine = 0;
            op = NULL;
            if ((st = launch_pending(c, 0)) != WSYNC_OK)
                break;
        }
    }
    if (st != WSYNC_OK) { /* the put fails: none of its parts waits in the batch, its sums are free */
        if (c->pend)
            c->pend->np -= mine;
        return st;
    }
    c->sums_taken += n;
    op->it[op->n++] = (lo_item_t){.tag = tag, .len = len, .sum = slot, .nsum = (int)n};
    op->bytes += len;
    if (op->np == LO_BATCH || c->nflight < lo_flight())
        return launch_pending(c, 1);
    return WSYNC_OK;
}

/* Any other put: a device copy of each part and one event, after the
 * gathered fused puts (stream order is put order). Called with c->lock on
 * the device. */
static wsync_status_t put_copy(lo_conn_t *c, uint64_t tag, const lo_part_t *ps, size_t n, const char *src,
                               uint64_t len)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_op_t *op;
    cudaError_t e = cudaSuccess;
    size_t i;
    WSYNC_CHECK(launch_pending(c, 0));
    if ((op = op_get(c)) == NULL)
        return WSYNC_ERR_NOMEM;
    op->it[0] = (lo_item_t){.tag = tag, .len = len, .sum = -1};
    op->n = 1;
    op->np = (int)n;
    op->bytes = len;
    lo_op_start(c, op);
    for (i = 0; i < n && e == cudaSuccess; i++)
        e = cudaMemcpyAsync(ps[i].dst, src + (ps[i].off - ps[0].off), ps[i].len, cudaMemcpyDeviceToDevice,
                            c->stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(op->ev, c->stream);
    if (e != cudaSuccess) {
        op->n = 0;
        op_fail(c, op, 0, WSYNC_ERR_CUDA, NULL);
        return wsync_error(WSYNC_ERR_CUDA, "device copy on cuda:%d: %s", t->device, cudaGetErrorString(e));
    }
    op_queue(c, op);
    return WSYNC_OK;
}

/* The put's destination: the key checked, the receiver's allocation mapped
 * (*dst its byte dst_off), *k the key. Called on the transport's device. */
static wsync_status_t put_dest(lo_conn_t *c, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                               size_t dst_off, size_t len, lo_key_t *k, char **dst)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    char *base = NULL;
    if (dst_key->len != sizeof(*k))
        return wsync_error(WSYNC_ERR_FORMAT, "transport local: key of %u bytes, expected %zu", dst_key->len,
                           sizeof(*k));
    memcpy(k, dst_key->data, sizeof(*k));
    if (k->magic != LO_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "transport local: not a local transport key");
    if (src->kind != WSYNC_MEM_CUDA || src_off + len > src->len || dst_off + len > k->len)
        return wsync_error(WSYNC_ERR_INVALID,
                           "local put of %zu bytes: source %zu+%zu of %zu, destination %zu of %llu", len, src_off,
                           len, src->len, dst_off, (unsigned long long)k->len);
    if (__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
        return wsync_error(WSYNC_ERR_PEER, "local put to '%s': the receiver went away", c->peer_name);
    WSYNC_CHECK(lo_map(t, k->pid, &k->handle, k->base, &base));
    *dst = base + k->alloc_off + dst_off;
    return WSYNC_OK;
}

static void trace_queued(lo_conn_t *c, uint64_t tag)
{
    if (++c->nqueued % 32 == 0 || (uint32_t)tag == 0)
        wsync_trace("local: put of piece %u (req %08x) queued, %llu on this connection", (unsigned)tag,
                    (unsigned)(tag >> 32), (unsigned long long)c->nqueued);
}

/* Are packed puts batched (put_gather_batched)? Yes, unless
 * WSYNC_LOCAL_GATHER_BATCH=0 (docs/CONFIG.md); read once. Measured on an
 * H100, tp_e2e_bench gpu 15G: TP=2 in place 20.1 -> 18.2 ms, staged 20.1 ->
 * 18.1 (bench/RESULTS.md 2026-12-05, evening). */
static int lo_gather_batch(void)
{
    static int on;
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v == 0) {
        const char *e = getenv("WSYNC_LOCAL_GATHER_BATCH");
        v = e && strcmp(e, "0") == 0 ? 2 : 1;
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}

/* A packed put (its n parts: the put's bytes from parts[i].at land at
 * parts[i].dst) joins the pending batch of packed puts (a pending batch of
 * fused puts, or one whose parts table this put's would overflow, goes
 * first), launched as one kernel as fused puts are (put_fused). Checked
 * here, so a put the kernel cannot take is declined
 * (WSYNC_ERR_UNSUPPORTED) before anything is queued. Called with c->lock
 * on the device. */
static wsync_status_t put_gather_batched(lo_conn_t *c, uint64_t tag, const wsync_pack_part_t *parts, size_t n,
                                         const char *src, const struct wsync_pack_plan *plan, size_t len,
                                         uint64_t key_off)
{
    const int slot = (int)(c->sums_taken % LO_SUMS);
    wsync_status_t st = wsync_pack_cuda_sum_check(plan, parts, n, src);
    lo_op_t *op;
    if (st != WSYNC_OK)
        return st == WSYNC_ERR_INVALID ? WSYNC_ERR_UNSUPPORTED : st;
    if (!sums_free(c, 1))
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "every sum of the connection is in use");
    if (c->pend && (c->pend->kind != LO_OP_GATHER || c->pend->ngparts + (int)n > WSYNC_PACK_SUM_BATCH_PARTS))
        WSYNC_CHECK(launch_pending(c, 0));
    if ((op = c->pend) == NULL) {
        if ((op = c->pend = op_get(c)) == NULL)
            return WSYNC_ERR_NOMEM;
        op->kind = LO_OP_GATHER;
    }
    memcpy(op->gparts + op->ngparts, parts, n * sizeof(*parts));
    op->g[op->np++] = (wsync_pack_sum_put_t){.plan = plan,
                                             .parts = op->gparts + op->ngparts,
                                             .nparts = n,
                                             .src_base = src,
                                             .key_off = key_off,
                                             .hout = c->hsums_dev + slot};
    op->ngparts += (int)n;
    c->sums_taken++;
    op->it[op->n++] = (lo_item_t){.tag = tag, .len = len, .sum = slot, .nsum = 1};
    op->bytes += len;
    if (op->np == LO_BATCH || c->nflight < lo_flight())
        return launch_pending(c, 1);
    return WSYNC_OK;
}

/* A packed put gathered straight into the receiver's window (or, cut by
 * its redirect, into the parts ps[0..np)) by one pack kernel that sums
 * what it writes (pack.h, wsync_pack_cuda_launch_sum_parts), after the
 * gathered fused puts (stream order is put order); its sum (the put's, as
 * one range at key_off) goes with its notice as a fused put's does. Called
 * with c->lock on the device; WSYNC_ERR_UNSUPPORTED when the plan cannot
 * launch so here (the parts cut one of its tasks, say). With batching on
 * (the default), it goes by put_gather_batched instead. */
static wsync_status_t put_gather_locked(lo_conn_t *c, uint64_t tag, const lo_part_t *ps, size_t np, const char *src,
                                        const struct wsync_pack_plan *plan, size_t len, uint64_t key_off)
{
    const int slot = (int)(c->sums_taken % LO_SUMS);
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    wsync_pack_part_t parts[WSYNC_PACK_MAX_PARTS];
    wsync_status_t st;
    cudaError_t e;
    lo_op_t *op;
    size_t i;
    if (np > WSYNC_PACK_MAX_PARTS)
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "the put crosses %zu parts of the receiver's redirect", np);
    for (i = 0; i < np; i++)
        parts[i] = (wsync_pack_part_t){.at = ps[i].off - key_off, .dst = ps[i].dst};
    if (lo_gather_batch())
        return put_gather_batched(c, tag, parts, np, src, plan, len, key_off);
    if (!sums_free(c, 1))
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "every sum of the connection is in use");
    WSYNC_CHECK(launch_pending(c, 0));
    if ((op = op_get(c)) == NULL)
        return WSYNC_ERR_NOMEM;
    lo_op_start(c, op);
    st = wsync_pack_cuda_launch_sum_parts(plan, parts, np, src, key_off, c->dacc, c->dcount, c->hsums_dev + slot,
                                          c->stream);
    if (st != WSYNC_OK) { /* nothing launched: the op goes back unused */
        op->next = c->free_ops;
        c->free_ops = op;
        return st == WSYNC_ERR_INVALID ? WSYNC_ERR_UNSUPPORTED : st;
    }
    c->sums_taken++;
    op->it[0] = (lo_item_t){.tag = tag, .len = len, .sum = slot, .nsum = 1};
    op->n = 1;
    op->np = (int)np;
    op->bytes = len;
    if ((e = cudaEventRecord(op->ev, c->stream)) != cudaSuccess) {
        op_fail(c, op, 0, WSYNC_ERR_CUDA, NULL);
        return wsync_error(WSYNC_ERR_CUDA, "event after a pack kernel on cuda:%d: %s", t->device,
                           cudaGetErrorString(e));
    }
    op_queue(c, op);
    return WSYNC_OK;
}

/* A put (plan NULL: a copy, fused with its sum when the receiver is on
 * this GPU and a sum is free) or a packed put gathered by `plan` (only to
 * a receiver on this GPU, else WSYNC_ERR_UNSUPPORTED, as from
 * put_gather_locked, unwrapped: the caller then packs and puts it). A put
 * the receiver's redirect cuts goes in parts (local_redirect.c): a copy
 * with a sum each, or one gather writing each task into its part. The
 * device first: the handle is opened in the current device's context and
 * peer access is enabled for that device only; a request thread that had
 * made no CUDA call would open it on device 0 even in a trainer on cuda:1. */
static wsync_status_t put_any(wsync_conn_t *cn, wsync_region_t *src, size_t src_off,
                              const struct wsync_pack_plan *plan, const wsync_blob_t *dst_key, size_t dst_off,
                              size_t len, uint64_t tag)
{
    lo_conn_t *c = (lo_conn_t *)cn;
    lo_transport_t *t = (lo_transport_t *)cn->transport;
    lo_key_t k;
    char *dst = NULL, *from;
    lo_part_t one, *ps = &one, *cut = NULL;
    size_t np = 1;
    wsync_status_t st = WSYNC_OK;
    int prev = 0;
    WSYNC_CHECK_GOTO(enter_device(t->device, &prev), st, fail);
    /* With a plan, src_off + len: the runs read inside the region (the
     * plan's span of it is the caller's to keep inside); the check is the
     * destination's. */
    WSYNC_CHECK_GOTO(put_dest(c, src, src_off, dst_key, dst_off, len, &k, &dst), st, fail_dev);
    if (plan != NULL && (k.device != t->device || len == 0)) {
        st = wsync_error(WSYNC_ERR_UNSUPPORTED, "the receiver is on cuda:%d, not this GPU", k.device);
        goto fail_dev;
    }
    one = (lo_part_t){.dst = dst, .off = dst_off, .len = len};
    if (k.gen != 0 && len > 0) {
        WSYNC_CHECK_GOTO(lo_put_parts(c, &k, dst - dst_off, dst_off, len, &cut, &np), st, fail_dev);
        ps = cut;
    }
    from = (char *)src->ptr + src_off;
    pthread_mutex_lock(&c->lock);
    if (plan != NULL)
        st = put_gather_locked(c, tag, ps, np, from, plan, len, dst_off);
    else if (len > 0 && k.device == t->device && sums_free(c, np) && lo_parts_summable(ps, np))
        st = put_fused(c, tag, ps, np, from, len);
    else
        st = put_copy(c, tag, ps, np, from, len);
    if (st == WSYNC_OK)
        trace_queued(c, tag);
    pthread_mutex_unlock(&c->lock);
fail_dev:
    free(cut);
    leave_device(t->device, prev);
    if (st == WSYNC_OK || (plan != NULL && st == WSYNC_ERR_UNSUPPORTED))
        return st;
fail:
    return wsync_error(st, "local %sput of %zu bytes (tag %llx) to '%s': %s", plan ? "packed " : "", len,
                       (unsigned long long)tag, c->peer_name, wsync_last_error());
}

wsync_status_t lo_put(wsync_conn_t *cn, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                      size_t dst_off, size_t len, uint64_t tag)
{
    return put_any(cn, src, src_off, NULL, dst_key, dst_off, len, tag);
}

wsync_status_t lo_put_gather(wsync_conn_t *cn, wsync_region_t *src, size_t src_off,
                             const struct wsync_pack_plan *plan, const wsync_blob_t *dst_key, size_t dst_off,
                             size_t len, uint64_t tag)
{
    return put_any(cn, src, src_off, plan, dst_key, dst_off, len, tag);
}

/* The gathered fused puts go now (the caller's batch of puts ended). */
void lo_put_flush(wsync_conn_t *cn)
{
    lo_conn_t *c = (lo_conn_t *)cn;
    lo_transport_t *t = (lo_transport_t *)cn->transport;
    int prev = 0;
    if (enter_device(t->device, &prev) != WSYNC_OK)
        return;
    pthread_mutex_lock(&c->lock);
    launch_pending(c, 0); /* a failure went to its puts */
    pthread_mutex_unlock(&c->lock);
    leave_device(t->device, prev);
}
#endif
