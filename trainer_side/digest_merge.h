/* digest_merge.h: a version's digest pass that reads the rank's share once
 * for the record's piece digests and, for a node plan whose puts were
 * digested before, their put digests too (digest_merge.c). Publishing
 * thread only. */
#ifndef WSYNC_TRAINER_DIGEST_MERGE_H
#define WSYNC_TRAINER_DIGEST_MERGE_H

#include <jansson.h>

#include "common/mem/mem.h"
#include "common/targets/target_plan.h"
#include "trainer_side/slots.h"
#include "trainer_side/target_cache.h"
#include "trainer_side/wsync_publisher.h"

/* The merged tasks of node plan np over my share in slot s (the direct
 * slot: the caller's extents), built once per node plan (blocking; on a GPU
 * uploaded); NULL when np does not qualify (digest_merge.c says when). */
pub_merge_t *pub_merge_build(const wsync_publisher_t *p, const pub_slot_t *s, const wsync_node_plan_t *np);
void pub_merge_free(pub_merge_t *m);
/* start: launched on this thread's stream (GPU; nothing on the host);
 * finish: waits (GPU) or runs on the publish threads (host), then my pieces'
 * sums into rsums (my_pieces order) and my puts' digests into puts. */
wsync_status_t pub_merge_start(const wsync_publisher_t *p, const pub_merge_t *m, const pub_slot_t *s);
wsync_status_t pub_merge_finish(const wsync_publisher_t *p, const pub_merge_t *m, const pub_slot_t *s,
                                uint64_t *rsums, json_t *puts);

/* A version's digest pass: the record's digests of my pieces alone
 * (snapshot.h's pub_digest_start/finish), or with a node plan's put
 * digests, which then fill that plan's digest cache entry for `version`
 * (pull_targets.c) before the version's requests need them: start before
 * the version is announced, finish (sums[i] for my piece i) after. A
 * failed merged pass empties the entry (requests digest the puts the old
 * way) and takes the record's digests again. */
typedef struct pub_dpass {
    wsync_mem_job_t *job;
    pub_merge_t *m;
    pub_segdig_t *d;
} pub_dpass_t;
wsync_status_t pub_dpass_start(wsync_publisher_t *p, int slot, uint64_t version, pub_dpass_t *dp);
wsync_status_t pub_dpass_finish(wsync_publisher_t *p, int slot, uint64_t version, pub_dpass_t *dp, uint64_t *sums);

#endif
