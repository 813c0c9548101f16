/* cqueue.h: a completion queue shared by a backend's threads and its poll(). */
#ifndef WSYNC_COMMON_CQUEUE_H
#define WSYNC_COMMON_CQUEUE_H

#include <pthread.h>

#include "common/transport/transport.h"

typedef struct wsync_cqueue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    wsync_completion_t *items;
    size_t head, count, cap;
} wsync_cqueue_t;

void wsync_cqueue_init(wsync_cqueue_t *q);
void wsync_cqueue_destroy(wsync_cqueue_t *q);
/* Thread-safe; never drops a completion (grows). */
void wsync_cqueue_push(wsync_cqueue_t *q, const wsync_completion_t *c);
/* Pushes an ERROR completion whose message is printf-formatted. */
void wsync_cqueue_push_error(wsync_cqueue_t *q, uint64_t tag, int peer, wsync_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Up to `max`, waiting up to timeout_ms (0: no wait) for the first. */
int wsync_cqueue_pop(wsync_cqueue_t *q, wsync_completion_t *out, int max, int timeout_ms);

#endif
