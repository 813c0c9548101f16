/* not_built.c: the shared refusal of a transport this build left out
 * (not_built.h): one message, and the ops no object of it can reach. */
#include "common/transport/not_built.h"

#include "common/base/checks.h"

wsync_status_t wsync_transport_not_built(const char *name, const char *missing, const char *todo)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport %s: wsync was not built with %s (%s)", name, missing, todo);
}

/* Only an object of another transport could get here: name its own. */
static wsync_status_t unreachable(const wsync_transport_t *t)
{
    return wsync_error(WSYNC_ERR_UNSUPPORTED, "transport %s: this build left it out; it has no open transport",
                       t != NULL && t->ops != NULL ? t->ops->name : "(none)");
}

wsync_status_t wsync_not_built_reg(wsync_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind,
                                   wsync_region_t **out, wsync_blob_t *key)
{
    return unreachable(t);
}

void wsync_not_built_dereg(wsync_region_t *r) {}

wsync_status_t wsync_not_built_listen(wsync_transport_t *t, wsync_blob_t *addr)
{
    return unreachable(t);
}

wsync_status_t wsync_not_built_connect(wsync_transport_t *t, const wsync_blob_t *addr, int self_id,
                                       wsync_conn_t **out)
{
    return unreachable(t);
}

wsync_status_t wsync_not_built_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off,
                                      size_t len, uint64_t tag)
{
    return unreachable(t);
}

wsync_status_t wsync_not_built_put(wsync_conn_t *c, wsync_region_t *src, size_t src_off,
                                   const wsync_blob_t *dst_key, size_t dst_off, size_t len, uint64_t tag)
{
    return unreachable(c != NULL ? c->transport : NULL);
}

void wsync_not_built_put_flush(wsync_conn_t *c) {}

void wsync_not_built_expect_flush(wsync_transport_t *t, int src_id) {}

wsync_status_t wsync_not_built_poll(wsync_transport_t *t, wsync_completion_t *out, int max, int *n, int timeout_ms)
{
    *n = 0;
    return unreachable(t);
}

void wsync_not_built_disconnect(wsync_conn_t *c) {}

void wsync_not_built_close(wsync_transport_t *t) {}
