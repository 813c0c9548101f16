/* cuda_ipc.c: GPU windows: device memory exported to the other local ranks
 * as a CUDA IPC handle. A peer's window is opened once and cached (opening is
 * expensive, and CUDA refuses to open the same handle twice in a process);
 * copies out of it run on the copy engines through wsync_mem_cuda.copy. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/window/window.h"

#if WSYNC_HAVE_CUDA
#include "common/base/cuda_checks.h"
#include "common/mem/cuda_stream.h"
#include "common/window/cuda_vmm.h"

#define IPC_MAGIC 0x6370695f6e797377ULL /* "wsyn_ipc" */
#define IPC_CACHE 256

typedef struct ipc_blob {
    uint64_t magic;
    uint64_t len;
    uint64_t pid; /* exporting process: it maps its own window directly */
    uint64_t ptr; /* the exporter's address, valid in the exporter only */
    int32_t device;
    int32_t pad;
    cudaIpcMemHandle_t handle;
} ipc_blob_t;

typedef struct ipc_map {
    cudaIpcMemHandle_t handle;
    void *ptr;
    int refs;
} ipc_map_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_map_t cache[IPC_CACHE];

static wsync_status_t ipc_alloc(size_t len, wsync_window_t *out)
{
    cudaStream_t s;
    void *p = NULL;
    cudaError_t e;
    WSYNC_CHECK(wsync_cuda_stream(NULL, &s, NULL));
    e = cudaMalloc(&p, len ? len : 1);
    if (e != cudaSuccess)
        return wsync_error(WSYNC_ERR_NOMEM, "cannot allocate a %zu-byte GPU window: %s", len, cudaGetErrorString(e));
    *out = (wsync_window_t){.ptr = p, .len = len, .fd = -1, .priv = NULL};
    return WSYNC_OK;
}

static void ipc_free(wsync_window_t *w)
{
    if (w->priv) { /* a sparse window (wsync_cuda_alloc_sparse) */
        cuda_vmm_free(w);
        return;
    }
    if (w->ptr)
        cudaFree(w->ptr);
    w->ptr = NULL;
}

static wsync_status_t ipc_export(const wsync_window_t *w, wsync_blob_t *blob)
{
    ipc_blob_t b;
    int d;
    cudaStream_t s;
    if (w->priv)
        return wsync_error(WSYNC_ERR_INVALID, "a sparse GPU window has no CUDA IPC handle: it cannot be exported");
    memset(&b, 0, sizeof(b));
    WSYNC_CHECK(wsync_cuda_stream(&d, &s, NULL));
    CUDA_CHECK(cudaIpcGetMemHandle(&b.handle, w->ptr));
    b.magic = IPC_MAGIC;
    b.len = w->len;
    b.pid = (uint64_t)getpid();
    b.ptr = (uint64_t)(uintptr_t)w->ptr;
    b.device = d;
    memcpy(blob->data, &b, sizeof(b));
    blob->len = sizeof(b);
    return WSYNC_OK;
}

static wsync_status_t ipc_map(const wsync_blob_t *blob, int fd, size_t len, void **out)
{
    ipc_blob_t b;
    cudaStream_t s;
    wsync_status_t st = WSYNC_OK;
    int i, free_slot = -1;
    void *p = NULL;
    if (blob->len != sizeof(b))
        return wsync_error(WSYNC_ERR_FORMAT, "cuda_ipc window: blob of %u bytes, expected %zu", blob->len,
                           sizeof(b));
    memcpy(&b, blob->data, sizeof(b));
    if (b.magic != IPC_MAGIC || b.len < len)
        return wsync_error(WSYNC_ERR_FORMAT, "cuda_ipc window: not a wsync GPU window, or smaller than %zu bytes",
                           len);
    if (b.pid == (uint64_t)getpid()) {
        *out = (void *)(uintptr_t)b.ptr;
        return WSYNC_OK;
    }
    WSYNC_CHECK(wsync_cuda_stream(NULL, &s, NULL));
    pthread_mutex_lock(&cache_lock);
    for (i = 0; i < IPC_CACHE; i++) {
        if (cache[i].refs > 0 && memcmp(&cache[i].handle, &b.handle, sizeof(b.handle)) == 0) {
            cache[i].refs++;
            *out = cache[i].ptr;
            goto out_unlock;
        }
        if (cache[i].refs == 0 && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0) {
        st = wsync_error(WSYNC_ERR_NOMEM, "cuda_ipc window: more than %d peer windows mapped", IPC_CACHE);
        goto out_unlock;
    }
    CUDA_CHECK_GOTO(cudaIpcOpenMemHandle(&p, b.handle, cudaIpcMemLazyEnablePeerAccess), st, out_unlock);
    cache[free_slot] = (ipc_map_t){.handle = b.handle, .ptr = p, .refs = 1};
    *out = p;
out_unlock:
    pthread_mutex_unlock(&cache_lock);
    if (st != WSYNC_OK)
        wsync_error(st, "cannot map the GPU window of process %llu (cuda:%d): %s", (unsigned long long)b.pid,
                    b.device, wsync_last_error());
    return st;
}

static void ipc_unmap(void *ptr, size_t len)
{
    int i;
    if (ptr == NULL)
        return;
    pthread_mutex_lock(&cache_lock);
    for (i = 0; i < IPC_CACHE; i++)
        if (cache[i].refs > 0 && cache[i].ptr == ptr) {
            if (--cache[i].refs == 0)
                cudaIpcCloseMemHandle(ptr);
            break;
        }
    /* Not in the cache: our own window, mapped directly; nothing to undo. */
    pthread_mutex_unlock(&cache_lock);
}

#else /* !WSYNC_HAVE_CUDA */

static wsync_status_t no_cuda(void)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "window cuda_ipc: wsync was not built with CUDA");
}
static wsync_status_t ipc_alloc(size_t len, wsync_window_t *out)
{
    return no_cuda();
}
static void ipc_free(wsync_window_t *w) {}
static wsync_status_t ipc_export(const wsync_window_t *w, wsync_blob_t *blob)
{
    return no_cuda();
}
static wsync_status_t ipc_map(const wsync_blob_t *blob, int fd, size_t len, void **out)
{
    return no_cuda();
}
static void ipc_unmap(void *ptr, size_t len) {}
#endif

const wsync_window_ops_t wsync_window_cuda_ipc = {
    .name = "cuda_ipc",
    .kind = WSYNC_MEM_CUDA,
    .alloc = ipc_alloc,
    .free = ipc_free,
    .export_blob = ipc_export,
    .map = ipc_map,
    .unmap = ipc_unmap,
};
