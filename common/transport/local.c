/* local.c: the "local" transport: sender and receiver on one host, GPU memory
 * only. The receiver's key carries a CUDA IPC handle of the allocation under
 * its region; the sender maps it once and puts are device-to-device copies on
 * a dedicated stream of the source's device (NVLink or the copy engine of one
 * GPU, no host bounce). Completion travels back over an abstract Unix
 * socket: the sender's progress thread waits for each put's event in order,
 * queues SENT locally and writes a notice {tag, len, status}; the receiver's
 * reader thread turns notices into LANDED (or ERROR) completions. A put
 * inside one GPU (trainer and engine colocated) is the copy with the digest
 * fused into it (copy_digest_cuda.h): the notice carries the word sum of
 * the bytes written, keyed at their region offset, so the receiver need not
 * read them again to verify them. Such a put is its kernel alone on the
 * stream (the sum goes to mapped pinned memory); while LO_FLIGHT launches
 * run, the next puts gather and go as one kernel (put_fused). A sender
 * opens with the data-plane handshake (common/net/handshake.h): with a
 * token, only a process of the receiver's uid or one that proves the token
 * gets in. Host memory
 * is refused: tcp already moves it through shared pages well enough. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"
#include "common/util.h"
#include "common/net/fdpass.h"
#include "common/net/handshake.h"

#if WSYNC_HAVE_CUDA
#include <cuda.h>

#include "common/copy_digest_cuda.h"
#include "common/cuda_checks.h"

#define LO_MAGIC 0x6c61636f6c5f7973ULL /* "sy_local" */
#define LO_MAPS 256                    /* peer allocations mapped per transport */
#define LO_NAME 96
#define LO_SUMS 1024 /* puts with a fused digest in flight per connection; more go without */

typedef struct lo_addr {
    uint64_t magic, pid, nonce;
    char name[LO_NAME];
} lo_addr_t;

/* The key: the receiver's allocation and where the region sits in it. The
 * handle names the whole allocation (CUDA maps allocations, not ranges), so
 * the region's offset inside it travels along. */
typedef struct lo_key {
    uint64_t magic, pid, id, len, alloc_off;
    uint64_t base; /* the allocation's address in the receiver (used when that is this process) */
    int32_t device, pad;
    cudaIpcMemHandle_t handle;
} lo_key_t;

typedef struct lo_hello {
    uint64_t magic, nonce;
    int32_t id, pad;
} lo_hello_t;

typedef struct lo_notice {
    uint64_t tag, len;
    int32_t status, has_sum;
    uint64_t sum; /* with has_sum: the word sum of the bytes written, keyed at their region offset */
    char message[128];
} lo_notice_t;

typedef struct lo_map {
    cudaIpcMemHandle_t handle;
    char *ptr;
} lo_map_t;

/* Receiver: one accepted sender. */
typedef struct lo_reader {
    struct lo_reader *next;
    struct lo_transport *t;
    int fd, peer;
    pthread_t th;
} lo_reader_t;

typedef struct lo_transport {
    wsync_transport_t base;
    int device, timeout_ms;
    wsync_auth_t auth;
    wsync_cqueue_t cq;
    pthread_mutex_t lock;
    uint64_t next_region;
    /* receiver */
    int lfd;
    uint64_t nonce;
    char name[LO_NAME];
    pthread_t acceptor;
    int accepting, stopping;
    lo_reader_t *readers;
    /* sender */
    lo_map_t maps[LO_MAPS];
    int nmaps;
} lo_transport_t;

typedef struct lo_region {
    wsync_region_t base;
    lo_key_t key;
} lo_region_t;

#define LO_BATCH WSYNC_CD_BATCH_MAX /* fused puts per kernel launch, at most */
#define LO_FLIGHT 2                 /* launches in flight before fused puts wait to go together */

typedef struct lo_item {
    uint64_t tag, len;
    int sum; /* its slot in the connection's sums, -1: copied without */
} lo_item_t;

/* One launch on the stream and its event: a device copy of one put, or a
 * batch of fused puts (one kernel, a sum each). */
typedef struct lo_op {
    struct lo_op *next;
    cudaEvent_t ev;
    int n; /* puts it completes */
    lo_item_t it[LO_BATCH];
    wsync_cd_piece_t pc[LO_BATCH]; /* the fused puts' copies */
} lo_op_t;

typedef struct lo_conn {
    wsync_conn_t base;
    int fd, id;
    char peer_name[LO_NAME];
    cudaStream_t stream;
    pthread_mutex_t lock; /* orders puts and the op queue */
    pthread_cond_t cond;
    lo_op_t *head, *tail;
    int stopping, broken;
    pthread_t progress;
    lo_op_t *free_ops; /* done ops with their events, for the next puts (under lock) */
    /* Fused puts go together: while LO_FLIGHT launches are in flight the
     * next ones gather in `pend`, launched as one kernel when it is full,
     * when a launch completes, or at put_flush (under lock). */
    lo_op_t *pend;
    int nflight;
    /* fused puts: a device accumulator and block counter per piece of a
     * launch (the kernel's last block of each puts them back to 0, so
     * launches in stream order share them) and a ring of LO_SUMS words of
     * mapped pinned memory the kernels write the sums into, taken in put
     * order, given back in completion order */
    uint64_t *dacc;
    unsigned int *dcount;
    uint64_t *hsums, *hsums_dev;    /* the ring, as the host and as the device address it */
    uint64_t sums_taken, sums_done; /* sums_done: written by the progress thread */
    uint64_t nqueued, ncopied;      /* puts, for the trace (under lock; the progress thread's) */
} lo_conn_t;

typedef CUresult (*get_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);

/* Make the transport's device current for a CUDA call, restoring the
 * caller's afterwards (the caller's thread may drive another GPU). Always
 * set: a thread that made no runtime call yet has no current context, and
 * the driver call in lo_reg needs one (cudaGetDevice alone binds none; the
 * first GPU run failed exactly so, from the trainer's request threads). */
static wsync_status_t enter_device(int device, int *prev)
{
    CUDA_CHECK(cudaGetDevice(prev));
    CUDA_CHECK(cudaSetDevice(device));
    return WSYNC_OK;
}

static void leave_device(int device, int prev)
{
    if (prev != device)
        cudaSetDevice(prev);
}

static int lo_can_use(const wsync_transport_config_t *cfg)
{
    int n = 0;
    cudaError_t e;
    if (cfg == NULL || cfg->device < 0) {
        wsync_error(WSYNC_ERR_UNSUPPORTED, "transport local moves GPU memory only (this side holds host "
                                           "memory); use tcp for host memory");
        return 0;
    }
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= cfg->device) {
        wsync_error(WSYNC_ERR_UNSUPPORTED, "transport local needs CUDA device %d, this host has %d (%s)",
                    cfg->device, e == cudaSuccess ? n : 0, e == cudaSuccess ? "ok" : cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

static wsync_status_t lo_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    lo_transport_t *t;
    if (!lo_can_use(cfg))
        return WSYNC_ERR_UNSUPPORTED;
    t = calloc(1, sizeof(*t));
    WSYNC_CHECK_ALLOC(t);
    t->base.ops = &wsync_transport_local;
    t->device = cfg->device;
    t->timeout_ms = wsync_connect_timeout_ms(cfg->timeout_ms);
    if (cfg->auth)
        t->auth = *cfg->auth;
    t->lfd = -1;
    wsync_cqueue_init(&t->cq);
    pthread_mutex_init(&t->lock, NULL);
    *out = &t->base;
    return WSYNC_OK;
}

static wsync_status_t lo_reg(wsync_transport_t *tr, void *ptr, size_t len, wsync_mem_kind_t kind,
                             wsync_region_t **out, wsync_blob_t *key)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_region_t *r;
    get_range_fn get_range = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult cr = CUDA_ERROR_NOT_FOUND;
    wsync_status_t st = WSYNC_OK;
    int prev = 0;
    if (kind != WSYNC_MEM_CUDA)
        return wsync_error(WSYNC_ERR_UNSUPPORTED,
                           "transport local moves GPU memory only; this %zu-byte region "
                           "is host memory: use tcp",
                           len);
    r = calloc(1, sizeof(*r));
    WSYNC_CHECK_ALLOC(r);
    r->base = (wsync_region_t){.transport = tr, .ptr = ptr, .len = len, .kind = kind};
    WSYNC_CHECK_GOTO(enter_device(t->device, &prev), st, fail);
    /* The driver's address range gives the allocation's base; reached through
     * the runtime so the static cudart build needs no -lcuda. */
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&get_range, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess ||
        (cr = get_range(&base, &size, (CUdeviceptr)(uintptr_t)ptr)) != CUDA_SUCCESS) {
        st = wsync_error(WSYNC_ERR_CUDA,
                         "transport local: cannot find the allocation under %p on cuda:%d "
                         "(cuMemGetAddressRange: CUresult %d): is it device memory of this process?",
                         ptr, t->device, (int)cr);
        goto fail_dev;
    }
    if ((uintptr_t)ptr + len > (uintptr_t)base + size) {
        st = wsync_error(WSYNC_ERR_INVALID, "transport local: region %p+%zu runs past its allocation (%zu bytes)",
                         ptr, len, size);
        goto fail_dev;
    }
    CUDA_CHECK_GOTO(cudaIpcGetMemHandle(&r->key.handle, (void *)(uintptr_t)base), st, fail_dev);
    leave_device(t->device, prev);
    pthread_mutex_lock(&t->lock);
    r->key.id = ++t->next_region;
    pthread_mutex_unlock(&t->lock);
    r->key.magic = LO_MAGIC;
    r->key.pid = (uint64_t)getpid();
    r->key.len = len;
    r->key.alloc_off = (uint64_t)((uintptr_t)ptr - (uintptr_t)base);
    r->key.base = (uint64_t)base;
    r->key.device = t->device;
    memcpy(key->data, &r->key, sizeof(r->key));
    key->len = sizeof(r->key);
    *out = &r->base;
    return WSYNC_OK;
fail_dev:
    leave_device(t->device, prev);
fail:
    free(r);
    return st;
}

static void lo_dereg(wsync_region_t *r)
{
    free(r);
}

/* Receiver: notices of one sender become completions. */
static void *reader_main(void *arg)
{
    lo_reader_t *rd = arg;
    lo_transport_t *t = rd->t;
    lo_notice_t n;
    for (;;) {
        wsync_completion_t c = {.kind = WSYNC_COMPLETION_LANDED, .status = WSYNC_OK, .peer = rd->peer};
        int fd = -1;
        if (wsync_fd_recv(rd->fd, &n, sizeof(n), &fd) != WSYNC_OK) {
            if (fd >= 0)
                close(fd);
            /* A sender that disconnects is done; a sender that dies mid-put
             * also fails its request, which names it. */
            break;
        }
        if (fd >= 0)
            close(fd);
        c.tag = n.tag;
        c.len = n.len;
        c.has_sum = n.has_sum != 0;
        c.sum = n.sum;
        if (n.status != WSYNC_OK) {
            n.message[sizeof(n.message) - 1] = '\0';
            wsync_cqueue_push_error(&t->cq, n.tag, rd->peer, (wsync_status_t)n.status,
                                    "local put from sender %d failed: %s", rd->peer, n.message);
            continue;
        }
        wsync_cqueue_push(&t->cq, &c);
    }
    return NULL;
}

static void *accept_main(void *arg)
{
    lo_transport_t *t = arg;
    while (!__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd = {.fd = t->lfd, .events = POLLIN};
        unsigned char *payload = NULL;
        size_t len = 0;
        lo_hello_t h;
        lo_reader_t *rd;
        wsync_hs_t hs;
        int fd;
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (wsync_hs_serve(&hs, fd, &t->auth, WSYNC_HS_LOCAL, "a local process", sizeof(h), t->timeout_ms,
                           &payload, &len) != WSYNC_OK) {
            wsync_log(WSYNC_LOG_WARN, "local: %s", wsync_last_error());
            close(fd);
            continue;
        }
        if (len == sizeof(h))
            memcpy(&h, payload, sizeof(h));
        free(payload);
        if (len != sizeof(h) || h.magic != LO_MAGIC || h.nonce != t->nonce) {
            wsync_hs_refuse(&hs, WSYNC_ERR_PEER, "not a sender of this receiver (stale address?)");
            close(fd); /* not a sender of ours (stale address, scan) */
            continue;
        }
        if (wsync_hs_accept(&hs, NULL, 0) != WSYNC_OK) {
            close(fd);
            continue;
        }
        rd = calloc(1, sizeof(*rd));
        if (rd == NULL) {
            close(fd);
            continue;
        }
        rd->t = t;
        rd->fd = fd;
        rd->peer = h.id;
        if (pthread_create(&rd->th, NULL, reader_main, rd) != 0) {
            wsync_cqueue_push_error(&t->cq, ~0ULL, h.id, WSYNC_ERR_IO,
                                    "local: cannot start the reader of sender %d", h.id);
            close(fd);
            free(rd);
            continue;
        }
        pthread_mutex_lock(&t->lock);
        rd->next = t->readers;
        t->readers = rd;
        pthread_mutex_unlock(&t->lock);
    }
    return NULL;
}

static wsync_status_t lo_listen(wsync_transport_t *tr, wsync_blob_t *addr)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_addr_t a;
    if (t->lfd < 0) {
        t->nonce = wsync_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)t;
        snprintf(t->name, sizeof(t->name), "wsync-local/%d/%016llx", (int)getpid(), (unsigned long long)t->nonce);
        WSYNC_CHECK(wsync_unix_listen(t->name, &t->lfd));
        if (pthread_create(&t->acceptor, NULL, accept_main, t) != 0) {
            close(t->lfd);
            t->lfd = -1;
            return wsync_error(WSYNC_ERR_IO, "transport local: cannot start the accept thread");
        }
        t->accepting = 1;
    }
    memset(&a, 0, sizeof(a));
    a.magic = LO_MAGIC;
    a.pid = (uint64_t)getpid();
    a.nonce = t->nonce;
    snprintf(a.name, sizeof(a.name), "%s", t->name);
    memcpy(addr->data, &a, sizeof(a));
    addr->len = sizeof(a);
    return WSYNC_OK;
}

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
    if (!c->broken && wsync_fd_send(c->fd, &n, sizeof(n), -1) != WSYNC_OK) {
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
            __atomic_add_fetch(&c->sums_done, 1, __ATOMIC_RELEASE);
    op->next = c->free_ops;
    c->free_ops = op;
}

/* A free op (with its event), or NULL with the error set. Called with
 * c->lock on the transport's device. */
static lo_op_t *op_get(lo_conn_t *c)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_op_t *op = c->free_ops;
    cudaError_t e;
    if (op != NULL) {
        c->free_ops = op->next;
    } else if ((op = calloc(1, sizeof(*op))) == NULL) {
        wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        return NULL;
    } else if ((e = cudaEventCreateWithFlags(&op->ev, cudaEventDisableTiming)) != cudaSuccess) {
        free(op);
        wsync_error(WSYNC_ERR_CUDA, "cannot create an event on cuda:%d: %s", t->device, cudaGetErrorString(e));
        return NULL;
    }
    op->next = NULL;
    op->n = 0;
    return op;
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
    e = wsync_cuda_copy_digest_batch_async(op->pc, op->n, c->dacc, c->dcount, c->stream);
    if (e == 0)
        e = (int)cudaEventRecord(op->ev, c->stream);
    if (e == 0) {
        op_queue(c, op);
        return WSYNC_OK;
    }
    snprintf(msg, sizeof(msg), "copy-digest kernel of %d puts on cuda:%d: %s", op->n, t->device,
             cudaGetErrorString((cudaError_t)e));
    op_fail(c, op, own_last ? op->n - 1 : op->n, WSYNC_ERR_CUDA, msg);
    return wsync_error(WSYNC_ERR_CUDA, "%s", msg);
}

/* Sender: waits for each put's copy in order, then tells both sides. */
static void *progress_main(void *arg)
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
            for (i = 0; i < op->n; i++) {
                const lo_item_t *it = &op->it[i];
                wsync_completion_t done = {.kind = WSYNC_COMPLETION_SENT, .tag = it->tag, .len = it->len, .peer = -1};
                /* the kernel wrote the word before the event fired */
                const uint64_t sum = it->sum >= 0 ? ((volatile uint64_t *)c->hsums)[it->sum] : 0;
                if (++c->ncopied % 32 == 0 || (uint32_t)it->tag == 0)
                    wsync_trace("local: put of piece %u (req %08x) copied, %llu on this connection",
                                (unsigned)it->tag, (unsigned)(it->tag >> 32), (unsigned long long)c->ncopied);
                send_notice(c, it->tag, it->len, WSYNC_OK, NULL, it->sum >= 0, sum);
                wsync_cqueue_push(&t->cq, &done);
            }
            for (i = 0; i < op->n; i++)
                if (op->it[i].sum >= 0)
                    __atomic_add_fetch(&c->sums_done, 1, __ATOMIC_RELEASE);
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
        if (c->pend && c->nflight < LO_FLIGHT)
            launch_pending(c, 0); /* a failure went to its puts */
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

/* The connection's device words and mapped sum ring, zeroed (once: the
 * kernels leave the accumulator and counter at 0). Called on its device. */
static wsync_status_t conn_sums_alloc(lo_conn_t *c)
{
    void *dev = NULL;
    CUDA_CHECK(cudaMalloc(&dev, 2 * LO_BATCH * sizeof(uint64_t)));
    c->dacc = dev;
    c->dcount = (unsigned int *)((uint64_t *)dev + LO_BATCH);
    CUDA_CHECK(cudaMemset(dev, 0, 2 * LO_BATCH * sizeof(uint64_t)));
    CUDA_CHECK(cudaHostAlloc((void **)&c->hsums, LO_SUMS * sizeof(uint64_t), cudaHostAllocMapped));
    memset(c->hsums, 0, LO_SUMS * sizeof(uint64_t));
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&c->hsums_dev, c->hsums, 0));
    return WSYNC_OK;
}

static void conn_sums_free(lo_conn_t *c)
{
    lo_op_t *op;
    cudaFree(c->dacc);
    cudaFreeHost(c->hsums);
    c->dacc = NULL;
    c->hsums = NULL;
    while ((op = c->free_ops) != NULL) {
        c->free_ops = op->next;
        cudaEventDestroy(op->ev);
        free(op);
    }
}

static wsync_status_t lo_connect(wsync_transport_t *tr, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_addr_t a;
    lo_hello_t h = {.magic = LO_MAGIC, .id = self_id};
    lo_conn_t *c;
    wsync_status_t st = WSYNC_OK;
    int prev = 0;
    if (addr->len != sizeof(a))
        return wsync_error(WSYNC_ERR_FORMAT,
                           "transport local: address of %u bytes, expected %zu (is the "
                           "receiver using another transport?)",
                           addr->len, sizeof(a));
    memcpy(&a, addr->data, sizeof(a));
    a.name[LO_NAME - 1] = '\0';
    if (a.magic != LO_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "transport local: not a local transport address");
    c = calloc(1, sizeof(*c));
    WSYNC_CHECK_ALLOC(c);
    c->base.transport = tr;
    c->id = self_id;
    c->fd = -1;
    snprintf(c->peer_name, sizeof(c->peer_name), "%s", a.name);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    WSYNC_CHECK_GOTO(wsync_unix_connect(a.name, t->timeout_ms, &c->fd), st, fail);
    h.nonce = a.nonce;
    WSYNC_CHECK_GOTO(wsync_hs_connect(c->fd, &t->auth, WSYNC_HS_LOCAL, a.name, &h, sizeof(h), t->timeout_ms, NULL,
                                      0, NULL),
                     st, fail);
    WSYNC_CHECK_GOTO(enter_device(t->device, &prev), st, fail);
    st = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) == cudaSuccess
             ? WSYNC_OK
             : wsync_error(WSYNC_ERR_CUDA, "transport local: cannot create a stream on cuda:%d", t->device);
    if (st == WSYNC_OK && conn_sums_alloc(c) != WSYNC_OK) {
        conn_sums_free(c);
        cudaStreamDestroy(c->stream);
        st = wsync_error(WSYNC_ERR_CUDA, "transport local: cannot allocate put sums on cuda:%d: %s", t->device,
                         wsync_last_error());
    }
    leave_device(t->device, prev);
    if (st != WSYNC_OK)
        goto fail;
    if (pthread_create(&c->progress, NULL, progress_main, c) != 0) {
        conn_sums_free(c);
        cudaStreamDestroy(c->stream);
        st = wsync_error(WSYNC_ERR_IO, "transport local: cannot start the progress thread");
        goto fail;
    }
    *out = &c->base;
    return WSYNC_OK;
fail:
    if (c->fd >= 0)
        close(c->fd);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
    return wsync_error(st, "cannot connect to local receiver '%s' (pid %llu) as sender %d: %s", a.name,
                       (unsigned long long)a.pid, self_id, wsync_last_error());
}

static wsync_status_t lo_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                uint64_t tag)
{
    (void)t, (void)src_id, (void)dst, (void)off, (void)len, (void)tag;
    return WSYNC_OK; /* one-sided */
}

/* The receiver's allocation mapped here, once per handle. */
static wsync_status_t map_key(lo_transport_t *t, const lo_key_t *k, char **out)
{
    wsync_status_t st = WSYNC_OK;
    void *p = NULL;
    int i;
    if (k->pid == (uint64_t)getpid()) {
        *out = (char *)(uintptr_t)k->base; /* CUDA will not open a handle in its own process */
        return WSYNC_OK;
    }
    pthread_mutex_lock(&t->lock);
    for (i = 0; i < t->nmaps; i++)
        if (memcmp(&t->maps[i].handle, &k->handle, sizeof(k->handle)) == 0) {
            *out = t->maps[i].ptr;
            goto out;
        }
    if (t->nmaps == LO_MAPS) {
        st = wsync_error(WSYNC_ERR_NOMEM, "transport local: more than %d receiver allocations mapped", LO_MAPS);
        goto out;
    }
    CUDA_CHECK_GOTO(cudaIpcOpenMemHandle(&p, k->handle, cudaIpcMemLazyEnablePeerAccess), st, out);
    t->maps[t->nmaps].handle = k->handle;
    t->maps[t->nmaps].ptr = p;
    t->nmaps++;
    *out = p;
out:
    pthread_mutex_unlock(&t->lock);
    if (st != WSYNC_OK)
        wsync_error(st, "cannot map the GPU memory of receiver process %llu (cuda:%d): %s",
                    (unsigned long long)k->pid, k->device, wsync_last_error());
    return st;
}

/* One GPU: the put joins the gathered fused puts (the copy computing its
 * digest, keyed at its region offset, into the next word of the mapped
 * ring, which the progress thread reads once the launch's event fired);
 * they go as one kernel now if the stream has less than LO_FLIGHT launches
 * or the batch is full, else when a launch completes. Called with c->lock
 * on the transport's device. */
static wsync_status_t put_fused(lo_conn_t *c, uint64_t tag, char *dst, const char *src, size_t len, uint64_t key_off)
{
    const int slot = (int)(c->sums_taken % LO_SUMS);
    lo_op_t *op = c->pend;
    if (op == NULL && (op = c->pend = op_get(c)) == NULL)
        return WSYNC_ERR_NOMEM;
    c->sums_taken++;
    op->it[op->n] = (lo_item_t){.tag = tag, .len = len, .sum = slot};
    op->pc[op->n] = (wsync_cd_piece_t){.dst = dst, .src = src, .len = len, .off = key_off, .hout = c->hsums_dev + slot};
    op->n++;
    if (op->n == LO_BATCH || c->nflight < LO_FLIGHT)
        return launch_pending(c, 1);
    return WSYNC_OK;
}

/* Any other put: one device copy and its event, after the gathered fused
 * puts (stream order is put order). Called with c->lock on the device. */
static wsync_status_t put_copy(lo_conn_t *c, uint64_t tag, char *dst, const char *src, size_t len)
{
    lo_transport_t *t = (lo_transport_t *)c->base.transport;
    lo_op_t *op;
    cudaError_t e = cudaSuccess;
    WSYNC_CHECK(launch_pending(c, 0));
    if ((op = op_get(c)) == NULL)
        return WSYNC_ERR_NOMEM;
    op->it[0] = (lo_item_t){.tag = tag, .len = len, .sum = -1};
    op->n = 1;
    if (len > 0)
        e = cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, c->stream);
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

static wsync_status_t lo_put(wsync_conn_t *cn, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                             size_t dst_off, size_t len, uint64_t tag)
{
    lo_conn_t *c = (lo_conn_t *)cn;
    lo_transport_t *t = (lo_transport_t *)cn->transport;
    lo_key_t k;
    char *base = NULL;
    wsync_status_t st = WSYNC_OK;
    int prev = 0;
    if (dst_key->len != sizeof(k))
        return wsync_error(WSYNC_ERR_FORMAT, "transport local: key of %u bytes, expected %zu", dst_key->len,
                           sizeof(k));
    memcpy(&k, dst_key->data, sizeof(k));
    if (k.magic != LO_MAGIC)
        return wsync_error(WSYNC_ERR_FORMAT, "transport local: not a local transport key");
    if (src->kind != WSYNC_MEM_CUDA || src_off + len > src->len || dst_off + len > k.len)
        return wsync_error(WSYNC_ERR_INVALID,
                           "local put of %zu bytes: source %zu+%zu of %zu, destination %zu of %llu", len, src_off,
                           len, src->len, dst_off, (unsigned long long)k.len);
    if (__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
        return wsync_error(WSYNC_ERR_PEER, "local put to '%s': the receiver went away", c->peer_name);
    /* The device first: the handle is opened in the current device's
     * context and peer access is enabled for that device only; a request
     * thread that had made no CUDA call would open it on device 0 even in a
     * trainer on cuda:1. */
    WSYNC_CHECK_GOTO(enter_device(t->device, &prev), st, fail);
    WSYNC_CHECK_GOTO(map_key(t, &k, &base), st, fail_dev);
    pthread_mutex_lock(&c->lock);
    if (len > 0 && k.device == t->device &&
        c->sums_taken - __atomic_load_n(&c->sums_done, __ATOMIC_ACQUIRE) < LO_SUMS)
        st = put_fused(c, tag, base + k.alloc_off + dst_off, (char *)src->ptr + src_off, len, dst_off);
    else
        st = put_copy(c, tag, base + k.alloc_off + dst_off, (char *)src->ptr + src_off, len);
    if (st != WSYNC_OK)
        goto fail_locked;
    if (++c->nqueued % 32 == 0 || (uint32_t)tag == 0)
        wsync_trace("local: put of piece %u (req %08x) queued, %llu on this connection", (unsigned)tag,
                    (unsigned)(tag >> 32), (unsigned long long)c->nqueued);
    pthread_mutex_unlock(&c->lock);
    leave_device(t->device, prev);
    return WSYNC_OK;
fail_locked:
    pthread_mutex_unlock(&c->lock);
fail_dev:
    leave_device(t->device, prev);
fail:
    return wsync_error(st, "local put of %zu bytes (tag %llx) to '%s': %s", len, (unsigned long long)tag,
                       c->peer_name, wsync_last_error());
}

/* The gathered fused puts go now (the caller's batch of puts ended). */
static void lo_put_flush(wsync_conn_t *cn)
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

static wsync_status_t lo_poll(wsync_transport_t *tr, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    *n = wsync_cqueue_pop(&t->cq, out, max, timeout_ms);
    return WSYNC_OK;
}

static void lo_disconnect(wsync_conn_t *cn)
{
    lo_conn_t *c = (lo_conn_t *)cn;
    if (c == NULL)
        return;
    /* Drain: every queued copy finishes before the mapping can go. */
    lo_put_flush(cn);
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->progress, NULL);
    cudaStreamDestroy(c->stream);
    conn_sums_free(c);
    close(c->fd);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

static void lo_close(wsync_transport_t *tr)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_reader_t *rd;
    int i;
    if (t == NULL)
        return;
    __atomic_store_n(&t->stopping, 1, __ATOMIC_RELEASE);
    if (t->accepting)
        pthread_join(t->acceptor, NULL);
    if (t->lfd >= 0)
        close(t->lfd);
    while ((rd = t->readers) != NULL) {
        t->readers = rd->next;
        shutdown(rd->fd, SHUT_RDWR);
        pthread_join(rd->th, NULL);
        close(rd->fd);
        free(rd);
    }
    for (i = 0; i < t->nmaps; i++)
        cudaIpcCloseMemHandle(t->maps[i].ptr);
    wsync_cqueue_destroy(&t->cq);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

#else /* !WSYNC_HAVE_CUDA */

static wsync_status_t no_cuda(void)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport local: wsync was not built with CUDA (it moves GPU "
                                              "memory only; use tcp)");
}
static int lo_can_use(const wsync_transport_config_t *cfg)
{
    (void)cfg;
    no_cuda();
    return 0;
}
static wsync_status_t lo_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    (void)cfg, (void)out;
    return no_cuda();
}
static wsync_status_t lo_reg(wsync_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind,
                             wsync_region_t **out, wsync_blob_t *key)
{
    (void)t, (void)ptr, (void)len, (void)kind, (void)out, (void)key;
    return no_cuda();
}
static void lo_dereg(wsync_region_t *r)
{
    (void)r;
}
static wsync_status_t lo_listen(wsync_transport_t *t, wsync_blob_t *addr)
{
    (void)t, (void)addr;
    return no_cuda();
}
static wsync_status_t lo_connect(wsync_transport_t *t, const wsync_blob_t *addr, int self_id, wsync_conn_t **out)
{
    (void)t, (void)addr, (void)self_id, (void)out;
    return no_cuda();
}
static wsync_status_t lo_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                uint64_t tag)
{
    (void)t, (void)src_id, (void)dst, (void)off, (void)len, (void)tag;
    return no_cuda();
}
static wsync_status_t lo_put(wsync_conn_t *c, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                             size_t dst_off, size_t len, uint64_t tag)
{
    (void)c, (void)src, (void)src_off, (void)dst_key, (void)dst_off, (void)len, (void)tag;
    return no_cuda();
}
static wsync_status_t lo_poll(wsync_transport_t *t, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    (void)t, (void)out, (void)max, (void)timeout_ms;
    *n = 0;
    return no_cuda();
}
static void lo_put_flush(wsync_conn_t *c)
{
    (void)c;
}
static void lo_disconnect(wsync_conn_t *c)
{
    (void)c;
}
static void lo_close(wsync_transport_t *t)
{
    (void)t;
}
#endif

const wsync_transport_ops_t wsync_transport_local = {
    .name = "local",
    .can_use = lo_can_use,
    .open = lo_open,
    .reg = lo_reg,
    .dereg = lo_dereg,
    .listen = lo_listen,
    .connect = lo_connect,
    .expect = lo_expect,
    .put = lo_put,
    .put_flush = lo_put_flush,
    .poll = lo_poll,
    .disconnect = lo_disconnect,
    .close = lo_close,
};
