/* window.h: intra-node mapped windows. Memory of one local rank that the other
 * local ranks of its host map and read: a shared-memory file on hosts (shm),
 * CUDA IPC on GPUs (cuda_ipc). Export gives a blob plus, for shm, a file
 * descriptor that must travel over a Unix socket (SCM_RIGHTS); map turns what
 * arrived back into a local pointer. */
#ifndef WSYNC_COMMON_WINDOW_H
#define WSYNC_COMMON_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/blob.h"
#include "common/mem/mem.h"
#include "common/wsync.h"

typedef struct wsync_window {
    void *ptr; /* local address of the memory */
    size_t len;
    int fd; /* shm: the memfd; -1 for backends without one */
    void *priv;
    int sparse; /* shm: pages only where written (wsync_shm_alloc_sparse) */
} wsync_window_t;

typedef struct wsync_window_ops {
    const char *name; /* "shm", "cuda_ipc" */
    wsync_mem_kind_t kind;
    /* Memory that can be exported. No file is left anywhere after a crash. */
    wsync_status_t (*alloc)(size_t len, wsync_window_t *out);
    void (*free)(wsync_window_t *w);
    wsync_status_t (*export_blob)(const wsync_window_t *w, wsync_blob_t *blob);
    /* Map a peer's window; `fd` is what arrived with the blob (-1 if none);
     * map does not take ownership of fd. */
    wsync_status_t (*map)(const wsync_blob_t *blob, int fd, size_t len, void **out);
    void (*unmap)(void *ptr, size_t len);
} wsync_window_ops_t;

extern const wsync_window_ops_t wsync_window_shm;
extern const wsync_window_ops_t wsync_window_cuda_ipc; /* stub without CUDA */

/* A host window whose pages are not reserved: each is allocated when first
 * written and freed again by wsync_window_release, so the window holds only
 * the bytes in flight (an in-place pull into the caller's tensors). Peers
 * map it without populating it. A host out of memory faults (SIGBUS) on
 * the write instead of failing here. */
wsync_status_t wsync_shm_alloc_sparse(size_t len, wsync_window_t *out);
/* Free the whole pages inside [off, off+len) of a sparse window: they read
 * zero afterwards, here and in every peer's mapping. Nothing for windows
 * that are not sparse. */
void wsync_window_release(const wsync_window_t *w, uint64_t off, uint64_t len);

/* Offsets [off, off+len) of a window. */
typedef struct wsync_window_range {
    uint64_t off, len;
} wsync_window_range_t;

/* A GPU window of `len` bytes of address space on the current device of
 * which only the bytes of back[0..n) (sorted by offset) hold memory, rounded
 * out to the driver's granule (2 MiB), zeroed; *backed (may be NULL) gets
 * how many bytes of memory it holds. In place into the caller's GPU
 * tensors over a transport that lands bytes straight in them (a redirect),
 * the image then holds only the bytes that pass through it. Any other byte
 * of it is not memory: touching it is an illegal address on the GPU. Built
 * with the driver's virtual memory calls, it has no CUDA IPC handle: it is
 * private to this process (export fails), and the local transport cannot
 * register it. wsync_window_cuda_ipc's free releases it. */
wsync_status_t wsync_cuda_alloc_sparse(size_t len, const wsync_window_range_t *back, size_t n, wsync_window_t *out,
                                       size_t *backed);

/* For a memory kind: host -> shm, cuda -> cuda_ipc. */
const wsync_window_ops_t *wsync_window_for(wsync_mem_kind_t kind);

#endif
