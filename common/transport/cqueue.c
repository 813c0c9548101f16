/* cqueue.c: growable ring of completions under a mutex and condition. */
#include "common/transport/cqueue.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/util.h"

void wsync_cqueue_init(wsync_cqueue_t *q)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
}

void wsync_cqueue_destroy(wsync_cqueue_t *q)
{
    free(q->items);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
}

void wsync_cqueue_push(wsync_cqueue_t *q, const wsync_completion_t *c)
{
    pthread_mutex_lock(&q->lock);
    if (q->count == q->cap) {
        size_t ncap = q->cap ? q->cap * 2 : 256, i;
        wsync_completion_t *n = malloc(ncap * sizeof(*n));
        if (n == NULL) {
            pthread_mutex_unlock(&q->lock);
            return; /* out of memory: the caller's deadline reports it */
        }
        for (i = 0; i < q->count; i++)
            n[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = n;
        q->cap = ncap;
        q->head = 0;
    }
    q->items[(q->head + q->count) % q->cap] = *c;
    q->count++;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

void wsync_cqueue_push_error(wsync_cqueue_t *q, uint64_t tag, int peer, wsync_status_t st, const char *fmt, ...)
{
    wsync_completion_t c = {.kind = WSYNC_COMPLETION_ERROR, .status = st, .tag = tag, .peer = peer};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c.message, sizeof(c.message), fmt, ap);
    va_end(ap);
    wsync_cqueue_push(q, &c);
}

int wsync_cqueue_pop(wsync_cqueue_t *q, wsync_completion_t *out, int max, int timeout_ms)
{
    int n = 0;
    pthread_mutex_lock(&q->lock);
    if (q->count == 0 && timeout_ms > 0) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, timeout_ms);
        while (q->count == 0)
            if (pthread_cond_timedwait(&q->cond, &q->lock, &ts) != 0)
                break;
    }
    while (n < max && q->count > 0) {
        out[n++] = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return n;
}
