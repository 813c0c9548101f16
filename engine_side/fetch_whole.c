/* fetch_whole.c: the whole image as the identity target of the one fetch
 * engine (fetch.c). A node without engine layouts lands the
 * version's plan (plan.h) on the landing map local rank 0 posted
 * (landing.c); its node plan is target_plan.h's identity case built from
 * that plan and map (wsync_node_plan_identity), not planned from targets:
 * put i is piece i, at its own image offset, landing on its chunk's rank,
 * and every other rank copies the chunk whole at the same offset. Where the
 * map says every rank on the landing rank's GPU lands a chunk
 * (BOARD_LAND_GPU), those ranks land it too and copy nothing. */
#include "common/base/checks.h"
#include "engine_side/fetch_internal.h"

/* 1 if rank q lands chunk c of the map itself: it is the landing rank, or
 * the map lands c on every rank of the landing rank's GPU and q is one. */
static int map_lands(const wsync_receiver_t *r, const uint8_t *land, uint32_t c, int q)
{
    const int p = land[c] & BOARD_LAND_RANK;
    return p == q ||
           ((land[c] & BOARD_LAND_GPU) && board_rank_device(r->board, p) == board_rank_device(r->board, q));
}

int fetch_lands_here(const fetch_t *f, uint32_t c)
{
    return map_lands(f->p.r, f->p.land, c, f->p.me);
}

/* wsync_identity_landing_t's also_lands: a rank sharing the landing rank's GPU. */
static int shares_gpu(void *arg, uint32_t c, int q)
{
    const fetch_t *f = arg;
    return map_lands(f->p.r, f->p.land, c, q);
}

wsync_status_t fetch_whole_plan(fetch_t *f)
{
    const wsync_identity_landing_t how = {.land = f->p.land,
                                          .rank_mask = BOARD_LAND_RANK,
                                          .also_lands = shares_gpu,
                                          .arg = f};
    WSYNC_CHECK(wsync_node_plan_identity(f->plan, f->p.r->cfg.local_world, &how, &f->whole_np));
    f->np = f->whole_np;
    return WSYNC_OK;
}
