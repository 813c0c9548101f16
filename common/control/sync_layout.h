/* sync_layout.h: everything both sides derive from one version's description:
 * the manifest, the trainer layout, and the plan. Built by the publisher from
 * its inputs and by the receiver from the control endpoint's version record;
 * equal inputs give equal digests and the same plan on every party. */
#ifndef WSYNC_COMMON_SYNC_LAYOUT_H
#define WSYNC_COMMON_SYNC_LAYOUT_H

#include <jansson.h>

#include "common/control/client.h"
#include "common/model/manifest.h"
#include "common/model/plan.h"
#include "common/proto/version_record.h"

typedef struct wsync_sync_layout {
    wsync_manifest_t *manifest; /* owned */
    char manifest_digest[33];
    int kind; /* wsync_layout_kind_t: 0 even, 1 fsdp */
    int world;
    wsync_layout_t *layout; /* owned */
    wsync_plan_t *plan;     /* owned */
    char layout_digest[17]; /* over kind, world, chunk size, every extent */
} wsync_sync_layout_t;

/* Takes ownership of `manifest` (also on failure). */
wsync_status_t wsync_sync_layout_build(wsync_manifest_t *manifest, int kind, int world, uint64_t chunk_size,
                                       wsync_sync_layout_t **out);
void wsync_sync_layout_free(wsync_sync_layout_t *sl);

/* {"manifest_digest","chunk_size","layout","layout_digest","image_size","world"};
 * with_manifest adds "manifest". New reference. */
json_t *wsync_sync_layout_to_json(const wsync_sync_layout_t *sl, int with_manifest);

/* From a control endpoint version record (GET /v1/versions/<v>, parsed by
 * common/proto/version_record.h) and the manifest it names by
 * manifest_digest (GET /v1/layouts/<digest>; NULL: the record's own
 * "manifest", as endpoints from before layouts sent it): rebuilds the layout
 * and plan and checks that the digests match what was published. */
wsync_status_t wsync_sync_layout_from_record(const wsync_version_record_t *version, const json_t *manifest,
                                             wsync_sync_layout_t **out);
/* from_record with the manifest fetched from the endpoint `c` (unless the
 * record carries it): what a receiver does for a layout it does not hold. */
wsync_status_t wsync_sync_layout_fetch(wsync_control_t *c, const wsync_version_record_t *version,
                                       wsync_sync_layout_t **out);

/* Piece digests of a version record, indexed by piece id; checks that the
 * record's pieces are exactly the plan's. Caller frees *digests. A piece
 * without "digest" (its trainer rank announced the version before its
 * digests: docs/API.md "late digests") is refused unless `missing` is given:
 * then its digest reads 0 and *missing counts such pieces. */
wsync_status_t wsync_sync_layout_digests(const wsync_sync_layout_t *sl, const wsync_version_record_t *version,
                                         uint64_t **digests, size_t *missing);

#endif
