/* progress.h: where a receiver's pull stands (phase, bytes, since when).
 * The pull calls these at phase changes and, from the landing loop, with
 * the bytes verified so far; any thread reads it (wsync_receiver_progress).
 * On local rank 0 a thread of its own sends it to the control endpoint once
 * a second while a phase lasts over a second (the data path never waits on
 * HTTP). */
#ifndef WSYNC_ENGINE_PROGRESS_H
#define WSYNC_ENGINE_PROGRESS_H

#include <stdint.h>

#include "common/wsync.h"

typedef struct wsync_receiver wsync_receiver_t;
typedef struct recv_progress recv_progress_t;

typedef enum recv_phase {
    RECV_PHASE_IDLE,
    RECV_PHASE_SETUP,
    RECV_PHASE_LANDING,
} recv_phase_t;

/* `report`: send progress to the control endpoint at `control_url`. Never
 * fails the receiver: without memory or a client it only stops reporting. */
recv_progress_t *recv_progress_open(const char *control_url, const char *token, const char *engine_id, int report);
void recv_progress_close(recv_progress_t *p);

/* Enter `phase` for `version` (bytes done start at 0 of `total`). */
void recv_progress_phase(recv_progress_t *p, recv_phase_t phase, uint64_t version, uint64_t total);
/* Bytes verified so far in the landing phase. Cheap; call it often. */
void recv_progress_bytes(recv_progress_t *p, uint64_t done);
/* The set-up took `secs` (kept for wsync_receiver_progress). */
void recv_progress_setup_took(recv_progress_t *p, double secs);

#endif
