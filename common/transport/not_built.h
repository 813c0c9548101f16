/* not_built.h: the one refusal of a transport this build left out (nccl
 * without CUDA and NCCL, local without CUDA, verbs without libibverbs). The
 * transport keeps its ops table, so "auto" passes it over and a request by
 * name fails naming the transport, what the build lacked and what to do. */
#ifndef WSYNC_COMMON_TRANSPORT_NOT_BUILT_H
#define WSYNC_COMMON_TRANSPORT_NOT_BUILT_H

#include "common/transport/transport.h"

/* Records and returns WSYNC_ERR_UNSUPPORTED: "transport <name>: wsync was
 * not built with <missing> (<todo>)". */
wsync_status_t wsync_transport_not_built(const char *name, const char *missing, const char *todo);

/* The ops behind open: no object of a transport left out can exist (open
 * always refuses), so these only say so again and the void ones do nothing. */
wsync_status_t wsync_not_built_reg(wsync_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind,
                                   wsync_region_t **out, wsync_blob_t *key);
void wsync_not_built_dereg(wsync_region_t *r);
wsync_status_t wsync_not_built_listen(wsync_transport_t *t, wsync_blob_t *addr);
wsync_status_t wsync_not_built_connect(wsync_transport_t *t, const wsync_blob_t *addr, int self_id,
                                       wsync_conn_t **out);
wsync_status_t wsync_not_built_expect(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off,
                                      size_t len, uint64_t tag);
wsync_status_t wsync_not_built_put(wsync_conn_t *c, wsync_region_t *src, size_t src_off,
                                   const wsync_blob_t *dst_key, size_t dst_off, size_t len, uint64_t tag);
void wsync_not_built_put_flush(wsync_conn_t *c);
void wsync_not_built_expect_flush(wsync_transport_t *t, int src_id);
wsync_status_t wsync_not_built_poll(wsync_transport_t *t, wsync_completion_t *out, int max, int *n, int timeout_ms);
void wsync_not_built_disconnect(wsync_conn_t *c);
void wsync_not_built_close(wsync_transport_t *t);

/* Defines the ops table `sym` of transport `tname` for a build without it:
 * can_use and open refuse with the message above, the rest are the shared
 * ops. Used once per transport, in place of its table. */
#define WSYNC_TRANSPORT_NOT_BUILT(sym, tname, missing, todo)                                       \
    static int sym##_can_use(const wsync_transport_config_t *cfg)                                  \
    {                                                                                              \
        (void)cfg;                                                                                 \
        wsync_transport_not_built(tname, missing, todo);                                           \
        return 0;                                                                                  \
    }                                                                                              \
    static wsync_status_t sym##_open(const wsync_transport_config_t *cfg, wsync_transport_t **out) \
    {                                                                                              \
        (void)cfg, (void)out;                                                                      \
        return wsync_transport_not_built(tname, missing, todo);                                    \
    }                                                                                              \
    const wsync_transport_ops_t sym = {                                                            \
        .name = tname,                                                                             \
        .can_use = sym##_can_use,                                                                  \
        .open = sym##_open,                                                                        \
        .reg = wsync_not_built_reg,                                                                \
        .dereg = wsync_not_built_dereg,                                                            \
        .listen = wsync_not_built_listen,                                                          \
        .connect = wsync_not_built_connect,                                                        \
        .expect = wsync_not_built_expect,                                                          \
        .put = wsync_not_built_put,                                                                \
        .put_flush = wsync_not_built_put_flush,                                                    \
        .expect_flush = wsync_not_built_expect_flush,                                              \
        .poll = wsync_not_built_poll,                                                              \
        .disconnect = wsync_not_built_disconnect,                                                  \
        .close = wsync_not_built_close,                                                            \
    }

#endif
