/* slots.c: the publish slots' memory and their states (slots.h). */
#include "trainer_side/slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/settings.h"

/* The direct slot: every extent is its own area, registered where the
 * caller keeps it. */
static wsync_status_t direct_init(pub_slot_t *s, const pub_share_t *sh)
{
    size_t i;
    s->nareas = (int)sh->nspans;
    s->area_ptr = calloc(sh->nspans ? sh->nspans : 1, sizeof(void *));
    s->area_len = calloc(sh->nspans ? sh->nspans : 1, sizeof(uint64_t));
    WSYNC_CHECK_ALLOC(s->area_ptr);
    WSYNC_CHECK_ALLOC(s->area_len);
    for (i = 0; i < sh->nspans; i++) {
        s->area_ptr[i] = (void *)sh->owned[i].ptr;
        s->area_len[i] = sh->owned[i].len;
        s->spans[i] = (pub_span_t){sh->owned[i].offset, sh->owned[i].len, (void *)sh->owned[i].ptr, (int)i, 0};
    }
    return WSYNC_OK;
}

/* A copy slot (`direct` 0: one buffer the owned bytes are copied into) or
 * the direct slot (the caller's extents, served as they are). */
static wsync_status_t slot_init(pub_slot_t *s, const pub_share_t *sh, const wsync_mem_ops_t *mem, int direct)
{
    uint64_t pos = 0;
    size_t i;

    s->spans = calloc(sh->nspans ? sh->nspans : 1, sizeof(*s->spans));
    s->copied = calloc(sh->nmy ? sh->nmy : 1, 1);
    WSYNC_CHECK_ALLOC(s->spans);
    WSYNC_CHECK_ALLOC(s->copied);
    if (direct)
        return direct_init(s, sh);
    WSYNC_CHECK(mem->alloc(sh->owned_bytes ? sh->owned_bytes : 1, &s->buf));
    s->nareas = 1;
    s->area_ptr = calloc(1, sizeof(void *));
    s->area_len = calloc(1, sizeof(uint64_t));
    WSYNC_CHECK_ALLOC(s->area_ptr);
    WSYNC_CHECK_ALLOC(s->area_len);
    s->area_ptr[0] = s->buf;
    s->area_len[0] = sh->owned_bytes ? sh->owned_bytes : 1;
    for (i = 0; i < sh->nspans; i++) {
        s->spans[i] = (pub_span_t){sh->owned[i].offset, sh->owned[i].len, (char *)s->buf + pos, 0, pos};
        pos += sh->owned[i].len;
    }
    return WSYNC_OK;
}

wsync_status_t pub_slots_init(pub_slots_t *ss, const pub_share_t *sh, const wsync_mem_ops_t *mem, int zero_copy)
{
    int i, k = (int)wsync_setting_int(WSYNC_SET_DELTA_BASES);
    ss->latest = -1;
    ss->ncopy = zero_copy ? 0 : k + 1 > 2 ? k + 1 : 2; /* zero_copy: no slot memory at all */
    for (i = 0; i < ss->ncopy; i++)
        WSYNC_CHECK(slot_init(&ss->slot[i], sh, mem, 0));
    return slot_init(&ss->slot[PUB_DIRECT], sh, mem, 1);
}

static void slot_free(pub_slot_t *s, const wsync_mem_ops_t *mem, const wsync_transport_ops_t *const *ops)
{
    int t, a;
    for (t = 0; t < PUB_MAX_TRANSPORTS; t++) {
        if (s->regions[t] == NULL)
            continue;
        for (a = 0; a < s->nareas; a++)
            if (s->regions[t][a])
                ops[t]->dereg(s->regions[t][a]);
        free(s->regions[t]);
    }
    if (s->buf)
        mem->free(s->buf);
    free(s->area_ptr);
    free(s->area_len);
    free(s->spans);
    free(s->copied);
}

void pub_slots_free(pub_slots_t *ss, const wsync_mem_ops_t *mem, const wsync_transport_ops_t *const *ops)
{
    int i;
    for (i = 0; i < PUB_NSLOTS; i++)
        slot_free(&ss->slot[i], mem, ops);
}

int pub_slots_free_copy(const pub_slots_t *ss)
{
    int s, best = -1;
    for (s = 0; s < ss->ncopy; s++)
        if (s != ss->latest && ss->slot[s].pins == 0 && (best < 0 || ss->slot[s].version < ss->slot[best].version))
            best = s;
    return best;
}

void pub_slots_take(pub_slots_t *ss, int s)
{
    ss->slot[s].version = 0;
    if (ss->latest == s)
        ss->latest = -1;
}

void pub_slots_announce(pub_slots_t *ss, int slot, uint64_t version, size_t nmy)
{
    pub_slot_t *s = &ss->slot[slot];
    memset(s->copied, slot == PUB_DIRECT ? 1 : 0, nmy ? nmy : 1);
    s->copy_status = WSYNC_OK;
    s->version = version;
    ss->latest = slot;
    if (slot == PUB_DIRECT) {
        ss->held_version = version;
        ss->held_released = 0;
    }
}

void pub_slots_withdraw(pub_slots_t *ss, int slot, uint64_t version, wsync_status_t st, const char *why)
{
    pub_slot_t *s = &ss->slot[slot];
    s->copy_status = st;
    s->version = 0;
    if (ss->latest == slot)
        ss->latest = -1;
    if (slot == PUB_DIRECT && ss->held_version == version)
        ss->held_released = 1; /* nothing left to wait for */
    ss->withdrawn = version;
    snprintf(ss->withdrawn_why, sizeof(ss->withdrawn_why), "%s", why);
}
