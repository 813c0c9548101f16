/* running.h: the attempt a receiver is running (recv_running_t): the last
 * attempt this rank joined (a rank > 0 waits for a newer one), its phase
 * and bytes, the caller's destination tensors for it (set only during its
 * fetch: the fetches and recv_tlayout_verify write through and digest them
 * in place), local rank 0's record that the long poll's answer carried
 * (for next_record's "version"), taken by the attempt's fetch_record
 * instead of a GET, and every rank's trainer endpoints of the record the
 * attempt uses (NULL: a record from an endpoint without them), so where to
 * pull from costs no GET /v1/trainers per version. Owned by the receiver
 * (r->run): set by attempt.c and attempt_open.c, read by the fetch; the
 * records are owned and go at destroy. */
#ifndef WSYNC_ENGINE_RUNNING_H
#define WSYNC_ENGINE_RUNNING_H

#include <jansson.h>
#include <stdint.h>

#include "engine_side/dests.h"
#include "engine_side/progress.h"

typedef struct recv_running {
    uint64_t gen; /* the last attempt this rank joined */
    recv_progress_t *progress;
    const recv_dests_t *dm;
    json_t *next_record;
    json_t *trainers;
} recv_running_t;

#endif
