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
/* Runs of BF16 destination di (not FP8), sorted, checked disjoint; appended
 * to v (target.c). */
/* qsort order of runs by destination offset. */
int tgt_cmp_run_dst(const void *a, const void *b);
wsync_status_t tgt_dest_runs(const wsync_target_t *t, const wsync_manifest_t *m, size_t di, tgt_runs_t *v);
/* Sorts v's runs by destination and fails, naming d, when two overlap. */
wsync_status_t tgt_runs_disjoint(const wsync_dest_t *d, tgt_runs_t *v);
/* Checks FP8 destination di (target_fp8.c); *covered: the bytes it and its
 * scale tensor hold. */
wsync_status_t tgt_fp8_check(const wsync_target_t *t, const wsync_manifest_t *m, size_t di, uint64_t *covered);
/* Parses a "quant" object (target_json.c); *scale is borrowed from q. */
wsync_status_t tgt_fp8_from_json(const json_t *q, wsync_fp8_spec_t *spec, const char **scale, const char *what);
/* Computes t->digest and t->digest_hex from the canonical JSON. */
wsync_status_t tgt_digest(wsync_target_t *t, const wsync_manifest_t *m);

#endif
