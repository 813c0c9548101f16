/* transport_conformance_test.c: the transport conformance cases
 * (tests/unit/common/transport/conformance.h) against the backends that move
 * GPU memory, in one process: local (sender and receiver on GPU 0: the copy
 * with the digest fused), nccl (sender on GPU 0, receiver on GPU 1: NCCL
 * refuses both ranks of a pair on one GPU) and tcp from GPU memory (through
 * its bounce buffers). Without a GPU every case prints "skipped: no CUDA
 * device". */
#include <stdlib.h>
#include "tests/gpu/gpu_test.h"
#include "tests/unit/common/transport/conformance.h"

#include "common/base/settings.h"

int main(void)
{
    setenv("WSYNC_LOCAL_GATHER_BATCH", "1", 0); /* the local transport's batched packed puts (the default) */
    const int ngpu = gpu_count();
    const char *no_gpu = ngpu > 0 ? NULL : "no CUDA device";
    conf_backend_t local = {.name = "local",
                            .ops = &wsync_transport_local,
                            .mem = &wsync_mem_cuda,
                            .rx_device = 0,
                            .tx_device = 0,
                            .skip = no_gpu};
    conf_backend_t nccl = {.name = "nccl",
                           .ops = &wsync_transport_nccl,
                           .mem = &wsync_mem_cuda,
                           .rx_device = 1,
                           .tx_device = 0,
                           .bind_host = "127.0.0.1",
                           .two_sided = 1,
                           .skip = ngpu == 0 ? "no CUDA device"
                                   : ngpu < 2
                                       ? "needs 2 CUDA devices (NCCL refuses two ranks of a pair on one GPU)"
                                       : NULL};
    conf_backend_t tcp = {.name = "tcp_cuda",
                          .ops = &wsync_transport_tcp,
                          .mem = &wsync_mem_cuda,
                          .rx_device = 0,
                          .tx_device = 0,
                          .bind_host = "127.0.0.1",
                          .skip = no_gpu};
    /* a receiver gone mid-put: NCCL's send waits out this, not a minute */
    setenv("WSYNC_NCCL_OP_TIMEOUT_MS", "3000", 1);
    wsync_settings_reload();
    conf_run(&local);
    conf_run(&nccl);
    conf_run(&tcp);
    TEST_EXIT();
}
