/* version_record.h: the control endpoint's record of one published version
 * (GET /v1/versions/<v>, the long poll's "record", the state file's
 * "versions"): the layout every party derives the plan from, each piece with
 * its trainer rank and digest, and the trainer ranks' endpoints as the
 * version was published. Built by the control model (common/control), parsed
 * by engine ranks (engine_side/attempt.c, late_digests.c) and by the state
 * file's loader; the parser trusts nothing and names the field that is wrong
 * with the range it must be in. */
#ifndef WSYNC_COMMON_VERSION_RECORD_H
#define WSYNC_COMMON_VERSION_RECORD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_RECORD_MAX_VERSION 9007199254740991LL /* 2^53 - 1: what JSON numbers hold exactly */
#define WSYNC_RECORD_MAX_BYTES (1LL << 62)          /* sizes and offsets */
#define WSYNC_RECORD_MAX_WORLD 4096
#define WSYNC_RECORD_MAX_PIECES (1 << 24)

typedef struct wsync_record_piece {
    uint32_t id; /* 0 .. 2^31-1: the plan's piece id */
    int rank;    /* the trainer rank that owns it */
    uint64_t offset, len;
    char digest[17]; /* as the trainer reported it (16 hex digits); "" while it is to follow */
} wsync_record_piece_t;

typedef struct wsync_record_trainer {
    int rank;
    json_t *endpoint; /* owned: the object the rank registered (its pull address, host id) */
} wsync_record_trainer_t;

typedef struct wsync_version_record {
    uint64_t version; /* 1 .. 2^53-1 */
    /* The layout: equal on every rank that reported the version. */
    char manifest_digest[128], layout[128], layout_digest[128]; /* 1 .. 127 bytes */
    uint64_t chunk_size, image_size;
    int world;
    wsync_record_piece_t *pieces; /* owned, sorted by id */
    size_t npieces;
    wsync_record_trainer_t *trainers; /* owned, by rank */
    int ntrainers;
    double published_at;    /* unix time */
    size_t digests_pending; /* pieces whose digest is "" (late digests); 0 when all came */
    json_t *manifest;       /* owned or NULL: endpoints from before layouts sent the manifest in the record */
} wsync_version_record_t;

/* The record as JSON (new reference), or NULL without memory. The fields and
 * their order are the HTTP API's (docs/API.md); "digests_pending" only when
 * not 0, a piece's "digest" only when it came. */
json_t *wsync_version_record_to_json(const wsync_version_record_t *r);
/* Parses and checks `j` (any source): on failure a message naming the field
 * and what it must be, and *out is left empty. On success *out owns its
 * arrays: free them with wsync_version_record_clear. digests_pending is
 * counted from the pieces, not read. */
wsync_status_t wsync_version_record_from_json(const json_t *j, wsync_version_record_t *out);
void wsync_version_record_clear(wsync_version_record_t *r);
/* A deep copy of `r` into *out (-1 out of memory, *out then empty). */
int wsync_version_record_copy(const wsync_version_record_t *r, wsync_version_record_t *out);
/* Pieces whose digest is still to come. */
size_t wsync_version_record_count_late(const wsync_version_record_t *r);
/* The piece `id` (binary search: pieces are sorted by id), or NULL. */
wsync_record_piece_t *wsync_version_record_piece(const wsync_version_record_t *r, uint32_t id);

#endif
