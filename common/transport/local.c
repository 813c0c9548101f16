/* local.c: the "local" transport: sender and receiver on one host, GPU memory
 * only. The receiver's key carries a CUDA IPC handle of the allocation under
 * its region; the sender maps it once (until its last connection to that
 * receiver process closes) and puts are device-to-device copies on
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
 * gets in. Host memory is refused: tcp already moves it through shared
 * pages well enough. This file: the ops table, open, registration (the key)
 * and close; local_conn.c the connections, local_put.c the put path,
 * local_redirect.c the redirect (bytes of a region landing in other memory
 * of the receiver's, the caller's tensors). */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "common/transport/local_internal.h"
#include "common/transport/not_built.h"
#include "common/transport/transport.h"

#if WSYNC_HAVE_CUDA
#include <cuda.h>

typedef CUresult (*get_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);

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

wsync_status_t lo_alloc_of(const void *ptr, uint64_t *base, size_t *size)
{
    get_range_fn get_range = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CUdeviceptr b = 0;
    CUresult cr = CUDA_ERROR_NOT_FOUND;
    /* The driver's address range gives the allocation's base; reached through
     * the runtime so the static cudart build needs no -lcuda. */
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&get_range, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && (cr = get_range(&b, size, (CUdeviceptr)(uintptr_t)ptr)) == CUDA_SUCCESS) {
        *base = (uint64_t)b;
        return WSYNC_OK;
    }
    return wsync_error(WSYNC_ERR_CUDA, "cuMemGetAddressRange(%p): CUresult %d", ptr, (int)cr);
}

static wsync_status_t lo_reg(wsync_transport_t *tr, void *ptr, size_t len, wsync_mem_kind_t kind,
                             wsync_region_t **out, wsync_blob_t *key)
{
    static uint64_t next_region; /* process-wide: a sender tells regions apart by (pid, id) */
    lo_transport_t *t = (lo_transport_t *)tr;
    lo_region_t *r;
    uint64_t base = 0;
    size_t size = 0;
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
    if (lo_alloc_of(ptr, &base, &size) != WSYNC_OK) {
        st = wsync_error(WSYNC_ERR_CUDA,
                         "transport local: cannot find the allocation under %p on cuda:%d "
                         "(%s): is it device memory of this process?",
                         ptr, t->device, wsync_last_error());
        goto fail_dev;
    }
    if ((uintptr_t)ptr + len > (uintptr_t)base + size) {
        st = wsync_error(WSYNC_ERR_INVALID, "transport local: region %p+%zu runs past its allocation (%zu bytes)",
                         ptr, len, size);
        goto fail_dev;
    }
    CUDA_CHECK_GOTO(cudaIpcGetMemHandle(&r->key.handle, (void *)(uintptr_t)base), st, fail_dev);
    leave_device(t->device, prev);
    r->key.id = __atomic_add_fetch(&next_region, 1, __ATOMIC_RELAXED);
    r->key.magic = LO_MAGIC;
    r->key.pid = (uint64_t)getpid();
    r->key.len = len;
    r->key.alloc_off = (uint64_t)((uintptr_t)ptr - (uintptr_t)base);
    r->key.base = base;
    r->key.device = t->device;
    memcpy(key->data, &r->key, sizeof(r->key));
    key->len = sizeof(r->key);
    pthread_mutex_lock(&t->lock);
    r->next = t->regions;
    t->regions = r;
    pthread_mutex_unlock(&t->lock);
    *out = &r->base;
    return WSYNC_OK;
fail_dev:
    leave_device(t->device, prev);
fail:
    free(r);
    return st;
}

static void lo_dereg(wsync_region_t *rr)
{
    lo_region_t *r = (lo_region_t *)rr, **at;
    lo_transport_t *t;
    if (r == NULL)
        return;
    t = (lo_transport_t *)rr->transport;
    pthread_mutex_lock(&t->lock);
    for (at = &t->regions; *at != NULL && *at != r; at = &(*at)->next)
        ;
    if (*at == r)
        *at = r->next;
    pthread_mutex_unlock(&t->lock);
    lo_region_spans_free(r);
    free(r);
}

wsync_status_t lo_map(lo_transport_t *t, uint64_t pid, const cudaIpcMemHandle_t *handle, uint64_t base, char **out)
{
    wsync_status_t st = WSYNC_OK;
    void *p = NULL;
    int i;
    if (pid == (uint64_t)getpid()) {
        *out = (char *)(uintptr_t)base; /* CUDA will not open a handle in its own process */
        return WSYNC_OK;
    }
    pthread_mutex_lock(&t->lock);
    for (i = 0; i < t->nmaps; i++)
        if (memcmp(&t->maps[i].handle, handle, sizeof(*handle)) == 0) {
            *out = t->maps[i].ptr;
            goto out;
        }
    if (t->nmaps == t->capmaps) {
        const int ncap = t->capmaps ? 2 * t->capmaps : 16;
        lo_map_t *m = realloc(t->maps, (size_t)ncap * sizeof(*m));
        if (m == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
            goto out;
        }
        t->maps = m;
        t->capmaps = ncap;
    }
    CUDA_CHECK_GOTO(cudaIpcOpenMemHandle(&p, *handle, cudaIpcMemLazyEnablePeerAccess), st, out);
    t->maps[t->nmaps].handle = *handle;
    t->maps[t->nmaps].ptr = p;
    t->maps[t->nmaps].pid = pid;
    t->nmaps++;
    *out = p;
out:
    pthread_mutex_unlock(&t->lock);
    if (st != WSYNC_OK)
        wsync_error(st, "cannot map the GPU memory of receiver process %llu: %s", (unsigned long long)pid,
                    wsync_last_error());
    return st;
}

void lo_unmap_unused(lo_transport_t *t)
{
    char **gone;
    int i = 0, n = 0;
    pthread_mutex_lock(&t->lock);
    gone = t->nmaps > 0 ? malloc((size_t)t->nmaps * sizeof(*gone)) : NULL;
    while (gone != NULL && i < t->nmaps) {
        const struct lo_conn *c = t->conns;
        while (c != NULL && c->peer_pid != t->maps[i].pid)
            c = c->next_conn;
        if (c != NULL) {
            i++;
            continue;
        }
        gone[n++] = t->maps[i].ptr;
        t->maps[i] = t->maps[--t->nmaps];
    }
    pthread_mutex_unlock(&t->lock);
    /* Outside the lock: unmapping may wait for the device, and puts of
     * other connections map under it. A failure leaves nothing to do. */
    for (i = 0; i < n; i++)
        cudaIpcCloseMemHandle(gone[i]);
    free(gone);
    if (n > 0)
        wsync_trace("local: %d mapping(s) closed: their receiver has no connection from here any more", n);
}

static wsync_status_t lo_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off, size_t len,
                                uint64_t tag)
{
    (void)t, (void)src_id, (void)dst, (void)off, (void)len, (void)tag;
    return WSYNC_OK; /* one-sided */
}

static wsync_status_t lo_poll(wsync_transport_t *tr, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    lo_transport_t *t = (lo_transport_t *)tr;
    *n = wsync_cqueue_pop(&t->cq, out, max, timeout_ms);
    return WSYNC_OK;
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
    free(t->maps);
    wsync_cqueue_destroy(&t->cq);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

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
    .put_gather = lo_put_gather,
    .redirect = lo_redirect,
    .poll = lo_poll,
    .disconnect = lo_disconnect,
    .close = lo_close,
};

#else /* !WSYNC_HAVE_CUDA */

WSYNC_TRANSPORT_NOT_BUILT(wsync_transport_local, "local", "CUDA",
                          "it moves GPU memory only: rebuild with CUDA=1 where /usr/local/cuda has nvcc, or use "
                          "tcp");
#endif
