/* chunk_groups.c: chunks written through to the caller's tensors as groups
 * of jobs, then verified (chunk_groups.h). */
#include "engine_side/chunk_groups.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

wsync_status_t recv_groups_begin(recv_groups_t *gs, const recv_dests_t *dm, uint32_t nchunks)
{
    gs->dm = dm;
    if (dm == NULL)
        return WSYNC_OK;
    gs->g = calloc((size_t)nchunks + 1, sizeof(*gs->g));
    gs->inflight = calloc((size_t)nchunks + 1, sizeof(*gs->inflight));
    if (!gs->g || !gs->inflight)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    return WSYNC_OK;
}

wsync_status_t recv_groups_start(recv_groups_t *gs, recv_pull_t *p, recv_verify_t *v, char *image, const char *src,
                                 uint64_t off, uint64_t len, uint32_t c, int landed, int direct)
{
    size_t np = recv_verify_ranges(p, v, c, image);
    recv_dgroup_t *g = &gs->g[c];
    wsync_status_t st = recv_dgroup_start(g, p->r->mem, gs->dm, image, src, off, len, v->rg, np, direct);
    if (st != WSYNC_OK) {
        recv_dgroup_end(g, p->r->mem);
        return st;
    }
    g->chunk = c;
    g->landed = landed;
    gs->inflight[gs->ninflight++] = c;
    gs->nfan += !landed;
    return WSYNC_OK;
}

wsync_status_t recv_groups_reap(recv_groups_t *gs, recv_pull_t *p, recv_verify_t *v, int *progressed)
{
    wsync_status_t st = WSYNC_OK;
    uint32_t k, keep = 0;
    for (k = 0; k < gs->ninflight; k++) {
        uint32_t c = gs->inflight[k];
        recv_dgroup_t *g = &gs->g[c];
        int done = 0, landed = g->landed;
        if (st == WSYNC_OK)
            st = recv_dgroup_poll(g, p->r->mem, v->sums, &done);
        if (!done) {
            gs->inflight[keep++] = c; /* running (or left for recv_groups_end) */
            continue;
        }
        recv_dgroup_end(g, p->r->mem);
        gs->nfan -= !landed;
        *progressed = 1;
        if (st == WSYNC_OK)
            st = recv_verify_summed(p, v, c, landed, v->sums);
    }
    gs->ninflight = keep;
    return st;
}

void recv_groups_end(recv_groups_t *gs, const wsync_mem_ops_t *mem)
{
    uint32_t k;
    for (k = 0; k < gs->ninflight; k++)
        recv_dgroup_end(&gs->g[gs->inflight[k]], mem); /* waits likewise */
    free(gs->g);
    free(gs->inflight);
    memset(gs, 0, sizeof(*gs));
}
