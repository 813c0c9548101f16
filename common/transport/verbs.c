/* verbs.c: the libibverbs transport (placeholder until the GPU issue lands it):
 * without libibverbs every op reports that wsync was built without it. */
#include "common/checks.h"
#include "common/transport/transport.h"

static int verbs_can_use(const wsync_transport_config_t *cfg)
{
    wsync_error(WSYNC_ERR_UNSUPPORTED, "transport verbs: not implemented in this build");
    return 0;
}

static wsync_status_t verbs_open(const wsync_transport_config_t *cfg, wsync_transport_t **out)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport verbs: not implemented in this build");
}

const wsync_transport_ops_t wsync_transport_verbs = {
    .name = "verbs",
    .can_use = verbs_can_use,
    .open = verbs_open,
};
