/* conformance_test.c: the transport conformance cases (conformance.h) against
 * the backends that move host memory: tcp always; verbs where an RDMA device
 * is present (the soft-RoCE VM, tests/verbs/), otherwise each of its cases
 * prints "skipped: no RDMA device". The GPU backends (local, nccl, tcp from
 * GPU memory) run the same cases in tests/gpu/transport_conformance_test.c. */
#include "tests/unit/common/transport/conformance.h"

int main(void)
{
    wsync_transport_config_t vc = {.device = -1};
    conf_backend_t tcp = {.name = "tcp",
                          .ops = &wsync_transport_tcp,
                          .mem = &wsync_mem_host,
                          .rx_device = -1,
                          .tx_device = -1,
                          .bind_host = "127.0.0.1"};
    conf_backend_t verbs = {.name = "verbs",
                            .ops = &wsync_transport_verbs,
                            .mem = &wsync_mem_host,
                            .rx_device = -1,
                            .tx_device = -1,
                            .bind_host = NULL};
    if (!wsync_transport_verbs.can_use(&vc))
        verbs.skip = "no RDMA device";
    conf_run(&tcp);
    conf_run(&verbs);
    TEST_EXIT();
}
