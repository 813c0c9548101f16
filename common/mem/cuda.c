/* cuda.c: the CUDA memory backend (placeholder until the GPU issue lands it). */
#include "common/checks.h"
#include "common/mem/mem.h"

static wsync_status_t cuda_init(int device)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "memory cuda: not implemented in this build");
}

const wsync_mem_ops_t wsync_mem_cuda = {
    .name = "cuda",
    .kind = WSYNC_MEM_CUDA,
    .init = cuda_init,
};
