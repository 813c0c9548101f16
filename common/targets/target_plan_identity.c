/* target_plan_identity.c: target_plan.h's identity case straight from the
 * whole image's plan (plan.h), without planning targets: the engine side's
 * one fetch engine lands the whole image through it (engine_side/
 * fetch_whole.c). O(pieces + chunks x ranks). */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/target_plan.h"

/* The per trainer rank put lists: the plan's piece lists, in its send order. */
static wsync_status_t rank_lists(wsync_node_plan_t *np, const wsync_plan_t *plan)
{
    int t;
    np->rank_nputs = calloc((size_t)plan->world, sizeof(*np->rank_nputs));
    np->rank_puts = calloc((size_t)plan->world, sizeof(*np->rank_puts));
    if (np->rank_nputs == NULL || np->rank_puts == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    for (t = 0; t < plan->world; t++) {
        np->rank_nputs[t] = plan->rank_npieces[t];
        np->rank_puts[t] = malloc(plan->rank_npieces[t] * sizeof(**np->rank_puts) + 1);
        WSYNC_CHECK_ALLOC(np->rank_puts[t]);
        memcpy(np->rank_puts[t], plan->rank_pieces[t], plan->rank_npieces[t] * sizeof(**np->rank_puts));
    }
    return WSYNC_OK;
}

/* Chunk c's puts (the plan's pieces of c, same ids) and its copies to every
 * rank that does not land it. */
static void add_chunk(wsync_node_plan_t *np, const wsync_plan_t *plan, uint32_t c, int land,
                      const wsync_identity_landing_t *how)
{
    wsync_tchunk_t *ch = &np->chunks[c];
    const uint64_t off = (uint64_t)c * plan->chunk_size;
    const uint64_t len = off + plan->chunk_size > plan->image_size ? plan->image_size - off : plan->chunk_size;
    size_t i;
    int q;
    *ch = (wsync_tchunk_t){.land_rank = land,
                           .src_chunk = c,
                           .bytes = len,
                           .first_put = plan->chunk_first[c],
                           .nputs = plan->chunk_first[c + 1] - plan->chunk_first[c],
                           .first_copy = np->ncopies};
    for (i = ch->first_put; i < ch->first_put + ch->nputs; i++) {
        const wsync_piece_t *pc = &plan->pieces[i];
        np->puts[i] = (wsync_tput_t){.id = (uint32_t)i,
                                     .src_rank = pc->src_rank,
                                     .land_rank = land,
                                     .chunk = c,
                                     .dst_off = pc->offset,
                                     .len = pc->len};
    }
    np->land_bytes[land] += len;
    for (q = 0; q < np->local_ranks; q++) {
        np->holds_bytes[q] += len;
        if (q != land && !(how->also_lands && how->also_lands(how->arg, c, q)))
            np->copies[np->ncopies++] = (wsync_tcopy_t){.chunk = c,
                                                        .from_rank = land,
                                                        .from_off = off,
                                                        .to_rank = q,
                                                        .to_off = off,
                                                        .len = len};
    }
    ch->ncopies = np->ncopies - ch->first_copy;
}

static wsync_status_t build(const wsync_plan_t *plan, int L, const wsync_identity_landing_t *how,
                            wsync_node_plan_t *np)
{
    uint32_t c;
    np->local_ranks = L;
    np->world = plan->world;
    np->chunk_bytes = plan->chunk_size;
    np->nputs = plan->npieces;
    np->nchunks = plan->nchunks;
    np->network_bytes = plan->image_size;
    np->puts = calloc(plan->npieces + 1, sizeof(*np->puts));
    np->chunks = calloc((size_t)plan->nchunks + 1, sizeof(*np->chunks));
    np->copies = calloc((size_t)plan->nchunks * (size_t)(L > 1 ? L - 1 : 1) + 1, sizeof(*np->copies));
    np->land_bytes = calloc((size_t)L, sizeof(*np->land_bytes));
    np->holds_bytes = calloc((size_t)L, sizeof(*np->holds_bytes));
    if (!np->puts || !np->chunks || !np->copies || !np->land_bytes || !np->holds_bytes)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    for (c = 0; c < plan->nchunks; c++) {
        const int land = how->land[c] & how->rank_mask;
        if (land >= L)
            return wsync_error(WSYNC_ERR_INVALID, "chunk %u lands on local rank %d of %d", c, land, L);
        add_chunk(np, plan, c, land, how);
    }
    return rank_lists(np, plan);
}

wsync_status_t wsync_node_plan_identity(const wsync_plan_t *plan, int local_ranks,
                                        const wsync_identity_landing_t *how, wsync_node_plan_t **out)
{
    wsync_node_plan_t *np = calloc(1, sizeof(*np));
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(np);
    st = build(plan, local_ranks, how, np);
    if (st != WSYNC_OK) {
        wsync_node_plan_free(np);
        return st;
    }
    *out = np;
    return WSYNC_OK;
}
