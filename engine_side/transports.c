/* transports.c: the data transports an engine rank receives over (the
 * configured one, and "local" for GPU trainer ranks on this host), opened
 * lazily and kept across pulls with every image slot registered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/settings.h"
#include "engine_side/receiver_internal.h"

void recv_transport_reset(wsync_receiver_t *r)
{
    int k, s;
    for (k = 0; k < r->transports.ntr; k++) {
        recv_transport_t *rt = &r->transports.tr[k];
        for (s = 0; s < BOARD_SLOTS; s++)
            if (rt->region[s]) {
                rt->ops->dereg(rt->region[s]);
                rt->region[s] = NULL;
            }
        if (rt->t)
            rt->ops->close(rt->t);
        memset(rt, 0, sizeof(*rt));
    }
    r->transports.ntr = 0;
    recv_pull_conns_drop(&r->transports.pull_conns); /* a trainer may have restarted */
}

wsync_status_t recv_transport_ensure(wsync_receiver_t *r, const char *name, recv_transport_t **out)
{
    wsync_transport_config_t cfg = {.bind_host = r->bind_host,
                                    .conns_per_peer = 0,
                                    .device = r->mem->kind == WSYNC_MEM_CUDA ? r->device : -1,
                                    .timeout_ms = wsync_connect_timeout_ms(0),
                                    .auth = &r->auth};
    recv_transport_t *rt = NULL;
    int k, s;
    for (k = 0; k < r->transports.ntr; k++)
        if (strcmp(r->transports.tr[k].want, name) == 0)
            rt = &r->transports.tr[k];
    if (rt == NULL) {
        if (r->transports.ntr == RECV_MAX_TRANSPORTS)
            return wsync_error(WSYNC_ERR_INVALID, "engine %s: more than %d transports in use", r->engine_id,
                               RECV_MAX_TRANSPORTS);
        rt = &r->transports.tr[r->transports.ntr];
        memset(rt, 0, sizeof(*rt));
        snprintf(rt->want, sizeof(rt->want), "%s", name);
        WSYNC_CHECK(wsync_transport_get(name, &cfg, &rt->ops));
        WSYNC_CHECK(rt->ops->open(&cfg, &rt->t));
        r->transports.ntr++; /* from here recv_transport_reset closes it */
        WSYNC_CHECK(rt->ops->listen(rt->t, &rt->addr));
    }
    for (s = 0; s < r->images.nslots; s++)
        if (rt->region[s] == NULL)
            WSYNC_CHECK(rt->ops->reg(rt->t, r->images.win[s].ptr, r->images.len, r->mem->kind, &rt->region[s],
                                     &rt->key[s]));
    *out = rt;
    return WSYNC_OK;
}

const char *recv_transport_for(wsync_receiver_t *r, const char *host_id, const char *device)
{
    wsync_transport_config_t cfg = {.device = r->device, .timeout_ms = wsync_connect_timeout_ms(0)};
    const wsync_transport_ops_t *ops;
    int trainer_on_gpu = device != NULL && strncmp(device, "cuda", 4) == 0;
    /* NCCL needs GPU memory at both ends: for a trainer rank whose shard is in
     * host memory, "auto" on a GPU engine takes the next usable transport
     * (it picked nccl, which that trainer refused). */
    if (!trainer_on_gpu && r->mem->kind == WSYNC_MEM_CUDA && strcmp(r->transport_name, "auto") == 0 &&
        wsync_transport_get("auto", &cfg, &ops) == WSYNC_OK && strcmp(ops->name, "nccl") == 0)
        return "tcp";
    if (r->mem->kind != WSYNC_MEM_CUDA || !wsync_setting_int(WSYNC_SET_LOCAL_TRANSPORT) || host_id == NULL ||
        device == NULL || strcmp(host_id, r->host_id) != 0 || strncmp(device, "cuda", 4) != 0)
        return r->transport_name;
    return wsync_transport_local.can_use(&cfg) ? "local" : r->transport_name;
}

int recv_transport_pins(const recv_transports_t *ts)
{
    int k;
    for (k = 0; k < ts->ntr; k++)
        if (strcmp(ts->tr[k].ops->name, "verbs") == 0)
            return 1;
    return 0;
}

/* A transport refused the spans (WSYNC_ERR_UNSUPPORTED): every region of
 * `slot` back to landing every byte, and none direct. */
static wsync_status_t direct_refused(wsync_receiver_t *r, int slot, wsync_redirect_t **spans, size_t *nspans)
{
    int k;
    if (!r->transports.direct_refused)
        wsync_log(WSYNC_LOG_WARN,
                  "engine %s rank %d: the caller's tensors cannot take the bytes straight, so they "
                  "land in the image and are copied on: %s",
                  r->engine_id, r->cfg.local_rank, wsync_last_error());
    r->transports.direct_refused = 1;
    free(*spans);
    *spans = NULL;
    *nspans = 0;
    for (k = 0; k < r->transports.ntr; k++)
        if (r->transports.tr[k].ops->redirect)
            WSYNC_CHECK(r->transports.tr[k].ops->redirect(r->transports.tr[k].region[slot], NULL, 0,
                                                          &r->transports.tr[k].key[slot]));
    return WSYNC_OK;
}

wsync_status_t recv_transport_direct(wsync_receiver_t *r, int slot, const char **names, int n, int allowed,
                                     const wsync_node_plan_t *np, wsync_redirect_t **spans, size_t *nspans)
{
    recv_transport_t *rt;
    int t, k, all = allowed && r->run.dm && r->run.dm->in_place;
    *spans = NULL;
    *nspans = 0;
    for (t = 0; t < n; t++) {
        wsync_status_t st = recv_transport_ensure(r, names[t], &rt);
        if (st != WSYNC_OK && r->images.gpu_sparse) { /* e.g. local: the image has no CUDA IPC handle to register */
            char why[384];
            snprintf(why, sizeof(why), "%s", wsync_last_error());
            (void)recv_gpu_sparse_check(r, 0, NULL, 0);
            return wsync_error(st, "%s (%s)", wsync_last_error(), why);
        }
        WSYNC_CHECK(st);
        all &= rt->ops->redirect != NULL;
    }
    if (all) {
        WSYNC_CHECK(recv_dests_direct(r->run.dm, np, r->cfg.local_rank, spans, nspans));
        wsync_trace("engine %s rank %d: %zu ranges land straight in the caller's tensors", r->engine_id,
                    r->cfg.local_rank, *nspans);
    }
    if (r->images.gpu_sparse) /* the image has no memory under the bytes that must land straight */
        WSYNC_CHECK(recv_gpu_sparse_check(r, all, *spans, *nspans));
    for (k = 0; k < r->transports.ntr; k++) {
        recv_transport_t *x = &r->transports.tr[k];
        wsync_status_t st = x->ops->redirect ? x->ops->redirect(x->region[slot], *spans, *nspans, &x->key[slot])
                                             : WSYNC_OK;
        if (st == WSYNC_ERR_UNSUPPORTED && *nspans > 0 && !r->images.gpu_sparse)
            return direct_refused(r, slot, spans, nspans);
        WSYNC_CHECK(st);
    }
    return WSYNC_OK;
}
