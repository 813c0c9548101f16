/* fetch_late.c: a whole-image attempt whose version was announced before
 * its digests (late_digests.h): the thread that waits for them, the sums
 * of the chunks that come first kept until they are in, then compared, and
 * what a timeout says when they never came. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "engine_side/fetch_internal.h"

/* Late digests: the thread that waits for them, and room for the sums of
 * the chunks that come first. */
wsync_status_t fetch_late_begin(fetch_t *f)
{
    const wsync_plan_t *plan = f->plan;
    f->late = calloc(1, sizeof(*f->late));
    f->late_sum = calloc(plan->npieces + 1, sizeof(*f->late_sum));
    f->waiting = calloc(plan->nchunks + 1, sizeof(*f->waiting));
    f->wlanded = calloc(plan->nchunks + 1, 1);
    if (!f->late || !f->late_sum || !f->waiting || !f->wlanded) {
        free(f->late);
        f->late = NULL;
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    if (recv_late_start(f->late, f->p.r->control_url, f->p.r->token, f->p.sl, f->p.v, f->p.deadline) != WSYNC_OK) {
        free(f->late);
        f->late = NULL;
        return WSYNC_ERR_NOMEM;
    }
    wsync_trace("engine %s rank %d: version %llu was announced before its digests: landing while they come",
                f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v);
    return WSYNC_OK;
}

/* Late digests: once they are in, every chunk waiting for them compared. */
wsync_status_t fetch_late_poll(fetch_t *f, int *progressed)
{
    const uint64_t *d = NULL;
    uint32_t k, n = f->nwaiting;
    int in = 0;
    if (f->late == NULL || f->digests)
        return WSYNC_OK;
    WSYNC_CHECK(recv_late_poll(f->late, &d, &in));
    if (!in)
        return WSYNC_OK;
    f->digests = d;
    wsync_trace("engine %s rank %d: late digests of version %llu in, %u chunks waited for them", f->p.r->engine_id,
                f->p.me, (unsigned long long)f->p.v, n);
    f->nwaiting = 0;
    for (k = 0; k < n; k++) {
        uint32_t c = f->waiting[k];
        WSYNC_CHECK(fetch_chunk_summed(f, c, f->wlanded[c], f->late_sum + f->plan->chunk_first[c]));
    }
    *progressed = 1;
    return WSYNC_OK;
}

/* Late digests that never came: whose, and how many chunks waited for them. */
void fetch_late_waiting(const recv_pull_t *p, char *out, size_t len)
{
    const fetch_t *f = container_of(p, fetch_t, p);
    char who[160];
    if (f->late == NULL || f->digests != NULL)
        return;
    recv_late_missing(f->late, who, sizeof(who));
    snprintf(out, len,
             "; %u chunks summed and waiting for the late digests of %s, which never came (announced before its "
             "digests: it stopped or failed after announcing?)",
             f->nwaiting, who);
}

void fetch_late_end(fetch_t *f)
{
    if (f->late) {
        recv_late_end(f->late); /* frees the digests f->digests may point to */
        free(f->late);
    }
    free(f->late_sum);
    free(f->waiting);
    free(f->wlanded);
}
