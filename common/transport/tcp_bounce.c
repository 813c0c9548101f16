/* tcp_bounce.c: double-buffered receive for GPU regions. The reader thread
 * recv()s slice k+1 while the copier thread copies slice k to the device, so
 * the network and the copy overlap instead of taking turns. */
#include "common/transport/tcp_bounce.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/base/checks.h"
#include "common/net/sock.h"

typedef struct slot {
    char *buf;
    char *dst; /* where the copier puts it */
    size_t n;  /* bytes in buf; 0 = empty */
} slot_t;

struct tcp_bounce {
    pthread_t th;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    slot_t slot[2];
    size_t slice;
    const wsync_mem_ops_t *ops;
    int next_copy; /* the copier takes slots in order */
    int failed;    /* a copy failed: the put is lost */
    int stop;
};

static void *copier_main(void *arg)
{
    tcp_bounce_t *b = arg;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        slot_t *s = &b->slot[b->next_copy];
        wsync_status_t st;
        while (s->n == 0 && !b->stop)
            pthread_cond_wait(&b->cond, &b->lock);
        if (b->stop)
            break;
        pthread_mutex_unlock(&b->lock);
        st = b->ops->copy(s->dst, s->buf, s->n);
        if (st != WSYNC_OK)
            LOG_ERROR("tcp: copying %zu received bytes into %s memory failed: %s", s->n, b->ops->name,
                      wsync_last_error());
        pthread_mutex_lock(&b->lock);
        if (st != WSYNC_OK)
            b->failed = 1;
        s->n = 0;
        b->next_copy ^= 1;
        pthread_cond_broadcast(&b->cond);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

static tcp_bounce_t *bounce_new(size_t slice, const wsync_mem_ops_t *ops)
{
    tcp_bounce_t *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->slice = slice;
    b->ops = ops;
    b->slot[0].buf = malloc(slice);
    b->slot[1].buf = malloc(slice);
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    if (b->slot[0].buf == NULL || b->slot[1].buf == NULL || pthread_create(&b->th, NULL, copier_main, b) != 0) {
        free(b->slot[0].buf);
        free(b->slot[1].buf);
        pthread_mutex_destroy(&b->lock);
        pthread_cond_destroy(&b->cond);
        free(b);
        return NULL;
    }
    return b;
}

void tcp_bounce_free(tcp_bounce_t *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->lock);
    b->stop = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->th, NULL);
    free(b->slot[0].buf);
    free(b->slot[1].buf);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    free(b);
}

int tcp_bounce_recv(tcp_bounce_t **bp, size_t slice, int fd, const wsync_mem_ops_t *ops, char *dst, uint64_t len)
{
    tcp_bounce_t *b = *bp;
    int k = 0, rc = 0;
    if (b == NULL && (b = *bp = bounce_new(slice, ops)) == NULL) {
        LOG_ERROR("tcp: cannot allocate 2 x %zu bytes of bounce buffers", slice);
        return -1;
    }
    b->ops = ops; /* fixed for the whole put: the copier is idle between puts */
    /* Slots are filled and copied in the same order (0,1,0,1...), so the
     * copier's next_copy and our k stay in step across puts. */
    pthread_mutex_lock(&b->lock);
    b->failed = 0;
    k = b->next_copy;
    pthread_mutex_unlock(&b->lock);
    while (len > 0 && rc == 0) {
        slot_t *s = &b->slot[k];
        size_t n = len < b->slice ? (size_t)len : b->slice;
        pthread_mutex_lock(&b->lock);
        while (s->n != 0)
            pthread_cond_wait(&b->cond, &b->lock);
        rc = b->failed ? -1 : 0;
        pthread_mutex_unlock(&b->lock);
        if (rc != 0 || wsync_recv_all(fd, s->buf, n, 0) != 0) {
            rc = -1;
            break;
        }
        pthread_mutex_lock(&b->lock);
        s->dst = dst;
        s->n = n;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
        dst += n;
        len -= n;
        k ^= 1;
    }
    /* LANDED means on the device: wait until both slots are drained. */
    pthread_mutex_lock(&b->lock);
    while (b->slot[0].n != 0 || b->slot[1].n != 0)
        pthread_cond_wait(&b->cond, &b->lock);
    if (b->failed)
        rc = -1;
    pthread_mutex_unlock(&b->lock);
    return rc;
}
