/* tlayout.h: the engine layout of one trainer layout (recv_tlayout_t,
 * targets.c): every local rank's target, the node plan over them, and this
 * rank's verification segments; and the FP8 bands this rank quantizes
 * itself (fp8_land.c). An attempt builds one; the held version keeps the
 * one it was pulled by (r->held.tl). */
#ifndef WSYNC_ENGINE_TLAYOUT_H
#define WSYNC_ENGINE_TLAYOUT_H

#include "common/control/sync_layout.h"
#include "common/targets/fp8_wire.h"
#include "common/targets/target_plan.h"
#include "common/targets/target_verify.h"
#include "engine_side/images.h"
#include "engine_side/wsync_receiver.h"

typedef struct recv_tlayout {
    int L;
    wsync_target_t **tg; /* [L] */
    wsync_node_plan_t *np;
    wsync_node_plan_t *seg;   /* segments of tg[local_rank] (target_verify.h) */
    uint64_t image_len;       /* this rank's destination image */
    unsigned char *defs_sent; /* [world]: that trainer rank answered a request that carried our targets */
    int hint_world;           /* > 0: the colocated landing hint the plan was built with (sent along) */
    int *colo, *ncolo;        /* [world * L], [world] */
    recv_fanmap_t *fan;       /* [L] */
    wsync_fp8_aux_t *aux;     /* FP8 bands this rank quantizes itself (fp8_land.c), after its destinations */
    size_t naux;
} recv_tlayout_t;

/* fp8_land.c: quantizes tl's aux bands (their source rows verified in
 * image) into their FP8 codes and scales, in image and the caller's
 * tensors. A NaN or infinity fails naming the destination and the source
 * tensor. Blocking. */
wsync_status_t recv_fp8_land(wsync_receiver_t *r, const recv_tlayout_t *tl, const wsync_manifest_t *m, char *image,
                             uint64_t v);
/* What image offset off past the destinations holds, for a message: "the
 * BF16 rows of FP8 tensor X, rows a..b (quantized here)", or "(padding)". */
const char *recv_fp8_aux_name(const wsync_target_t *t, const recv_tlayout_t *tl, uint64_t off, char *buf,
                              size_t len);

/* targets.c: post this rank's spec (with a target configured); the engine
 * layout of `sl`; check this rank's destination image against the
 * segment digests (digests[i] for segment i), naming the tensor that fails. */
wsync_status_t recv_targets_init(wsync_receiver_t *r);
wsync_status_t recv_tlayout_build(wsync_receiver_t *r, const wsync_sync_layout_t *sl, recv_tlayout_t **out);
void recv_tlayout_free(recv_tlayout_t *tl);
/* This rank's destination image size and tensor count for `sl` (its own
 * target alone: the first pull sizes its image slots with it before the
 * attempt opens). */
wsync_status_t recv_target_size(const wsync_receiver_t *r, const wsync_sync_layout_t *sl, uint64_t *len,
                                size_t *ntensors);
wsync_status_t recv_tlayout_verify(wsync_receiver_t *r, const recv_tlayout_t *tl, const char *image,
                                   const uint64_t *digests, uint64_t v);

#endif
