/* preauth.c: caps on pending (not yet proved) connections, with eviction of
 * the silent ones, and the log limiter (preauth.h). */
#include "common/net/preauth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/base/checks.h"

wsync_status_t wsync_preauth_init(wsync_preauth_t *pa, int max_total, int max_per_peer, int evict_ms)
{
    memset(pa, 0, sizeof(*pa));
    if (max_total < 1 || max_per_peer < 1)
        return wsync_error(WSYNC_ERR_INVALID, "pre-auth caps must be at least 1 (total %d, per peer %d)",
                           max_total, max_per_peer);
    pa->e = calloc((size_t)max_total, sizeof(*pa->e));
    WSYNC_CHECK_ALLOC(pa->e);
    pa->max_total = max_total;
    pa->max_per_peer = max_per_peer;
    pa->evict_ns = (uint64_t)evict_ms * 1000000ULL;
    pthread_mutex_init(&pa->lock, NULL);
    return WSYNC_OK;
}

void wsync_preauth_destroy(wsync_preauth_t *pa)
{
    if (pa == NULL || pa->e == NULL)
        return;
    pthread_mutex_destroy(&pa->lock);
    free(pa->e);
    pa->e = NULL;
}

static void release(wsync_preauth_entry_t *e)
{
    e->used = 0;
    e->fd = -1;
    e->gen++;
}

/* The oldest pending entry (of `peer`, or of all when NULL), if it has
 * waited evict_ns; -1 if none may go. */
static int evictable(const wsync_preauth_t *pa, const char *peer, uint64_t now)
{
    int i, oldest = -1;
    for (i = 0; i < pa->max_total; i++) {
        const wsync_preauth_entry_t *e = &pa->e[i];
        if (!e->used || (peer && strcmp(e->peer, peer) != 0))
            continue;
        if (oldest < 0 || e->since < pa->e[oldest].since)
            oldest = i;
    }
    if (oldest < 0 || now < pa->e[oldest].since + pa->evict_ns)
        return -1;
    return oldest;
}

int wsync_preauth_enter(wsync_preauth_t *pa, const char *peer, int fd, uint64_t now_ns,
                        wsync_preauth_ticket_t *ticket)
{
    int i, mine = 0, total = 0, slot = -1, victim = -1;
    pthread_mutex_lock(&pa->lock);
    for (i = 0; i < pa->max_total; i++) {
        if (!pa->e[i].used) {
            if (slot < 0)
                slot = i;
            continue;
        }
        total++;
        mine += strcmp(pa->e[i].peer, peer) == 0;
    }
    if (mine >= pa->max_per_peer)
        victim = evictable(pa, peer, now_ns);
    else if (total >= pa->max_total)
        victim = evictable(pa, NULL, now_ns);
    if ((mine >= pa->max_per_peer || total >= pa->max_total) && victim < 0) {
        pa->refused++;
        pthread_mutex_unlock(&pa->lock);
        return 0;
    }
    if (victim >= 0) {
        /* Its thread is in a blocking read on it: shut down, the read ends,
         * the thread leaves and closes it. */
        shutdown(pa->e[victim].fd, SHUT_RDWR);
        release(&pa->e[victim]);
        pa->evicted++;
        slot = victim;
    }
    snprintf(pa->e[slot].peer, sizeof(pa->e[slot].peer), "%s", peer);
    pa->e[slot].fd = fd;
    pa->e[slot].since = now_ns;
    pa->e[slot].used = 1;
    *ticket = (uint64_t)pa->e[slot].gen << 32 | (uint32_t)slot;
    pthread_mutex_unlock(&pa->lock);
    return 1;
}

void wsync_preauth_leave(wsync_preauth_t *pa, wsync_preauth_ticket_t ticket)
{
    uint32_t slot = (uint32_t)ticket, gen = (uint32_t)(ticket >> 32);
    pthread_mutex_lock(&pa->lock);
    if (slot < (uint32_t)pa->max_total && pa->e[slot].used && pa->e[slot].gen == gen)
        release(&pa->e[slot]);
    pthread_mutex_unlock(&pa->lock);
}

int wsync_preauth_pending(wsync_preauth_t *pa)
{
    int i, n = 0;
    pthread_mutex_lock(&pa->lock);
    for (i = 0; i < pa->max_total; i++)
        n += pa->e[i].used;
    pthread_mutex_unlock(&pa->lock);
    return n;
}

void wsync_preauth_peer_of(int fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    snprintf(out, len, "unknown peer");
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)len);
    } else if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)len);
    } else if (ss.ss_family == AF_UNIX) {
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
            snprintf(out, len, "uid %u", (unsigned)cred.uid);
    }
}

void wsync_loglimit_init(wsync_loglimit_t *l, int interval_ms, int burst)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->lock, NULL);
    l->interval_ns = (uint64_t)interval_ms * 1000000ULL;
    l->burst = burst > 0 ? burst : 1;
}

void wsync_loglimit_destroy(wsync_loglimit_t *l)
{
    pthread_mutex_destroy(&l->lock);
}

int wsync_loglimit_take(wsync_loglimit_t *l, uint64_t now_ns, uint64_t *held_back)
{
    int ok;
    pthread_mutex_lock(&l->lock);
    if (!l->any || now_ns >= l->window_start + l->interval_ns) {
        l->window_start = now_ns;
        l->in_window = 0;
        l->any = 1;
    }
    ok = l->in_window < l->burst;
    if (ok) {
        l->in_window++;
        *held_back = l->held_back;
        l->held_back = 0;
    } else {
        l->held_back++;
    }
    pthread_mutex_unlock(&l->lock);
    return ok;
}
