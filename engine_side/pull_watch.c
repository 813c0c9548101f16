/* pull_watch.c: an attempt's watch on any engine rank (pull.h), and what
 * its failures say: whatever the image (whole, targets) and wherever the
 * pieces come from (trainer ranks, a relay), a failed or timed-out pull
 * names what happened and whom it still waited for. */
#include <stdio.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/util.h"
#include "engine_side/pull.h"

/* Appends to out (n bytes used of len). */
#define APPEND(...) (n += (size_t)snprintf(out + n, n < len ? len - n : 0, __VA_ARGS__))

/* 1 if some unit of a chunk asked for here from trainer rank t has not landed. */
static int missing_from(const recv_pull_t *p, int t)
{
    uint32_t c;
    for (c = 0; c < p->nchunks; c++) {
        size_t first, k, n;
        if (p->remaining[c] == 0 || !recv_pull_is_mine(p, c))
            continue;
        n = p->ops->chunk_units(p, c, &first);
        for (k = first; k < first + n; k++)
            if (p->ops->unit_src(p, k) == t)
                return 1;
    }
    return 0;
}

void recv_pull_waiting_for(const recv_pull_t *p, char *out, size_t len)
{
    uint8_t seen[BOARD_MAX_RANKS] = {0};
    size_t n = 0;
    uint32_t k;
    int t, first = 1;
    out[0] = '\0';
    for (t = 0; p->remaining && t < p->world; t++)
        if (missing_from(p, t)) {
            if (first)
                APPEND("; %s missing from trainer rank %d", p->ops->unit, t);
            else
                APPEND(", %d", t);
            first = 0;
        }
    first = 1;
    for (k = 0; p->land && k < p->npending; k++) {
        int lr = p->ops->land_rank(p, p->pending[k]);
        if (lr < BOARD_MAX_RANKS && !seen[lr]++) {
            APPEND("%s%d", first ? "; still waiting for chunks landing on local rank " : ", ", lr);
            first = 0;
        }
    }
    if (!first)
        APPEND(" (stalled or stopped?)");
    if (p->relay.on)
        APPEND("; %s come from the relay of engine %.128s at %.160s", p->ops->unit, p->relay.id, p->relay.addr);
    if (p->ops->waiting_more && n < len)
        p->ops->waiting_more(p, out + n, len - n);
    n = strlen(out);
    first = 1;
    for (t = 0; p->reqs && t < p->world; t++)
        if (p->reqs[t].started && !recv_request_done(&p->reqs[t])) {
            APPEND("%s%d", first ? "; no answer yet from trainer rank " : ", ", t);
            first = 0;
        }
}

wsync_status_t recv_pull_fail(const recv_pull_t *p, wsync_status_t st, const char *what)
{
    char why[600];
    recv_pull_waiting_for(p, why, sizeof(why));
    return wsync_error(st, "%s; version %llu: %u of %u chunks in on engine %s rank %d%s", what,
                       (unsigned long long)p->v, p->ndone, p->nwant, p->r->engine_id, p->me, why);
}

wsync_status_t recv_pull_watch(recv_pull_t *p)
{
    char who[300];
    int t;
    WSYNC_CHECK(recv_pull_relay_watch(p));
    for (t = 0; t < p->world; t++)
        if (recv_request_failed(&p->reqs[t])) /* a peer gone: the attempt cannot finish */
            return recv_pull_fail(p, p->reqs[t].status, p->reqs[t].error);
    if (wsync_now_ns() - p->last_check <= 50000000ULL)
        return WSYNC_OK;
    p->last_check = wsync_now_ns();
    recv_progress_bytes(p->r->run.progress, p->ops->bytes_in(p));
    WSYNC_CHECK(recv_check_peers(p->r, p->gen));
    if (p->last_check > p->last_landed && p->last_check - p->last_landed >= RECV_REPLACED_CHECK_NS &&
        p->last_check - p->last_reg_check >= RECV_REPLACED_CHECK_NS) {
        p->last_reg_check = p->last_check;
        if (recv_trainer_replaced(p->r, p->reqs, p->world, p->last_check - p->last_landed, who, sizeof(who)))
            return recv_pull_fail(p, WSYNC_ERR_PEER, who);
    }
    if (p->last_check > p->deadline) {
        char why[600];
        recv_pull_waiting_for(p, why, sizeof(why));
        return wsync_error(WSYNC_ERR_TIMEOUT,
                           "version %llu: %u of %u chunks in on engine %s rank %d when the timeout passed%s",
                           (unsigned long long)p->v, p->ndone, p->nwant, p->r->engine_id, p->me, why);
    }
    return WSYNC_OK;
}
