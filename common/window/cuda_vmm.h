/* cuda_vmm.h: sparse GPU windows (window.h's wsync_cuda_alloc_sparse), for
 * cuda_ipc.c, whose free releases them: a range of device address space of
 * which only some granules hold memory, built with the driver's virtual
 * memory calls (cuMemAddressReserve, cuMemCreate, cuMemMap). Such memory
 * has no CUDA IPC handle, so it is private to its process. Only built with
 * CUDA. */
#ifndef WSYNC_COMMON_WINDOW_CUDA_VMM_H
#define WSYNC_COMMON_WINDOW_CUDA_VMM_H

#include "common/window/window.h"

void cuda_vmm_free(wsync_window_t *w);

#endif
