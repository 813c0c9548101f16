/* window.h: intra-node mapped windows. Memory of one local rank that the other
 * local ranks of its host map and read: a shared-memory file on hosts (shm),
 * CUDA IPC on GPUs (cuda_ipc). Export gives a blob plus, for shm, a file
 * descriptor that must travel over a Unix socket (SCM_RIGHTS); map turns what
 * arrived back into a local pointer. */
#ifndef WSYNC_COMMON_WINDOW_H
#define WSYNC_COMMON_WINDOW_H

#include <stddef.h>

#include "common/transport/transport.h"

typedef struct wsync_window {
    void *ptr; /* local address of the memory */
    size_t len;
    int fd; /* shm: the memfd; -1 for backends without one */
    void *priv;
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

/* For a memory kind: host -> shm, cuda -> cuda_ipc. */
const wsync_window_ops_t *wsync_window_for(wsync_mem_kind_t kind);

#endif
