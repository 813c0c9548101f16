/* heartbeat.h: a trainer rank's registration sent again every 10 s
 * (WSYNC_HEARTBEAT_MS; 0: never) from a thread of its own, so the control
 * endpoint can show a rank that died as gone, with when it was last seen. */
#ifndef WSYNC_TRAINER_HEARTBEAT_H
#define WSYNC_TRAINER_HEARTBEAT_H

#include <jansson.h>

#include "common/wsync.h"

typedef struct pub_heartbeat pub_heartbeat_t;

/* POSTs `body` (copied) to `path` every period; failures are retried at the
 * next beat, silently (the publisher's own calls say when the endpoint is
 * away). *out NULL when heartbeats are off. */
wsync_status_t pub_heartbeat_start(const char *url, const char *token, const char *path, const json_t *body,
                                   pub_heartbeat_t **out);
/* Stops at once (a beat in flight ends within its 2 s); NULL is fine. */
void pub_heartbeat_stop(pub_heartbeat_t *hb);

#endif
