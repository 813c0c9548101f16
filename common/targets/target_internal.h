/* target_internal.h: what target.c, target_json.c and rules.c share. */
#ifndef WSYNC_COMMON_TARGET_INTERNAL_H
#define WSYNC_COMMON_TARGET_INTERNAL_H

#include "common/targets/target.h"

typedef struct tgt_runs {
    wsync_run2d_t *runs;
    size_t n, cap;
} tgt_runs_t;

wsync_status_t tgt_runs_push(tgt_runs_t *v, const wsync_run2d_t *r);
/* Validates block `bi` of `d` and appends its runs (absolute dst_off). */
wsync_status_t tgt_block_runs(const wsync_manifest_t *m, const wsync_dest_t *d, const wsync_block_t *b, size_t bi,
                              tgt_runs_t *v);
/* Computes t->digest and t->digest_hex from the canonical JSON. */
wsync_status_t tgt_digest(wsync_target_t *t, const wsync_manifest_t *m);

#endif
