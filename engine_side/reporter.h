/* reporter.h: an engine node's reports (pulling / ready / failed) delivered
 * to the control endpoint from a thread of their own, in order, so that a
 * pull never waits for the endpoint: a node that verified a version holds it
 * and serves it while the endpoint restarts; the report reaches it when it is
 * back. A report refused because the endpoint forgot the node (404: it lost
 * its state) re-registers the node first. Between reports the thread
 * registers the node again every 10 s (WSYNC_HEARTBEAT_MS; 0: never), saying
 * what it holds: a heartbeat, so the endpoint can tell a node gone; a clean
 * stop reports "exited". */
#ifndef WSYNC_ENGINE_REPORTER_H
#define WSYNC_ENGINE_REPORTER_H

#include <jansson.h>
#include <stdint.h>

#include "common/proto/engine_report.h"
#include "common/wsync.h"

typedef struct recv_reporter recv_reporter_t;

/* Starts the thread (its own control client). Strings and `endpoint` (the
 * node's registration endpoint, or NULL) are copied. */
wsync_status_t reporter_start(const char *url, const char *token, const char *engine_id, const char *host,
                              int local_ranks, const json_t *endpoint, recv_reporter_t **out);
/* Queues a report and returns at once; at most REPORTER_QUEUE wait, the
 * oldest is dropped past that. Thread-safe. */
void reporter_post(recv_reporter_t *rp, uint64_t version, const char *state, double duration_s, uint64_t bytes,
                   const char *error);
/* The same, saying what the node holds after it (`holds`, -1: unchanged;
 * a failed pull in place holds nothing: 0), so status never shows a version
 * the node lost. */
void reporter_post_held(recv_reporter_t *rp, uint64_t version, const char *state, double duration_s,
                        uint64_t bytes, const char *error, int64_t holds);
/* A ready report that says what came as deltas (NULL or no pieces: none). */
void reporter_post_ready(recv_reporter_t *rp, uint64_t version, double duration_s, uint64_t bytes,
                         const wsync_report_delta_t *delta);
/* What the node says of its local ranks ("local rank 1 is not running", ""
 * when all run again): shown with the node in status. Sent only when it
 * changes; NULL rp is fine. */
void reporter_note_node(recv_reporter_t *rp, const char *note);
/* Delivers what is queued for up to `flush_ms`, then stops; NULL is fine. */
void reporter_stop(recv_reporter_t *rp, int flush_ms);

#endif
