/* control_client.h: the libcurl client of the control endpoint, used by the
 * publisher, the receiver and the command line. One object per thread: an
 * object is not thread-safe (it owns one curl handle). Every call has a
 * timeout; an unreachable endpoint gives WSYNC_ERR_HTTP naming the URL, a
 * refusal gives the server's message (409, 403 -> WSYNC_ERR_CONFLICT, 401 ->
 * WSYNC_ERR_AUTH, 404 -> WSYNC_ERR_NOT_FOUND). JSON arguments are borrowed;
 * JSON results are new references the caller releases.
 *
 * Riding through restarts: every call below (not wsync_control_request) that
 * gets no answer, or a 429/502/503/504, is retried with capped exponential backoff
 * (100 ms doubling to 2 s, jittered 50-150%) until the grace period passed
 * (default 60 s, env WSYNC_CONTROL_GRACE_MS, or wsync_control_set_grace); then
 * it fails naming the endpoint, the route and how long it tried. So a call
 * may block for the grace period. The routes are idempotent on the endpoint's
 * side, so a retry of a request whose answer was lost does no harm. */
#ifndef WSYNC_COMMON_CONTROL_CLIENT_H
#define WSYNC_COMMON_CONTROL_CLIENT_H

#include <jansson.h>
#include <stdint.h>

#include "common/wsync.h"

typedef struct wsync_control wsync_control_t;

/* token NULL: env WSYNC_TOKEN, if set. */
wsync_status_t wsync_control_open(const char *url, const char *token, wsync_control_t **out);
void wsync_control_close(wsync_control_t *c);

/* The grace period: setting control_grace_ms (WSYNC_CONTROL_GRACE_MS; 0 = no
 * retries), default 60 s. Read at open. */
long wsync_control_default_grace_ms(void);
void wsync_control_set_grace(wsync_control_t *c, long grace_ms);
long wsync_control_grace_ms(const wsync_control_t *c);

/* Interrupting (issue 26.2): once `flag` (an int the owner sets with an
 * atomic store, e.g. a receiver's cancel) or the process-wide
 * wsync_interrupt() is set, retries stop (the call fails
 * WSYNC_ERR_CANCELLED after the attempt in flight) and a long poll in
 * flight is aborted within ~20 ms. A single request still goes out once, so
 * the last reports of an object being destroyed are sent. NULL: only the
 * process-wide flag. */
void wsync_control_set_cancel(wsync_control_t *c, const int *flag);

/* Any request, once: `body` may be NULL; *http gets the status; *resp (resp may
 * be NULL) the parsed JSON body if any (NULL for an empty or non-JSON body). Errors only for transport
 * failures (no answer); HTTP errors come back in *http. */
wsync_status_t wsync_control_request(wsync_control_t *c, const char *method, const char *path, const json_t *body,
                                     long timeout_ms, long *http, json_t **resp);
/* The same, retried as above while there is no answer (or 429/502/503/504). */
wsync_status_t wsync_control_request_retry(wsync_control_t *c, const char *method, const char *path,
                                           const json_t *body, long timeout_ms, long *http, json_t **resp);

wsync_status_t wsync_control_register_trainer(wsync_control_t *c, int rank, int world, const char *host,
                                              const json_t *endpoint);
wsync_status_t wsync_control_trainers(wsync_control_t *c, json_t **out);
wsync_status_t wsync_control_register_engine(wsync_control_t *c, const char *engine_id, const char *host,
                                             int local_ranks, const json_t *endpoint);
wsync_status_t wsync_control_publish(wsync_control_t *c, int rank, int world, uint64_t version,
                                     const json_t *layout, const json_t *pieces);
/* POST /v1/layouts/<digest> {"manifest": manifest}: registers the manifest
 * under its digest (idempotent: a known one is no error). Once per layout,
 * before the first publish that names it (trainer rank 0 does). */
wsync_status_t wsync_control_put_layout(wsync_control_t *c, const char *digest, const json_t *manifest);
/* GET /v1/layouts/<digest>: *manifest the manifest JSON (new reference);
 * WSYNC_ERR_NOT_FOUND when the endpoint does not hold it. */
wsync_status_t wsync_control_get_layout(wsync_control_t *c, const char *digest, json_t **manifest);
/* Long poll: *version > after, or 0 when timeout_ms passed first (also when
 * the endpoint was away until then: the caller's wait bounds the retries). */
wsync_status_t wsync_control_wait_version(wsync_control_t *c, uint64_t after, int timeout_ms, uint64_t *version);
/* The same, with the answer carrying the version's record (?record=1): *record
 * is what wsync_control_get_version would return for *version (new
 * reference), or NULL when the endpoint did not send it (one from before
 * this, or the version no longer retained): fetch it then. Saves the engine
 * a round trip per version. */
wsync_status_t wsync_control_wait_version_record(wsync_control_t *c, uint64_t after, int timeout_ms,
                                                 uint64_t *version, json_t **record);
/* The newest published version now (0: none yet), without waiting for a
 * newer one. Unlike wait_version with timeout 0, an endpoint that does not
 * answer is ridden through for the grace period, so a trainer started while
 * the endpoint restarts learns the real number instead of starting from 1. */
wsync_status_t wsync_control_latest_version(wsync_control_t *c, uint64_t *version);
wsync_status_t wsync_control_get_version(wsync_control_t *c, uint64_t version, json_t **out);
/* GET /v1/versions/<v>?digests=1: the record of `version` once every piece
 * has its digest (late digests: docs/API.md), or as it is when timeout_ms
 * passed first (its "digests_pending" then says how many are missing). */
wsync_status_t wsync_control_wait_digests(wsync_control_t *c, uint64_t version, int timeout_ms, json_t **out);
wsync_status_t wsync_control_report(wsync_control_t *c, const char *engine_id, uint64_t version, const char *state,
                                    double duration_s, uint64_t bytes, const char *error);
/* A progress note on the pull the engine reported "pulling": `phase`
 * ("setup" or "landing"), bytes `done` of `total`. It never changes the
 * engine's state (a late note after "ready" is ignored). */
wsync_status_t wsync_control_report_progress(wsync_control_t *c, const char *engine_id, uint64_t version,
                                             const char *phase, uint64_t done, uint64_t total);
wsync_status_t wsync_control_status(wsync_control_t *c, json_t **out);

#endif
