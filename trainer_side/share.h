/* share.h: a trainer rank's share of the image: the extents it owns (the
 * caller's pointers, checked against the layout) and the plan pieces it
 * sends, each with the extent it lies in. Built once at create, read-only
 * after: no lock. */
#ifndef WSYNC_TRAINER_SHARE_H
#define WSYNC_TRAINER_SHARE_H

#include "common/control/sync_layout.h"
#include "trainer_side/wsync_publisher.h"

typedef struct pub_share {
    wsync_owned_t *owned; /* [nspans] this rank's extents and the caller's pointers */
    size_t nspans;
    uint64_t owned_bytes;
    uint32_t *my_pieces; /* [nmy] ids of pieces this rank sends (the plan's array) */
    size_t nmy;
    uint64_t *piece_slot_off; /* per plan piece of mine: the index of the extent holding it */
    int pieces_tile;          /* my pieces cover my extents exactly */
} pub_share_t;

/* Rank cfg->rank's extents under sl, from cfg->image or cfg->owned (which
 * must list them as wsync_publisher_owned_extents does), and its pieces;
 * the error names the extent that does not match. pub_share_free takes a
 * zeroed or partly built share. */
wsync_status_t pub_share_init(pub_share_t *sh, const wsync_sync_layout_t *sl, const wsync_publisher_config_t *cfg);
void pub_share_free(pub_share_t *sh);

#endif
