/* delta_end.c: the end of a delta pull on an engine rank (delta_land.h):
 * the re-fetches ended, the stage deregistered, the version's line logged
 * and its figures kept for status, /metrics and last_pull; and a relay
 * given up mid-version, whose wires the trainer ranks send again. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/util.h"
#include "engine_side/delta_land.h"
#include "engine_side/delta_land_internal.h"

void recv_delta_free(recv_delta_t *d)
{
    wsync_delta_dev_free(d->mem, d->dev);
    free(d->stage);
    if (d->split) /* (on the pulling thread, as it was allocated) */
        d->mem->free(d->split);
    free(d->area_at);
    free(d->area_len);
    free(d->state);
    free(d->wlen);
    free(d->wat);
    free(d->wbytes);
    free(d->wdig);
    free(d->taken);
    free(d->refetch);
    free(d->want);
    free(d->pending);
    free(d->failing);
    free(d);
}

wsync_status_t recv_delta_relay_gone(recv_pull_t *p)
{
    fetch_t *f = container_of(p, fetch_t, p);
    recv_delta_t *d = f->delta;
    uint32_t i;
    int k;
    if (d == NULL)
        return WSYNC_OK;
    for (k = 0; k < d->nreg; k++) /* before the transports close; the trainer ranks' requests register it again */
        d->reg[k].rt->ops->dereg(d->reg[k].region);
    d->nreg = 0;
    for (k = 0; k < f->p.world; k++) {
        recv_request_abort(&d->refetch[k]); /* its chunks are asked again in full with the rest */
        recv_request_end(&d->refetch[k]);
        d->pending[k] = 0;
    }
    memset(d->want, 0, (size_t)f->p.world * d->chunk_bytes);
    for (i = 0; i < f->np->nputs; i++) { /* the puts of chunks still missing come again */
        const wsync_tput_t *pu = &f->np->puts[i];
        if (!recv_pull_is_mine(p, pu->chunk) || p->remaining[pu->chunk] == 0)
            continue;
        if ((d->state[i] & (P_APPLIED | P_BAD)) == P_APPLIED) {
            d->ndelta--;
            d->wire_bytes -= d->wbytes[i];
            d->piece_bytes -= pu->len;
        }
        d->state[i] = 0;
    }
    d->relayed = d->relay_taken = 0;
    return WSYNC_OK;
}

void recv_delta_end(fetch_t *f, wsync_status_t st)
{
    recv_delta_t *d = f->delta;
    char a[32], b[32], c[32];
    uint64_t on_wire;
    int t, k;
    if (d == NULL)
        return;
    for (t = 0; t < f->p.world; t++) {
        if (st != WSYNC_OK)
            recv_request_abort(&d->refetch[t]);
        recv_request_end(&d->refetch[t]);
    }
    for (k = 0; k < d->nreg; k++)
        d->reg[k].rt->ops->dereg(d->reg[k].region);
    /* The pieces that went full, the wires, and what was put again. */
    on_wire = d->owed - d->piece_bytes - d->failed_len + d->wire_bytes + d->lost + d->refetch_bytes;
    if (st == WSYNC_OK && d->nkept == 0 && d->nasked == 0 && d->nother > 0) /* the usual way there: debug */
        LOG_DEBUG("engine %s rank %d: version %llu: every piece came full: %d trainer ranks are reached by a "
                  "transport other than tcp (deltas go over tcp; the local transport's copy beats them)",
                  f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v, d->nother);
    else if (st == WSYNC_OK && d->nkept == 0)
        LOG_INFO("engine %s rank %d: version %llu: no %s keeps version %llu as a delta base (%s): every "
                 "piece came full",
                 f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v, d->relayed ? "relay" : "trainer rank",
                 (unsigned long long)d->base,
                 d->nasked ? "their answers said so" : "their registrations say so, none was asked");
    else if (st == WSYNC_OK)
        LOG_INFO("engine %s rank %d: version %llu: %llu %s as deltas from version %llu (%s of wires for %s of "
                 "%s); on the wire %llu of %llu bytes (%.1f%%, %s); %llu re-fetched in full after a failed "
                 "check",
                 f->p.r->engine_id, f->p.me, (unsigned long long)f->p.v, (unsigned long long)d->ndelta,
                 f->p.ops->unit, (unsigned long long)d->base, wsync_fmt_size(d->wire_bytes, a, sizeof(a)),
                 wsync_fmt_size(d->piece_bytes, b, sizeof(b)), f->p.ops->unit, (unsigned long long)on_wire,
                 (unsigned long long)d->owed, d->owed ? 100.0 * (double)on_wire / (double)d->owed : 0.0,
                 wsync_fmt_size(on_wire, c, sizeof(c)), (unsigned long long)d->nrefetch);
    if (st == WSYNC_OK && d->ndelta > 0 && d->owed > 0) /* what delta=auto costs the next pull at */
        f->p.r->held.delta_wire_seen = (double)(d->owed - d->piece_bytes + d->wire_bytes) / (double)d->owed;
    if (st == WSYNC_OK)
        f->p.r->held.delta_last = (wsync_report_delta_t){.pieces = d->ndelta,
                                                         .wire_bytes = d->wire_bytes,
                                                         .piece_bytes = d->piece_bytes,
                                                         .refetched = d->nrefetch};
    recv_delta_free(d);
    f->delta = NULL;
}

void wsync_receiver_last_delta(const wsync_receiver_t *r, wsync_pull_delta_stats_t *out)
{
    *out = (wsync_pull_delta_stats_t){.version = r->held.version,
                                      .pieces = r->held.delta_last.pieces,
                                      .wire_bytes = r->held.delta_last.wire_bytes,
                                      .piece_bytes = r->held.delta_last.piece_bytes,
                                      .refetched = r->held.delta_last.refetched};
}
