/* share.c: a trainer rank's extents and pieces, from the layout and the
 * caller's pointers (share.h). */
#include "trainer_side/share.h"

#include <stdlib.h>

#include "common/base/checks.h"

/* The caller's extents, checked against the layout. */
static wsync_status_t collect_owned(pub_share_t *sh, const wsync_layout_t *l, const wsync_publisher_config_t *cfg)
{
    int r = cfg->rank;
    size_t i, n = l->nextents[r];

    sh->nspans = n;
    sh->owned = calloc(n ? n : 1, sizeof(*sh->owned));
    WSYNC_CHECK_ALLOC(sh->owned);
    if (cfg->image == NULL && (size_t)cfg->nowned != n)
        return wsync_error(WSYNC_ERR_INVALID,
                           "rank %d owns %zu extents under this layout but %d were given "
                           "(wsync_publisher_owned_extents lists them)",
                           r, n, cfg->nowned);
    for (i = 0; i < n; i++) {
        const wsync_extent_t *e = &l->extents[r][i];
        sh->owned[i].offset = e->offset;
        sh->owned[i].len = e->len;
        if (cfg->image) {
            sh->owned[i].ptr = (const char *)cfg->image + e->offset;
        } else {
            const wsync_owned_t *o = &cfg->owned[i];
            if (o->offset != e->offset || o->len != e->len || (o->ptr == NULL && o->len))
                return wsync_error(WSYNC_ERR_INVALID,
                                   "owned extent %zu of rank %d should be [%llu, +%llu) with a pointer, "
                                   "got [%llu, +%llu)",
                                   i, r, (unsigned long long)e->offset, (unsigned long long)e->len,
                                   (unsigned long long)o->offset, (unsigned long long)o->len);
            sh->owned[i].ptr = o->ptr;
        }
        sh->owned_bytes += e->len;
    }
    return WSYNC_OK;
}

/* Pieces this rank sends, with the span each lies in. */
static wsync_status_t index_pieces(pub_share_t *sh, const wsync_plan_t *plan, int r)
{
    size_t i, s = 0;
    uint64_t covered = 0;

    sh->nmy = plan->rank_npieces[r];
    sh->my_pieces = plan->rank_pieces[r];
    sh->piece_slot_off = calloc(plan->npieces ? plan->npieces : 1, sizeof(uint64_t));
    WSYNC_CHECK_ALLOC(sh->piece_slot_off);
    for (i = 0; i < sh->nmy; i++) {
        const wsync_piece_t *pc = &plan->pieces[sh->my_pieces[i]];
        while (s < sh->nspans && sh->owned[s].offset + sh->owned[s].len <= pc->offset)
            s++;
        if (s == sh->nspans || pc->offset < sh->owned[s].offset)
            return wsync_error(WSYNC_ERR_INTERNAL, "piece %u is not inside an owned extent", pc->id);
        sh->piece_slot_off[pc->id] = s;
        covered += pc->len;
    }
    /* Pieces never overlap, so equal byte counts mean they tile the extents. */
    sh->pieces_tile = covered == sh->owned_bytes;
    return WSYNC_OK;
}

wsync_status_t pub_share_init(pub_share_t *sh, const wsync_sync_layout_t *sl, const wsync_publisher_config_t *cfg)
{
    WSYNC_CHECK(collect_owned(sh, sl->layout, cfg));
    return index_pieces(sh, sl->plan, cfg->rank);
}

void pub_share_free(pub_share_t *sh)
{
    free(sh->piece_slot_off);
    free(sh->owned);
}
