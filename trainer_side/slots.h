/* slots.h: where a published version's bytes sit while engines pull them:
 * copy slots (the caller's extents copied into one buffer each: two, or
 * delta_bases + 1 when it keeps more delta bases) and the
 * direct slot (the caller's extents themselves: single copy), with how far
 * each slot's copy has got and the version served single-copy. Owned by the
 * publisher; everything here runs under the publisher's lock (p->lock),
 * except init and free (create and destroy). */
#ifndef WSYNC_TRAINER_SLOTS_H
#define WSYNC_TRAINER_SLOTS_H

#include "common/mem/mem.h"
#include "common/transport/transport.h"
#include "trainer_side/share.h"

#define PUB_SLOTS 5          /* most publish slots the bytes are copied into (delta_bases 4, and the newest) */
#define PUB_DIRECT PUB_SLOTS /* the caller's own extents: single-copy versions */
#define PUB_NSLOTS (PUB_SLOTS + 1)
#define PUB_MAX_TRANSPORTS 4

/* One owned extent as it sits in a slot: image range -> registered memory. */
typedef struct pub_span {
    uint64_t offset, len;
    void *ptr;         /* where the bytes are in this slot */
    int area;          /* index of the registered area holding them */
    uint64_t area_off; /* offset of ptr inside that area */
} pub_span_t;

typedef struct pub_slot {
    uint64_t version; /* 0: empty */
    int pins;         /* pulls in flight */
    /* The copy into the slot runs after `version` is announced, so a pull
     * puts a piece only once it is copied. */
    unsigned char *copied;      /* [nmy]: my piece i is in the slot (all 1 with zero-copy) */
    wsync_status_t copy_status; /* the copy failed: pulls waiting on it fail */
    void *buf;                  /* packed owned bytes (copy mode), else NULL */
    int nareas;                 /* memory areas to register: buf, or each extent */
    void **area_ptr;
    uint64_t *area_len;
    pub_span_t *spans;                            /* [nspans], offset order */
    wsync_region_t **regions[PUB_MAX_TRANSPORTS]; /* [transport][area], lazily */
} pub_slot_t;

typedef struct pub_slots {
    pub_slot_t slot[PUB_NSLOTS]; /* zero_copy: slot[PUB_DIRECT] alone is set up */
    int ncopy;                   /* copy slots set up: slot[0..ncopy) (0 with zero_copy) */
    int latest;                  /* slot of the newest version, -1 none */
    /* Single copy (hold.c): the version served straight from the caller's
     * extents (slot[PUB_DIRECT]) until wait_held or the next publish
     * releases it; 0 none. */
    uint64_t held_version;
    int held_released;
    uint64_t withdrawn;      /* the last version taken down after announcing it */
    char withdrawn_why[512]; /* and why (named in the failed pulls) */
} pub_slots_t;

/* The direct slot over the caller's extents and, unless zero_copy, the copy
 * slots (memory of `mem`'s kind): the setting delta_bases + 1, at least 2,
 * so the newest version and the K before it (the delta bases) stay. */
wsync_status_t pub_slots_init(pub_slots_t *ss, const pub_share_t *sh, const wsync_mem_ops_t *mem, int zero_copy);
/* Frees the slots' memory and deregisters their regions; ops[t] is the
 * transport that registered regions[t] (NULL: none). */
void pub_slots_free(pub_slots_t *ss, const wsync_mem_ops_t *mem, const wsync_transport_ops_t *const *ops);
/* A copy slot neither newest nor pinned by a pull, or -1: an empty one
 * first, else the one with the oldest version (the others stay bases). */
int pub_slots_free_copy(const pub_slots_t *ss);
/* Marks slot s empty so no new pull starts on it (the caller takes it). */
void pub_slots_take(pub_slots_t *ss, int s);
/* Slot s holds `version` from now on, none of its nmy pieces copied yet
 * (all of them with the direct slot): pulls may start and wait per piece. */
void pub_slots_announce(pub_slots_t *ss, int s, uint64_t version, size_t nmy);
/* Takes announced `version` in slot s down: pulls waiting on its pieces
 * fail with st, new ones are refused naming `why`. */
void pub_slots_withdraw(pub_slots_t *ss, int s, uint64_t version, wsync_status_t st, const char *why);

#endif
