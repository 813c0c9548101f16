/* engine_report.h: what an engine node tells the control endpoint about its
 * pulls (POST /v1/engines/<id>/report): a pull started, ready or failed, a
 * progress note while pulling, a note on its local ranks, or its clean stop.
 * Built by engine_side/reporter.c and common/control/client.c, parsed by the
 * control model (common/control/model.c); the parser names the field that is
 * wrong and the range it must be in. */
#ifndef WSYNC_COMMON_ENGINE_REPORT_H
#define WSYNC_COMMON_ENGINE_REPORT_H

#include <jansson.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_REPORT_MAX_VERSION 9007199254740991LL /* 2^53 - 1 */
#define WSYNC_REPORT_MAX_BYTES (1LL << 62)
#define WSYNC_REPORT_MAX_DURATION_S 1e7 /* ~115 days */

typedef enum wsync_report_state {
    WSYNC_REPORT_PULLING = 0,
    WSYNC_REPORT_READY,
    WSYNC_REPORT_FAILED,
    WSYNC_REPORT_EXITED,
} wsync_report_state_t;

typedef enum wsync_report_phase {
    WSYNC_PHASE_NONE = 0, /* not a progress note */
    WSYNC_PHASE_SETUP,
    WSYNC_PHASE_LANDING,
} wsync_report_phase_t;

/* What a ready pull moved as deltas (docs/DELTA.md), summed over the
 * node's local ranks. */
typedef struct wsync_report_delta {
    uint64_t pieces;      /* applied as delta wires */
    uint64_t wire_bytes;  /* the bytes of their wires */
    uint64_t piece_bytes; /* the bytes of those pieces: saved = piece_bytes - wire_bytes */
    uint64_t refetched;   /* pieces that failed their check and came again in full */
} wsync_report_delta_t;

typedef struct wsync_engine_report {
    uint64_t version; /* 0 .. 2^53-1: the version pulled (or held, for a note) */
    wsync_report_state_t state;
    double duration_s; /* 0 .. 1e7: how long the pull took */
    uint64_t bytes;    /* bytes pulled (ready), or landed so far (progress note) */
    /* A progress note (phase != NONE): state pulling; bytes of total. */
    wsync_report_phase_t phase;
    uint64_t total;
    int64_t holds; /* what the node holds after this report; -1: not said */
    int has_error; /* failed: why (the text is cut at 511 bytes) */
    char error[512];
    int has_node; /* a note on the node's local ranks ("" when all run again) */
    char node[513];
    int has_delta; /* ready: what came as deltas ("delta": {pieces, wire_bytes, piece_bytes, refetched}) */
    wsync_report_delta_t delta;
} wsync_engine_report_t;

/* "pulling", "ready", "failed", "exited"; "setup", "landing" ("" for NONE). */
const char *wsync_report_state_name(wsync_report_state_t s);
const char *wsync_report_phase_name(wsync_report_phase_t p);

/* The report as JSON (new reference), or NULL without memory: version,
 * state, then what the report has (duration_s and bytes for pull reports,
 * phase/bytes/total for notes, error, holds, node). */
json_t *wsync_engine_report_to_json(const wsync_engine_report_t *r);
/* Parses and checks `j`: WSYNC_ERR_FORMAT with a message naming the field
 * and what it must be. */
wsync_status_t wsync_engine_report_from_json(const json_t *j, wsync_engine_report_t *out);

#endif
