/* late_digests.c: waiting for a version's late digests (late_digests.h). */
#include "engine_side/late_digests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/control/client.h"
#include "common/base/util.h"

#define LATE_POLL_MS 250 /* one long poll at most: the attempt's end waits for it */

static void set_missing(recv_late_t *l, const wsync_version_record_t *rec)
{
    char text[sizeof(l->missing)] = "";
    unsigned char seen[256] = {0};
    size_t i, n = 0;
    for (i = 0; i < rec->npieces; i++) {
        int rank = rec->pieces[i].rank;
        if (rec->pieces[i].digest[0] || rank > 255 || seen[rank]++)
            continue;
        if (n < sizeof(text))
            n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%lld", n ? ", " : "trainer rank ", (long long)rank);
    }
    pthread_mutex_lock(&l->lock);
    snprintf(l->missing, sizeof(l->missing), "%s", text);
    pthread_mutex_unlock(&l->lock);
}

static void fail(recv_late_t *l, wsync_status_t st, const char *msg)
{
    l->st = st;
    snprintf(l->error, sizeof(l->error), "version %llu's late digests: %s", (unsigned long long)l->v, msg);
    __atomic_store_n(&l->state, -1, __ATOMIC_RELEASE);
}

static void *late_main(void *arg)
{
    recv_late_t *l = arg;
    wsync_control_t *c = NULL;
    wsync_status_t st = wsync_control_open(l->url, l->token, &c);
    if (st != WSYNC_OK) {
        fail(l, st, wsync_last_error());
        return NULL;
    }
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        uint64_t now = wsync_now_ns(), *d = NULL;
        int left = now >= l->deadline ? 0 : (int)((l->deadline - now) / 1000000ULL);
        int t = left < LATE_POLL_MS ? left : LATE_POLL_MS;
        size_t missing = 0;
        json_t *j = NULL;
        wsync_version_record_t rec = {0};
        if (left == 0)
            break; /* the attempt's own timeout names who it waited for */
        st = wsync_control_wait_digests(c, l->v, t, &j);
        if (st == WSYNC_OK)
            st = wsync_version_record_from_json(j, &rec);
        json_decref(j);
        if (st == WSYNC_OK)
            st = wsync_sync_layout_digests(l->sl, &rec, &d, &missing);
        if (st != WSYNC_OK) {
            wsync_version_record_clear(&rec);
            fail(l, st, wsync_last_error());
            break;
        }
        if (missing == 0) {
            wsync_version_record_clear(&rec);
            l->digests = d;
            __atomic_store_n(&l->state, 1, __ATOMIC_RELEASE);
            break;
        }
        free(d);
        set_missing(l, &rec);
        wsync_version_record_clear(&rec);
        /* An endpoint that answered at once without them (one from before
         * ?digests=1 answers the record as it is): do not spin on it. */
        if (wsync_now_ns() - now < (uint64_t)t * 500000ULL)
            usleep(1000);
    }
    wsync_control_close(c);
    return NULL;
}

wsync_status_t recv_late_start(recv_late_t *l, const char *url, const char *token, const wsync_sync_layout_t *sl,
                               uint64_t v, uint64_t deadline)
{
    memset(l, 0, sizeof(*l));
    l->sl = sl;
    l->v = v;
    l->deadline = deadline;
    l->url = strdup(url);
    l->token = token ? strdup(token) : NULL;
    pthread_mutex_init(&l->lock, NULL);
    if (l->url == NULL || (token && l->token == NULL) || pthread_create(&l->th, NULL, late_main, l) != 0) {
        recv_late_end(l);
        return wsync_error(WSYNC_ERR_NOMEM, "cannot start waiting for version %llu's late digests",
                           (unsigned long long)v);
    }
    l->started = 1;
    return WSYNC_OK;
}

wsync_status_t recv_late_poll(recv_late_t *l, const uint64_t **digests, int *in)
{
    int state = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
    *in = state == 1;
    if (state == 1)
        *digests = l->digests;
    if (state < 0)
        return wsync_error(l->st, "%s", l->error);
    return WSYNC_OK;
}

void recv_late_missing(recv_late_t *l, char *out, size_t len)
{
    pthread_mutex_lock(&l->lock);
    snprintf(out, len, "%s", l->missing[0] ? l->missing : "its trainer ranks");
    pthread_mutex_unlock(&l->lock);
}

void recv_late_end(recv_late_t *l)
{
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    if (l->started)
        pthread_join(l->th, NULL);
    l->started = 0;
    pthread_mutex_destroy(&l->lock);
    free(l->digests);
    free(l->url);
    free(l->token);
    l->digests = NULL;
    l->url = l->token = NULL;
}
