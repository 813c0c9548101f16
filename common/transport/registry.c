/* registry.c: picks a transport by name, or the fastest usable one. */
#include <string.h>

#include "common/base/checks.h"
#include "common/transport/transport.h"

/* Priority order for "auto": one-sided RDMA, then NCCL, then TCP. */
static const wsync_transport_ops_t *const transports[] = {
    &wsync_transport_verbs,
    &wsync_transport_nccl,
    &wsync_transport_tcp,
};

wsync_status_t wsync_transport_get(const char *name, const wsync_transport_config_t *cfg,
                                   const wsync_transport_ops_t **out)
{
    size_t i;
    if (name == NULL || strcmp(name, "auto") == 0) {
        for (i = 0; i < WSYNC_ARRAY_LEN(transports); i++)
            if (transports[i]->can_use(cfg)) {
                *out = transports[i];
                return WSYNC_OK;
            }
        return wsync_error(WSYNC_ERR_UNSUPPORTED, "no transport is usable here");
    }
    for (i = 0; i <= WSYNC_ARRAY_LEN(transports); i++) {
        /* "local" is never picked by auto: it only serves same-host GPU peers. */
        const wsync_transport_ops_t *ops = i < WSYNC_ARRAY_LEN(transports) ? transports[i] : &wsync_transport_local;
        if (strcmp(name, ops->name) == 0) {
            if (!ops->can_use(cfg))
                return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport %s cannot be used here: %s", name,
                                   wsync_last_error());
            *out = ops;
            return WSYNC_OK;
        }
    }
    return wsync_error(WSYNC_ERR_INVALID, "unknown transport '%s' (valid: auto, tcp, nccl, verbs, local)", name);
}

wsync_status_t wsync_redirect_check(const wsync_region_t *r, const wsync_redirect_t *spans, size_t n,
                                    const char *backend)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (wsync_redirect_span_bad(spans[i].off, spans[i].len, r->len,
                                    i > 0 ? spans[i - 1].off + spans[i - 1].len : 0))
            return wsync_error(WSYNC_ERR_INVALID,
                               "%s: redirect span %zu [%llu, +%llu) is empty, outside the region or out of order",
                               backend, i, (unsigned long long)spans[i].off, (unsigned long long)spans[i].len);
    return WSYNC_OK;
}
