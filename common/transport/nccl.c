/* nccl.c: the NCCL transport (placeholder until the GPU issue lands it):
 * without NCCL every op reports that wsync was built without it. */
#include "common/checks.h"
#include "common/transport/transport.h"

static int nccl_can_use(const wsync_transport_config_t *cfg)
{
    wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl: not implemented in this build");
    return 0;
}

static wsync_status_t nccl_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport nccl: not implemented in this build");
}

const wsync_transport_ops_t wsync_transport_nccl = {
    .name = "nccl",
    .can_use = nccl_can_use,
    .open = nccl_open,
};
