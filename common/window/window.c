/* window.c: the window backend for a memory kind. */
#include "common/window/window.h"

const wsync_window_ops_t *wsync_window_for(wsync_mem_kind_t kind)
{
    return kind == WSYNC_MEM_CUDA ? &wsync_window_cuda_ipc : &wsync_window_shm;
}
