/* images.h: a receiver's image slots (recv_images_t): the windows a version
 * lands in (slot 0 in place or staged, slot 1 staged), whether slot 0 is the
 * caller's memory or a sparse image, a sparse GPU image's direct and backed
 * ranges with its fan-out windows, and the node's other ranks' windows mapped
 * here. Owned by the receiver (r->images): sized by recv_ensure_images
 * (receiver.c), made sparse by gpu_sparse.c, peers mapped by pull_join.c;
 * freed at destroy. */
#ifndef WSYNC_ENGINE_IMAGES_H
#define WSYNC_ENGINE_IMAGES_H

#include "common/control/sync_layout.h"
#include "common/targets/target_plan.h"
#include "common/transport/transport.h"
#include "common/window/window.h"
#include "engine_side/board.h"
#include "engine_side/wsync_receiver.h"

typedef struct peer_map {
    void *ptr; /* peer's window mapped here, or NULL */
    uint64_t len;
    uint32_t epoch; /* the peer's board epoch when mapped */
    int fan;        /* the peer's image is a sparse GPU one: this is its fan-out window (recv_fanmap_t) */
} peer_map_t;

/* The bytes of local rank p's image that the node's other ranks copy out of
 * it (node plan copies from p to another rank), sorted and merged. When p's
 * image is a sparse GPU one (gpu_sparse.c), p packs them back to back into
 * a fan-out window of their own, which is what p exports, and the other
 * ranks read them there. */
typedef struct recv_fanmap {
    size_t n;
    wsync_redirect_t *r; /* image ranges, sorted, disjoint (ptr unused) */
    uint64_t *at;        /* [n]: where each starts in the fan-out window */
    uint64_t len;        /* the fan-out window's bytes */
} recv_fanmap_t;

typedef struct recv_images {
    /* slot 0 (in-place and staged), slot 1 (staged) */
    int nslots;
    wsync_window_t win[BOARD_SLOTS];
    int caller_image; /* slot 0 is the caller's memory */
    int sparse;       /* the slots are sparse host windows (in place, the caller's tensors hold every tensor) */
    size_t len;       /* each slot's bytes */
    /* a sparse GPU image (gpu_sparse.c): the bytes that land straight in the
     * caller's tensors, and the rest, which the image backs */
    int gpu_sparse;
    wsync_redirect_t *gpu_direct;
    size_t ngpu_direct;
    wsync_window_range_t *gpu_backed;
    size_t ngpu_backed;
    uint64_t gpu_fan_len;                /* this rank's fan-out bytes (recv_fanmap_t) */
    wsync_window_t gpu_fan[BOARD_SLOTS]; /* the fan-out window of each slot, exported instead of the image */
    peer_map_t peers[BOARD_MAX_RANKS][BOARD_SLOTS];
} recv_images_t;

/* gpu_sparse.c: at setup, in place into the caller's GPU tensors with a
 * target over transports that redirect, on a node that does not relay:
 * r->images.gpu_sparse, the bytes landing straight in the caller's tensors and
 * the ranges the image backs (recv_ensure_images allocates it sparse);
 * nothing otherwise. */
wsync_status_t recv_gpu_sparse_setup(wsync_receiver_t *r, const wsync_sync_layout_t *sl, size_t ntensors);
/* An attempt on a sparse GPU image: its direct spans (can_direct 0 when it
 * cannot land any) must be those of the setup, else a conflict that says
 * to restart the engine. */
wsync_status_t recv_gpu_sparse_check(const wsync_receiver_t *r, int can_direct, const wsync_redirect_t *spans,
                                     size_t n);
void recv_gpu_sparse_free(wsync_receiver_t *r);
/* Rank p's fan-out bytes under node plan np. */
wsync_status_t recv_fanmap_build(const wsync_node_plan_t *np, int p, recv_fanmap_t *out);
void recv_fanmap_free(recv_fanmap_t *m);
/* Where image offset `off` (inside one of m's ranges) lies in the fan-out window. */
uint64_t recv_fanmap_at(const recv_fanmap_t *m, uint64_t off);

#endif
