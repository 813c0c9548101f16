/* target_verify.h: how an engine rank's target is verified. Its destination
 * image is cut into *segments*: the puts of the one-rank plan of that target
 * alone (target_plan.h with one local rank), so each segment is one
 * contiguous destination range whose bytes one trainer rank owns, cut at the
 * trainer's chunks. That trainer rank digests the segment's bytes in
 * destination order, keyed at the segment's destination offset (digest.h);
 * the engine digests the same range of its destination image and compares.
 * Segments depend only on (manifest, trainer layout, target, chunk size), so
 * they are computed once per distinct target and version, however many nodes
 * hold that target, and every destination byte a block writes is in exactly
 * one segment. Bytes no block covers are zero and never sent. */
#ifndef WSYNC_COMMON_TARGET_VERIFY_H
#define WSYNC_COMMON_TARGET_VERIFY_H

#include "common/targets/target_plan.h"

/* The segments of `t`: (*out)->puts, with src_rank, dst_off, len and runs. */
wsync_status_t wsync_target_segments(const wsync_manifest_t *m, const wsync_layout_t *layout,
                                     const wsync_target_t *t, uint64_t chunk_bytes, wsync_node_plan_t **out);

/* The destination tensor that holds destination byte `off` of `t`, or NULL
 * (alignment padding). O(log ndests). */
const wsync_dest_t *wsync_target_dest_at(const wsync_target_t *t, uint64_t off);

/* 1 if the runs read one contiguous source range in order (the put needs no
 * packing: it can be sent straight from the source); *src_off its start. */
int wsync_runs_contiguous(const wsync_run2d_t *runs, size_t n, uint64_t *src_off);

#endif
