/* late_digests.h: an attempt on a version announced before its digests
 * (late digests, docs/API.md): a thread long-polls the control endpoint
 * (GET /v1/versions/<v>?digests=1, over a client of its own) until every
 * piece of the record has its digest, while the attempt lands and sums
 * what landed; the attempt compares those sums once the digests are here
 * and makes nothing ready before. */
#ifndef WSYNC_ENGINE_LATE_DIGESTS_H
#define WSYNC_ENGINE_LATE_DIGESTS_H

#include <pthread.h>
#include <stdint.h>

#include "common/control/sync_layout.h"

typedef struct recv_late {
    pthread_t th;
    int started;
    char *url, *token;
    const wsync_sync_layout_t *sl;
    uint64_t v, deadline;
    int stop;          /* atomic: the attempt is over */
    int state;         /* atomic: 0 waiting, 1 the digests are in, -1 failed */
    uint64_t *digests; /* state 1: by piece id */
    wsync_status_t st; /* state -1 */
    char error[400];   /* state -1 */
    pthread_mutex_t lock;
    char missing[160]; /* trainer ranks whose digests the last answer still lacked */
} recv_late_t;

/* Start waiting for version v's digests (plan of sl) until `deadline`. */
wsync_status_t recv_late_start(recv_late_t *l, const char *url, const char *token, const wsync_sync_layout_t *sl,
                               uint64_t v, uint64_t deadline);
/* 1 with *digests (owned by l) once they are in, 0 while not yet; a failure
 * (the version no longer retained, the endpoint gone) as its error. */
wsync_status_t recv_late_poll(recv_late_t *l, const uint64_t **digests, int *in);
/* "trainer rank 1, 3" whose digests were still missing (for a timeout). */
void recv_late_missing(recv_late_t *l, char *out, size_t len);
/* Stop the thread, free everything. */
void recv_late_end(recv_late_t *l);

#endif
