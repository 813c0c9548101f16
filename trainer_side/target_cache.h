/* target_cache.h: what a publisher keeps for engines with their own layouts
 * (pull_targets.c, target_digests.c, target_stage.c): the targets and node
 * plans seen in pulls, the segment digests per (version, target) or put digests per (version,
 * node plan), and the
 * stages packed puts read from. Owned by the publisher; freed at destroy. */
#ifndef WSYNC_TRAINER_TARGET_CACHE_H
#define WSYNC_TRAINER_TARGET_CACHE_H

#include <pthread.h>

#include <jansson.h>

#include "common/proto/pull_request.h"
#include "common/targets/target_plan.h"
#include "trainer_side/serving.h"

typedef struct pub_target pub_target_t;
typedef struct pub_nplan pub_nplan_t;
typedef struct pub_segdig pub_segdig_t;
typedef struct pub_tdig pub_tdig_t;
typedef struct pub_stage pub_stage_t;
typedef struct pub_fp8q pub_fp8q_t;
typedef struct pub_direct pub_direct_t;
typedef struct pub_merge pub_merge_t;

typedef struct pub_target_cache {
    pthread_mutex_t lock; /* targets, nplans, segdigs */
    pthread_cond_t cond;  /* a segdigs entry's digests came in (or failed) */
    pub_target_t *targets;
    pub_nplan_t *nplans;
    pub_segdig_t *segdigs;
    pub_stage_t *stages;   /* target_stage.c, under the publisher's lock (p->lock) */
    pthread_mutex_t qlock; /* fp8q: the quantized bands (fp8_quant.c) */
    pub_fp8q_t *fp8q;
    wsync_fp8_exts_t *fp8x; /* the layout fp8x_sl's extents, sorted once */
    const void *fp8x_sl;
} pub_target_cache_t;

typedef struct pub_treq {
    pub_nplan_t *plan;           /* the node plan over the request's targets (cached) */
    const wsync_node_plan_t *np; /* and the plan itself */
    pub_target_t *asker;         /* the asking rank's target (its digest cache is filled in) */
} pub_treq_t;

/* pull_targets.c: a pull of a node with targets. resolve (no lock held):
 * the request's targets and node plan, cached (its puts: put_list.h);
 * digests (no p->lock, s pinned): "segments" of the asking rank's target
 * that I own into reply, or with by_put "puts": the digests of every put of
 * the node plan I send (computed once per node plan and version, for all
 * its ranks); free: the caches, at destroy. */
wsync_status_t pub_targets_resolve(wsync_publisher_t *p, const wsync_pull_request_t *q, pub_treq_t *tr);
wsync_status_t pub_targets_digests(wsync_publisher_t *p, const pub_slot_t *s, const pub_treq_t *tr,
                                   uint64_t version, int by_put, json_t *reply);
void pub_targets_free(wsync_publisher_t *p);
/* pull_targets.c, for digest_merge.c (publishing thread): merge_begin
 * picks the node plan whose put digests version `version`'s digest pass
 * computes with the record's: the newest one whose puts were digested
 * before (its merged tasks built the first time, pub_merge_build, the
 * cache's lock released), and adds its digest entry for the version,
 * marked computing, so the version's requests wait for the pass instead of
 * reading the share again (*m, *d; NULL: none, requests digest their puts
 * as before). merge_end fills the entry with `puts` (taken), or, NULL,
 * drops it (waiters then digest them themselves). */
void pub_targets_merge_begin(wsync_publisher_t *p, const pub_slot_t *s, uint64_t version, pub_merge_t **m,
                             pub_segdig_t **d);
void pub_targets_merge_end(wsync_publisher_t *p, pub_segdig_t *d, json_t *puts);
/* pull_targets.c: the span of slot s holding image offset off (NULL: none of
 * mine); gather runs of slot s into dst (memory of the publisher's kind). */
const pub_span_t *pub_span_at(const wsync_publisher_t *p, const pub_slot_t *s, uint64_t off);
wsync_status_t pub_gather(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_run2d_t *runs, size_t n,
                          void *dst);
/* pull_targets.c, direct_pack: the GPU pack plan of packed put `id` of the
 * node plan cached as `key` (pub_put_list_t's stage_key), runs from the
 * memory area *area of slot s, destination from the put's first byte, for
 * wsync_pack_cuda_launch_sum; prepared once (blocking) and kept. 0: none
 * (the stage packs that put). No lock held but s pinned. */
struct wsync_pack_plan;
int pub_direct_plan(wsync_publisher_t *p, const pub_slot_t *s, const void *key, uint32_t id,
                    const struct wsync_pack_plan **plan, int *area);
/* The runs of put `pu` of np with src_off relative to the memory area of
 * slot s holding them, into out (pu->nruns of them), *area set; 0 when they
 * do not all lie in one span. */
int pub_area_runs(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np,
                  const wsync_tput_t *pu, wsync_run2d_t *out, int *area);
/* target_digests.c: the digests of the segments of `seg` this rank owns, in
 * the version of slot s, into out ({"<segment id>": "hex"}), as `dig` says
 * (prepare: built on the first call, for the target, under the cache's lock;
 * compute: no lock held, blocking, several at once from any threads). The
 * same for the puts of a node plan (seg = the node plan: its puts of mine,
 * each keyed at its landing offset). */
wsync_status_t pub_tdig_prepare(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                pub_tdig_t **dig);
wsync_status_t pub_tdig_compute(wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *seg,
                                const pub_tdig_t *dig, json_t *out);
void pub_tdig_free(pub_tdig_t *d);
/* Put pu's digest from its word sum into a segments object; 0, or -1
 * without memory. */
int pub_put_digest(json_t *out, uint64_t sum, const wsync_tput_t *pu);
/* target_stage.c (p->lock held): the stage of the `n` packed puts `puts` of
 * node plan np (keyed `key`) landing on local rank `asker`, holding the
 * version of slot s (packed now, the lock dropped meanwhile, unless another
 * request did) and registered with transport ti; released when no put
 * reads it any more. Its region and each put's offset in it (k-th packed
 * put). pub_stages_free: all of them, before the transports close. */
wsync_status_t pub_stage_acquire(wsync_publisher_t *p, pub_slot_t *s, const void *key, const wsync_node_plan_t *np,
                                 int asker, const uint32_t *puts, size_t n, int ti, pub_stage_t **out);
void pub_stage_release(wsync_publisher_t *p, pub_stage_t *st);
wsync_region_t *pub_stage_region(const pub_stage_t *st, int ti);
uint64_t pub_stage_offset(const pub_stage_t *st, size_t k);
void pub_stages_free(wsync_publisher_t *p);
/* fp8_quant.c: the bands of np's FP8 uses (fp8_wire.h) this rank holds
 * whole, quantized from slot s (whose share must be copied) once per
 * version; no p->lock held (blocking, on the GPU for GPU memory). A NaN or
 * infinity fails naming the tensor. fp8_span_at: the span of the quantized
 * space holding off, in s's version (NULL: none). fp8q_free: at destroy. */
wsync_status_t pub_fp8_ensure(wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np);
const pub_span_t *pub_fp8_span_at(wsync_publisher_t *p, const pub_slot_t *s, uint64_t off);
void pub_fp8q_free(wsync_publisher_t *p);
/* fp8_amax.c: bands that trainer ranks share (fp8_wire.h, `part`). For my
 * parts among br[0..nbr) (use uses[use_of[k]]), the band's block maxima over
 * every rank's part into *amax (*namax floats; the scale columns of br[k]
 * from (*off)[k]), asking the peers for theirs (no lock held; blocking,
 * bounded, naming the peer that did not answer). Caller frees both.
 * parts_quantize: each job's part into its codes (and scales, when it has
 * them) with those maxima, on a GPU in one launch for all. amax_serve: the
 * answer to a peer's {"fp8_amax": req} on my pull port. */
typedef struct pub_fp8_job {
    wsync_fp8_brun_t b; /* a part of a band */
    wsync_fp8_spec_t spec;
    size_t at;    /* its maxima in the amax array */
    uint8_t *q;   /* parts_quantize: its codes */
    float *scale; /* and its scales (NULL: the part has none) */
} pub_fp8_job_t;

wsync_status_t pub_fp8_amax_parts(wsync_publisher_t *p, const pub_slot_t *s, const wsync_fp8_use_t *uses,
                                  const wsync_fp8_brun_t *br, const size_t *use_of, size_t nbr, float **amax,
                                  size_t **off, size_t *namax);
wsync_status_t pub_fp8_parts_quantize(const wsync_publisher_t *p, const pub_slot_t *s, const pub_fp8_job_t *jobs,
                                      size_t njobs, const float *amax, size_t namax);
void pub_fp8_amax_serve(wsync_publisher_t *p, const json_t *req, json_t *reply);

#endif
