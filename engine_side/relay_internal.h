/* relay_internal.h: the state of an engine node's relay (relay.h), shared
 * by relay.c (the slots: what each serves, set by the pulling thread) and
 * relay_serve.c (a request served on the pull port's thread). Everything
 * here is under the relay's lock. */
#ifndef WSYNC_ENGINE_RELAY_INTERNAL_H
#define WSYNC_ENGINE_RELAY_INTERNAL_H

#include <pthread.h>

#include "common/net/auth.h"
#include "common/proto/pull_port.h"
#include "engine_side/relay.h"

/* What a slot serves, one span per put of the node plan: engine layouts,
 * each out of the image of the local rank its chunk lands on, once that
 * rank marked the chunk landed on the board; the whole image (its identity
 * node plan: put i is piece i), each out of local rank 0's image, once
 * verified there. */
typedef struct relay_span {
    uint64_t off, len; /* the same in the source image and the asker's */
    uint32_t id;       /* the put's tag, below the request id */
    unsigned width;    /* its elements' width, for delta wires (pull_deltas.h) */
} relay_span_t;

typedef struct relay_slot {
    uint64_t version; /* 0: nothing served */
    uint32_t epoch;   /* bumped whenever the slot is reused */
    char ldig[17];
    uint32_t nchunks;
    uint32_t *chunk_first;   /* [nchunks + 1] */
    relay_span_t *spans;     /* [chunk_first[nchunks]] */
    unsigned char *verified; /* [nchunks]: verified here (targets: all at once, relay_slot_verified) */
    int L;                   /* local ranks whose images it reads: 1 (whole image) or the node's */
    void *win[BOARD_MAX_RANKS];
    size_t win_len[BOARD_MAX_RANKS];
    /* engine layouts: the node's targets (their digests), the chunks' landing
     * ranks, and the board whose landed marks of attempt gen it reads */
    char (*targets)[33];
    uint8_t *land; /* [nchunks] */
    board_t *board;
    uint64_t gen;
    int pins; /* requests reading the slot */
} relay_slot_t;

struct recv_relay {
    wsync_auth_t auth;
    wsync_mem_kind_t kind; /* of the images served */
    int device;
    char engine_id[128];
    char addr[160];
    wsync_pull_port_t *port;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    relay_slot_t slots[BOARD_SLOTS];
    int stopping;
};

/* The slot holding version v (not 0), or -1. */
int relay_find_slot(const recv_relay_t *rl, uint64_t v);
/* The versions the slots hold, for a message ("none" if none). */
void relay_held_versions(const recv_relay_t *rl, char *out, size_t len);
/* The pull port's handler: serves one request (relay_serve.c). */
void relay_serve_request(void *ctx, const json_t *req, json_t *reply);

#endif
