/* digest_runs.h: segment digests read straight from strided source bytes.
 * A segment (target_verify.h) is a destination range whose bytes are runs
 * (run2d.h) of a trainer's image: a column slice of a row-major tensor is
 * one run of short rows far apart. Its digest (digest.h) is that of the runs
 * packed back to back, keyed at the segment's destination offset. Computed
 * here without packing: a table of tasks (a few rows of one run each) is
 * built and uploaded once per list of segments, then every version is one
 * kernel launch that reads each source byte once, at memory speed, and
 * writes nothing but the sums. The trainer uses it for the segments of a
 * target it owns, which it would otherwise gather into a scratch buffer and
 * digest: twice the bytes moved and a second copy of the strided bytes.
 *
 * The rows must be whole words: a segment qualifies when every run's
 * dst_off, row_bytes, src_off and src_stride are multiples of 8 (bf16 column
 * slices of widths divisible by 4, which every model of interest has);
 * others take the pack-then-digest path. */
#ifndef WSYNC_COMMON_DIGEST_RUNS_H
#define WSYNC_COMMON_DIGEST_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/run2d.h"
#include "common/wsync.h"

typedef struct wsync_digest_seg {
    uint64_t dst_off;          /* the key: the segment's destination offset */
    const wsync_run2d_t *runs; /* its runs: src_off from the source base, dst_off inside the segment */
    size_t nruns;
} wsync_digest_seg_t;

/* A segment whose words are also summed a second way (digest_merge.c: the
 * record's piece digests and a node plan's put digests from one read):
 * into sums[sum] keyed at seg.dst_off as above, and, unless sum2 is
 * WSYNC_DIGEST_NO_SUM, into sums[sum2] keyed as bytes of a contiguous range
 * at image offset off2 whose first byte is at source offset src2 (so every
 * source word must lie at or after src2, a multiple of 8 bytes from it). */
#define WSYNC_DIGEST_NO_SUM UINT32_MAX
typedef struct wsync_digest_seg2 {
    wsync_digest_seg_t seg;
    uint32_t sum, sum2;
    uint64_t off2, src2;
} wsync_digest_seg2_t;

/* 1 if these runs qualify (see above). */
int wsync_digest_runs_ok(const wsync_run2d_t *runs, size_t n);

/* One task: rows [row0, row0 + nrows) of one run, row_words words each,
 * summed into sum `seg`; word w of row r (0-based within the run) is read at
 * src_off + r * src_stride + 8 w and keyed key0 + (r * row_words + w) * G;
 * unless seg1 is WSYNC_DIGEST_NO_SUM, also summed into sum seg1 keyed
 * key1 + (r * step1 + w) * G. */
typedef struct wsync_digest_task {
    uint64_t src_off, src_stride, key0, key1;
    uint32_t row_words, nrows, row0, seg, step1, seg1;
} wsync_digest_task_t;

/* The tasks of n qualifying segments (wsync_digest_runs_ok on each; fails
 * with WSYNC_ERR_INVALID naming the first that does not), each at most
 * about 64 KiB so every block of the kernel gets a like share. Contiguous
 * rows longer than that are cut into 4 KiB rows first (the same bytes, the
 * same keys). *out is malloc'd. */
wsync_status_t wsync_digest_tasks(const wsync_digest_seg_t *segs, size_t n, wsync_digest_task_t **out,
                                  size_t *ntasks);

/* The same for segments summed two ways (wsync_digest_seg2_t): n of them,
 * each checked as above. */
wsync_status_t wsync_digest_tasks2(const wsync_digest_seg2_t *segs, size_t n, wsync_digest_task_t **out,
                                   size_t *ntasks);

/* Runs the tasks on the host: sums[seg] += each task's word sum (and
 * sums[seg1] += its second one), atomically, so threads may share sums
 * (sums are not zeroed first). The reference the GPU kernel is tested
 * against, and what a host-memory source uses. */
void wsync_digest_tasks_host(const wsync_digest_task_t *t, size_t n, const void *src_base, uint64_t *sums);

/* GPU: the tasks uploaded once to the device of the calling thread (the one
 * wsync_mem_cuda.init chose); then wsync_digest_runs_sums launches them on
 * src_base (device memory) and waits: sums[i] is the word sum of segment i
 * (wsync_digest_final(sums[i], len, dst_off) its digest). Blocking. Without
 * CUDA: WSYNC_ERR_UNSUPPORTED. A plan may be launched from any thread of
 * its device, several at once. */
typedef struct wsync_digest_runs_plan wsync_digest_runs_plan_t;
wsync_status_t wsync_digest_runs_prepare(const wsync_digest_seg_t *segs, size_t n, wsync_digest_runs_plan_t **out);
wsync_status_t wsync_digest_runs_sums(const wsync_digest_runs_plan_t *p, const void *src_base, uint64_t *sums);
/* The same for segments summed two ways: nsums sums (every sum and sum2
 * below it). start launches on the calling thread's stream and returns;
 * wait (the same thread, before any other launch of digest runs there)
 * waits and copies the sums out. */
wsync_status_t wsync_digest_runs_prepare2(const wsync_digest_seg2_t *segs, size_t n, size_t nsums,
                                          wsync_digest_runs_plan_t **out);
wsync_status_t wsync_digest_runs_start(const wsync_digest_runs_plan_t *p, const void *src_base);
wsync_status_t wsync_digest_runs_wait(const wsync_digest_runs_plan_t *p, uint64_t *sums);
void wsync_digest_runs_free(wsync_digest_runs_plan_t *p);

#endif
