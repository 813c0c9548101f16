/* relay.c: an engine node's relay (relay.h): its start and stop, and what
 * each image slot serves (set by the pulling thread of local rank 0). The
 * requests are served in relay_serve.c. */
#include "engine_side/relay.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/base/util.h"
#include "common/proto/pull_deltas.h"
#include "engine_side/relay_internal.h"

#define RELAY_DRAIN_MS 5000 /* relay_slot_end's bound on puts still reading the slot */

int relay_find_slot(const recv_relay_t *rl, uint64_t v)
{
    int s;
    for (s = 0; s < BOARD_SLOTS; s++)
        if (v != 0 && rl->slots[s].version == v)
            return s;
    return -1;
}

void relay_held_versions(const recv_relay_t *rl, char *out, size_t len)
{
    int s;
    size_t n = 0;
    out[0] = '\0';
    for (s = 0; s < BOARD_SLOTS; s++)
        if (rl->slots[s].version)
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%llu", n ? ", " : "",
                                  (unsigned long long)rl->slots[s].version);
    if (n == 0)
        snprintf(out, len, "none");
}

wsync_status_t relay_start(const char *bind_host, const wsync_auth_t *auth, const char *engine_id,
                           wsync_mem_kind_t kind, int device, recv_relay_t **out)
{
    recv_relay_t *rl = calloc(1, sizeof(*rl));
    char listen[160], who[200];
    wsync_status_t st;
    WSYNC_CHECK_ALLOC(rl);
    rl->auth = *auth;
    rl->kind = kind;
    rl->device = device;
    snprintf(rl->engine_id, sizeof(rl->engine_id), "%s", engine_id);
    pthread_mutex_init(&rl->lock, NULL);
    pthread_cond_init(&rl->cond, NULL);
    snprintf(listen, sizeof(listen), "%s:0", bind_host);
    snprintf(who, sizeof(who), "engine %s's relay", engine_id);
    st = wsync_pull_port_start_as(listen, auth, WSYNC_HS_RELAY, who, relay_serve_request, rl, &rl->port);
    if (st != WSYNC_OK) {
        relay_stop(rl);
        return st;
    }
    snprintf(rl->addr, sizeof(rl->addr), "%s:%d", bind_host, wsync_pull_port_number(rl->port));
    *out = rl;
    return WSYNC_OK;
}

const char *relay_address(const recv_relay_t *rl)
{
    return rl->addr;
}

/* rl->lock held: until no request reads slot s, at most RELAY_DRAIN_MS. */
static void drain(recv_relay_t *rl, relay_slot_t *s, int slot)
{
    uint64_t end = wsync_now_ns() + RELAY_DRAIN_MS * 1000000ULL;
    while (s->pins > 0 && wsync_now_ns() < end) {
        struct timespec ts;
        wsync_abstime_after_ms(&ts, 20);
        pthread_cond_timedwait(&rl->cond, &rl->lock, &ts);
    }
    if (s->pins > 0)
        LOG_WARN("engine %s: %d relay requests still read image slot %d after %d ms; reusing it (their receivers "
                 "verify what they got)",
                 rl->engine_id, s->pins, slot, RELAY_DRAIN_MS);
}

void relay_slot_end(recv_relay_t *rl, int slot)
{
    relay_slot_t *s = &rl->slots[slot];
    pthread_mutex_lock(&rl->lock);
    s->version = 0;
    s->epoch++;
    pthread_cond_broadcast(&rl->cond);
    drain(rl, s, slot);
    pthread_mutex_unlock(&rl->lock);
}

/* rl->lock held: room for nchunks chunks of nspans spans and the landing
 * map; 0, or -1 without memory (the slot then serves nothing: its askers
 * fall back to the trainer ranks). */
static int slot_room(relay_slot_t *s, uint32_t nchunks, size_t nspans)
{
    void *p;
    if ((p = realloc(s->chunk_first, (nchunks + 1) * sizeof(*s->chunk_first))) == NULL)
        return -1;
    s->chunk_first = p;
    if ((p = realloc(s->spans, (nspans + 1) * sizeof(*s->spans))) == NULL)
        return -1;
    s->spans = p;
    if ((p = realloc(s->verified, nchunks + 1)) == NULL)
        return -1;
    s->verified = p;
    if ((p = realloc(s->land, nchunks + 1)) == NULL)
        return -1;
    s->land = p;
    return 0;
}

/* rl->lock held: the node's targets, to compare each asker's with (none:
 * the whole image); 0, or -1 without memory. */
static int slot_targets(relay_slot_t *s, const relay_serve_t *t)
{
    void *p;
    if (t->targets == NULL) {
        free(s->targets);
        s->targets = NULL;
        return 0;
    }
    if ((p = realloc(s->targets, (size_t)t->L * 33)) == NULL)
        return -1;
    s->targets = p;
    memcpy(s->targets, t->targets, (size_t)t->L * 33);
    return 0;
}

void relay_slot_begin(recv_relay_t *rl, int slot, uint64_t v, const char *ldig, const relay_serve_t *t)
{
    const wsync_node_plan_t *np = t->np;
    relay_slot_t *s = &rl->slots[slot];
    uint32_t c;
    size_t i;
    int k;
    relay_slot_end(rl, slot);
    pthread_mutex_lock(&rl->lock);
    if (t->L <= BOARD_MAX_RANKS && slot_targets(s, t) == 0 && slot_room(s, np->nchunks, np->nputs) == 0) {
        for (c = 0; c < np->nchunks; c++) { /* puts are sorted by chunk */
            s->chunk_first[c] = (uint32_t)np->chunks[c].first_put;
            s->land[c] = (uint8_t)np->chunks[c].land_rank;
        }
        s->chunk_first[np->nchunks] = (uint32_t)np->nputs;
        for (i = 0; i < np->nputs; i++)
            s->spans[i] = (relay_span_t){.off = np->puts[i].dst_off, .len = np->puts[i].len, .id = np->puts[i].id};
        for (i = 0; i < np->nputs && t->manifest; i++) /* delta wires' element widths, as a trainer's */
            s->spans[i].width = wsync_pull_deltas_width(t->manifest, t->targets ? np : NULL, (uint32_t)i,
                                                        s->spans[i].off, s->spans[i].len);
        memset(s->verified, 0, np->nchunks + 1);
        for (k = 0; k < t->L; k++) {
            s->win[k] = t->win[k];
            s->win_len[k] = t->win_len[k];
        }
        s->L = t->L;
        s->board = t->targets ? t->board : NULL; /* the whole image: chunks go once verified */
        s->gen = t->gen;
        s->nchunks = np->nchunks;
        snprintf(s->ldig, sizeof(s->ldig), "%s", ldig);
        s->version = v;
    }
    pthread_mutex_unlock(&rl->lock);
}

void relay_chunk_verified(recv_relay_t *rl, int slot, uint32_t chunk)
{
    relay_slot_t *s = &rl->slots[slot];
    pthread_mutex_lock(&rl->lock);
    if (s->version && chunk < s->nchunks) {
        s->verified[chunk] = 1;
        pthread_cond_broadcast(&rl->cond);
    }
    pthread_mutex_unlock(&rl->lock);
}

void relay_slot_verified(recv_relay_t *rl, int slot)
{
    relay_slot_t *s = &rl->slots[slot];
    pthread_mutex_lock(&rl->lock);
    if (s->version)
        memset(s->verified, 1, s->nchunks);
    pthread_mutex_unlock(&rl->lock);
}

void relay_stop(recv_relay_t *rl)
{
    int s;
    if (rl == NULL)
        return;
    pthread_mutex_lock(&rl->lock);
    rl->stopping = 1;
    pthread_cond_broadcast(&rl->cond);
    pthread_mutex_unlock(&rl->lock);
    wsync_pull_port_stop(rl->port);
    for (s = 0; s < BOARD_SLOTS; s++) {
        free(rl->slots[s].chunk_first);
        free(rl->slots[s].spans);
        free(rl->slots[s].verified);
        free(rl->slots[s].land);
        free(rl->slots[s].targets);
    }
    pthread_mutex_destroy(&rl->lock);
    pthread_cond_destroy(&rl->cond);
    free(rl);
}
