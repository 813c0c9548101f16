/* snapshot.c: one version's snapshot and digests. Each piece this rank sends
 * is copied from the caller's extent into the publish slot (unless
 * zero-copy) and then digested from the slot, piece by piece, so the pieces
 * can be shared among threads. With host memory several threads take them:
 * one core's memory bandwidth (about 10 GB/s) is what bounds a publish, and
 * a trainer host has cores to spare while it publishes. */
#include "trainer_side/publisher_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/checks.h"

#define SNAP_MAX_THREADS 8

typedef struct snap_job {
    wsync_publisher_t *p;
    pub_slot_t *s;
    uint64_t *sums;       /* per piece of mine, in my_pieces order */
    int copy;             /* copy each piece before digesting it */
    size_t next;          /* next piece to take (atomic) */
    pthread_mutex_t lock; /* guards st and why */
    wsync_status_t st;
    char why[512];
} snap_job_t;

static wsync_status_t snap_piece(snap_job_t *j, size_t i)
{
    wsync_publisher_t *p = j->p;
    const wsync_piece_t *pc = &p->sl->plan->pieces[p->my_pieces[i]];
    size_t k = p->piece_slot_off[pc->id];
    const pub_span_t *sp = &j->s->spans[k];
    char *dst = (char *)sp->ptr + (pc->offset - sp->offset);

    if (j->copy)
        WSYNC_CHECK(p->mem->copy(dst, (const char *)p->owned[k].ptr + (pc->offset - p->owned[k].offset), pc->len));
    return p->mem->digest_sum(dst, pc->len, pc->offset, &j->sums[i]);
}

static void *snap_worker(void *arg)
{
    snap_job_t *j = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        wsync_status_t st;
        if (i >= j->p->nmy)
            break;
        st = snap_piece(j, i);
        if (st != WSYNC_OK) {
            pthread_mutex_lock(&j->lock);
            if (j->st == WSYNC_OK) {
                j->st = st;
                snprintf(j->why, sizeof(j->why), "%s", wsync_last_error());
            }
            pthread_mutex_unlock(&j->lock);
            __atomic_store_n(&j->next, j->p->nmy, __ATOMIC_RELAXED);  /* the others stop too */
        }
    }
    return NULL;
}

int pub_snapshot_threads(int asked)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("WSYNC_PUBLISH_THREADS");
    if (asked <= 0 && env && *env)
        asked = atoi(env);
    if (asked > 0)
        return asked < SNAP_MAX_THREADS ? asked : SNAP_MAX_THREADS;
    return n < 1 ? 1 : n > SNAP_MAX_THREADS ? SNAP_MAX_THREADS : (int)n;
}

wsync_status_t pub_snapshot(wsync_publisher_t *p, pub_slot_t *s, uint64_t *sums)
{
    snap_job_t j = {.p = p, .s = s, .sums = sums, .st = WSYNC_OK};
    pthread_t tid[SNAP_MAX_THREADS];
    int host = p->mem == &wsync_mem_host, nt = host ? p->snap_threads : 1, started = 0, i;
    size_t k;

    /* Piece by piece when the pieces tile the extents (they do for every
     * plan wsync builds); otherwise whole extents first. GPU memory keeps
     * whole-extent device copies: one copy each instead of one per piece. */
    j.copy = !p->cfg.zero_copy && host && p->pieces_tile;
    if (!p->cfg.zero_copy && !j.copy)
        for (k = 0; k < p->nspans; k++)
            WSYNC_CHECK(p->mem->copy(s->spans[k].ptr, p->owned[k].ptr, p->owned[k].len));
    if ((size_t)nt > p->nmy)
        nt = (int)p->nmy;
    pthread_mutex_init(&j.lock, NULL);
    for (i = 1; i < nt; i++) {
        if (pthread_create(&tid[started], NULL, snap_worker, &j) != 0)
            break;   /* fewer helpers: the work still gets done below */
        started++;
    }
    snap_worker(&j);
    for (i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&j.lock);
    if (j.st != WSYNC_OK)
        return wsync_error(j.st, "%s", j.why);
    return WSYNC_OK;
}
