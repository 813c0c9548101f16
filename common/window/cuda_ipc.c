/* cuda_ipc.c: CUDA IPC windows (placeholder until the GPU issue lands it). */
#include "common/checks.h"
#include "common/window/window.h"

static wsync_status_t ipc_alloc(size_t len, wsync_window_t *out)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "window cuda_ipc: not implemented in this build");
}

const wsync_window_ops_t wsync_window_cuda_ipc = {
    .name = "cuda_ipc",
    .kind = WSYNC_MEM_CUDA,
    .alloc = ipc_alloc,
};
