/* landing.c: which local rank of the node lands each chunk. By default chunk
 * c lands on local rank c mod L, which spreads the network traffic over the
 * node's ranks. When the trainer rank that owns most of a chunk holds it in
 * GPU memory on this host, on the GPU of one of the node's ranks (colocated
 * RL: trainer and engine share GPUs), the chunk lands on that rank instead:
 * the put is a copy inside one GPU, and only the fan-out to the other ranks
 * crosses between GPUs, once. Where several of the node's ranks share that
 * GPU, each of them lands the chunk (BOARD_LAND_GPU): on one GPU a landing
 * and a fan-out copy move the same bytes through the same memory, but the
 * landings of all of them run at once, each in chunk order, while a fan-out
 * waits for its chunk to land on the other rank first (setting
 * gpu_shared_landing = 0 goes back to one landing rank). Local rank 0 decides and posts the map on the
 * node board (which refuses more chunks than it holds); every rank asks its trainers for exactly the chunks the map
 * gives it (the pull request's "chunks" bitmap). With engine layouts the node
 * plan (target_plan.h) chooses the landing rank; rank 0 posts its map all the
 * same, and every rank checks it against the plan it derived. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "engine_side/receiver_internal.h"

/* Per trainer rank t: the local ranks on its GPU, colo[t * L ..], ncolo[t]
 * of them (several ranks may share a GPU: chunks are spread over them). */
wsync_status_t recv_colocated_ranks(wsync_receiver_t *r, int world, int *colo, int *ncolo)
{
    json_t *arr = NULL, *e;
    size_t i;
    int t, p;
    for (t = 0; t < world; t++)
        ncolo[t] = 0;
    if (r->mem->kind != WSYNC_MEM_CUDA)
        return WSYNC_OK;
    WSYNC_CHECK(recv_trainers(r, &arr));
    json_array_foreach(arr, i, e)
    {
        json_int_t rk = json_integer_value(json_object_get(e, "rank"));
        json_t *ep = json_object_get(e, "endpoint");
        const char *host = json_string_value(json_object_get(ep, "host_id"));
        const char *device = json_string_value(json_object_get(ep, "device"));
        const wsync_mem_ops_t *mem = NULL;
        int dev = -1;
        /* The trainer's device string, read as the trainer itself reads it. */
        if (rk < 0 || rk >= world || host == NULL || strcmp(host, r->host_id) != 0 || device == NULL ||
            wsync_mem_get(device, &mem, &dev) != WSYNC_OK || mem->kind != WSYNC_MEM_CUDA)
            continue;
        ncolo[rk] = 0;
        for (p = 0; p < r->cfg.local_world; p++)
            if (board_rank_device(r->board, p) == dev)
                colo[rk * r->cfg.local_world + ncolo[rk]++] = p;
    }
    json_decref(arr);
    return WSYNC_OK;
}

wsync_status_t recv_plan_landing(wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t gen)
{
    const wsync_plan_t *plan = sl->plan;
    const int L = r->cfg.local_world;
    uint64_t *bytes = NULL;
    uint8_t *land = NULL;
    int *colo = NULL, *ncolo = NULL;
    wsync_status_t st = WSYNC_OK;
    uint32_t c, i;
    int t, best, shared = (int)wsync_setting_int(WSYNC_SET_GPU_SHARED_LANDING);

    colo = calloc((size_t)plan->world * (size_t)L, sizeof(*colo));
    ncolo = calloc((size_t)plan->world, sizeof(*ncolo));
    bytes = calloc((size_t)plan->world, sizeof(*bytes));
    land = malloc(plan->nchunks + 1);
    if (colo == NULL || ncolo == NULL || bytes == NULL || land == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    WSYNC_CHECK_GOTO(recv_colocated_ranks(r, plan->world, colo, ncolo), st, out);
    for (c = 0; c < plan->nchunks; c++) {
        memset(bytes, 0, (size_t)plan->world * sizeof(*bytes));
        best = -1;
        for (i = plan->chunk_first[c]; i < plan->chunk_first[c + 1]; i++) {
            t = plan->pieces[i].src_rank;
            bytes[t] += plan->pieces[i].len;
            if (best < 0 || bytes[t] > bytes[best])
                best = t;
        }
        land[c] = (uint8_t)(best >= 0 && ncolo[best] > 0 ? colo[best * L + (int)(c % (uint32_t)ncolo[best])]
                                                         : wsync_plan_land_rank(plan, c, L));
        if (best >= 0 && ncolo[best] > 1 && shared)
            land[c] |= BOARD_LAND_GPU;
    }
    st = board_post_landing(r->board, gen, land, plan->nchunks);
out:
    free(land);
    free(colo);
    free(ncolo);
    free(bytes);
    return st;
}

wsync_status_t recv_post_tlanding(wsync_receiver_t *r, const recv_tlayout_t *tl, uint64_t gen)
{
    const wsync_node_plan_t *np = tl->np;
    uint8_t *land = malloc(np->nchunks + 1);
    wsync_status_t st;
    uint32_t c;
    WSYNC_CHECK_ALLOC(land);
    for (c = 0; c < np->nchunks; c++)
        land[c] = (uint8_t)np->chunks[c].land_rank;
    st = board_post_landing(r->board, gen, land, np->nchunks);
    free(land);
    return st;
}
