/* delta_land_internal.h: the state of a delta pull on an engine rank,
 * shared by delta_land.c (asking, applying, checking) and delta_end.c (the
 * end of the attempt, the relay given up, the figures it leaves). */
#ifndef WSYNC_ENGINE_DELTA_LAND_INTERNAL_H
#define WSYNC_ENGINE_DELTA_LAND_INTERNAL_H

#include "common/delta/delta_mem.h"
#include "engine_side/delta_land.h"

/* P_BAD: its wire was refused; P_DIG: the answer gave its digest; P_WRONG:
 * applied, its bytes differ from that digest (a node verifying by segments) */
enum { P_LANDED = 1, P_PLACED = 2, P_APPLIED = 4, P_BAD = 8, P_DIG = 16, P_WRONG = 32 };

typedef struct delta_reg {
    recv_transport_t *rt;
    wsync_region_t *region;
    wsync_blob_t key;
} delta_reg_t;

struct recv_delta {
    uint64_t base;
    const wsync_mem_ops_t *mem; /* where the image is: host memory or a GPU (delta_mem.h) */
    wsync_delta_dev_t *dev;     /* a GPU's buffers for the wires applied there */
    const char *held;           /* the base's bytes: the held slot's image */
    int staged;                 /* the pull lands in the other slot (else in the held bytes) */
    int split_dests; /* in place into the caller's tensors (host, a sparse GPU image): the base is theirs where
                        they hold it */
    char *split;     /* a put's bytes gathered to apply there (split_len bytes of mem's memory) */
    size_t split_len;
    unsigned char *stage;
    uint64_t stage_len;
    uint64_t *area_at, *area_len; /* [world]: each trainer rank's part of the stage */
    delta_reg_t reg[RECV_MAX_TRANSPORTS];
    int nreg;
    unsigned char *state;    /* [nputs] P_* */
    uint64_t *wlen;          /* [nputs]: the wire's length as it landed */
    uint64_t *wat, *wbytes;  /* [nputs]: where the answer placed it */
    uint64_t *wdig;          /* [nputs]: the digest of its new bytes the answer gave */
    unsigned char *taken;    /* [world]: its answer read */
    recv_request_t *refetch; /* [world]: pieces asked again in full */
    unsigned char *want;     /* [world * chunk_bytes]: chunks to ask again */
    unsigned char *pending;  /* [world]: want has chunks not asked yet */
    unsigned char *failing;  /* [world]: a piece of the chunk being checked failed */
    size_t chunk_bytes;
    uint64_t owed;                                      /* bytes of the pieces landing here */
    uint64_t ndelta, wire_bytes, piece_bytes, nrefetch; /* applied: count, wire and piece bytes; failed */
    uint64_t refetch_bytes;                             /* put again in full */
    uint64_t failed_len, lost;                          /* failed pieces: their bytes, their wires' */
    int nkept, nasked;        /* trainer answers that kept the base; requests that named it */
    int nother;               /* requests over another transport than tcp (the local one: a copy beats a delta) */
    int relayed, relay_taken; /* the parent's relay asked for the wires (the whole stage), its answer read */
};

/* Frees d and everything it holds (its stage is no longer registered). */
void recv_delta_free(recv_delta_t *d);

#endif
