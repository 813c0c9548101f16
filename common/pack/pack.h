/* pack.h: gathering strided source blocks into one contiguous destination
 * range (issue 12's pack step). A trainer packs a column slice of a
 * row-major tensor, or any block whose bytes are not contiguous in its
 * image, into the bytes of one put, in the destination's order, so every put
 * is one contiguous write: on the host a streamed copy, on a GPU one gather
 * kernel launch for all the runs of a put. */
#ifndef WSYNC_COMMON_PACK_H
#define WSYNC_COMMON_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/run2d.h"
#include "common/wsync.h"

/* The runs are wsync_run2d_t (common/base/run2d.h): `rows` rows of `row_bytes`
 * bytes, row i read at source offset src_off + i * src_stride and written at
 * dst_off + i * row_bytes (rows packed back to back in the destination); the
 * plan (target_plan.h) describes each put's source bytes as an array of
 * them, in destination order. A run with rows == 0 or row_bytes == 0 moves
 * nothing. */

/* Checks n runs against a source of src_len bytes and a destination of
 * dst_len bytes: every row inside both, rows of one run not overlapping in
 * the source (src_stride >= row_bytes when rows > 1), no destination byte
 * written twice, no size overflowing 64 bits. Fails with WSYNC_ERR_INVALID
 * naming the run and what is wrong. Never blocks; O(n log n). */
wsync_status_t wsync_pack_check(const wsync_run2d_t *runs, size_t n, uint64_t src_len, uint64_t dst_len);

/* Sum of the runs' bytes. */
uint64_t wsync_pack_bytes(const wsync_run2d_t *runs, size_t n);

/* Host gather: for each run, its rows from src_base into dst (both host
 * memory, not overlapping). Rows of 256 KiB and more go through
 * wsync_host_copy; shorter rows are copied with the source prefetched ahead
 * and the destination streamed (non-temporal stores where the CPU has AVX2).
 * Blocking. The runs are trusted: wsync_pack_check them first when they come
 * from outside. */
void wsync_pack_host(void *dst, const void *src_base, const wsync_run2d_t *runs, size_t n);

/* wsync_pack_host split over `threads` threads (<= 1: the calling thread
 * alone) by equal shares of the bytes; the calling thread takes one share.
 * Fails only when a thread cannot be started (the bytes are then still
 * copied, by the calling thread). */
wsync_status_t wsync_pack_host_threads(void *dst, const void *src_base, const wsync_run2d_t *runs, size_t n,
                                       int threads);

/* GPU gather: one kernel launch for all n runs, queued on `stream` (a
 * cudaStream_t; NULL: the calling thread's stream of the CUDA memory backend,
 * on the device wsync_mem_cuda.init chose). dst_dev and src_dev_base are
 * device memory of that device (or memory it can address: peer or mapped
 * pinned host memory). The runs are copied before the call returns (into a
 * task table that is uploaded with the launch), so the caller may reuse
 * `runs` at once; dst and src must stay valid until wsync_pack_cuda_wait.
 * Rows move in 16-byte loads and stores where the addresses, row lengths and
 * strides allow, else 8, 4, 2 or 1. Without CUDA: WSYNC_ERR_UNSUPPORTED.
 * A job belongs to the thread that started it. This builds and uploads the
 * task table on every call (host work and a copy before the kernel can
 * start): a sender packing the same put version after version should
 * prepare it once (wsync_pack_cuda_prepare below) and launch that. */
typedef struct wsync_pack_job wsync_pack_job_t;
wsync_status_t wsync_pack_cuda_start(void *dst_dev, const void *src_dev_base, const wsync_run2d_t *runs, size_t n,
                                     void *stream, wsync_pack_job_t **job);
/* A prepared pack: the task table of a put's runs, built and uploaded once
 * to the device of the calling thread (the one wsync_mem_cuda.init chose),
 * then launched for every version of the put. The table depends only on
 * the runs and on the alignment (modulo 16) of the destination and source
 * bases, so a sender prepares each put of its plan once and launches it put
 * after put with no host work but the launch. dst_align and src_align are
 * addresses aligned as the bases it will be launched with (the bases
 * themselves, or their values modulo 16). The runs are copied; the caller
 * may reuse them at once. Blocking (allocates device memory and uploads the
 * table: cudaMalloc synchronises the device), so prepare when the plan is
 * made, not per put. Without CUDA: WSYNC_ERR_UNSUPPORTED. A plan is never
 * changed after it is made: any thread on its device may launch it, and
 * several launches of it may be in flight at once. */
typedef struct wsync_pack_plan wsync_pack_plan_t;
wsync_status_t wsync_pack_cuda_prepare(const wsync_run2d_t *runs, size_t n, uintptr_t dst_align,
                                       uintptr_t src_align, wsync_pack_plan_t **plan);
/* One kernel launch of a prepared plan on `stream` (as for
 * wsync_pack_cuda_start), with no host-side work but the launch and an
 * event. Fails with WSYNC_ERR_INVALID, launching nothing, when dst_dev or
 * src_dev_base is not congruent to the base it was prepared for modulo the
 * widest vector its table moves (16 for aligned column slices; any base
 * will do for a table of single bytes), or the calling thread's device is
 * not the plan's. The plan must outlive the job (free it only after
 * wsync_pack_cuda_wait). */
wsync_status_t wsync_pack_cuda_launch(const wsync_pack_plan_t *plan, void *dst_dev, const void *src_dev_base,
                                      void *stream, wsync_pack_job_t **job);
/* One launch of a prepared plan written straight to its destination with
 * the digest of what it writes summed on the way (pack_digest_cuda.cu): the
 * plan's runs are one put, dst_dev its first byte (memory the device can
 * write: its own, or a peer window mapped over CUDA IPC); the word sum of
 * the put's bytes keyed at key_off (wsync_digest_sum(put, len, key_off)) is
 * delivered as wsync_cuda_copy_digest_out_async delivers its sum (*dacc and
 * *dcount device words at 0, the sum stored into *hout by the kernel's last
 * block, both put back to 0: launches in one stream share them). Queued on
 * `stream` (a cudaStream_t), nothing else queued: the caller records its
 * event. Fails with WSYNC_ERR_UNSUPPORTED, launching nothing, when a task of
 * the plan moves narrower than 8-byte words (the digest sums whole words:
 * bases aligned otherwise, odd widths), and as wsync_pack_cuda_launch on
 * misaligned bases or another device. Without CUDA: WSYNC_ERR_UNSUPPORTED. */
wsync_status_t wsync_pack_cuda_launch_sum(const wsync_pack_plan_t *plan, void *dst_dev, const void *src_dev_base,
                                          uint64_t key_off, uint64_t *dacc, unsigned int *dcount, uint64_t *hout,
                                          void *stream);

/* Where a put's bytes land when its destination is cut (a receiver's
 * redirect: the caller's tensors): the put's bytes from offset `at` (from
 * the put's first byte) up to the next part's `at` go to `dst` on. */
typedef struct wsync_pack_part {
    uint64_t at;
    void *dst;
} wsync_pack_part_t;
#define WSYNC_PACK_MAX_PARTS 32

/* wsync_pack_cuda_launch_sum for a put whose bytes land in n parts (parts[0].at
 * 0, the rest ascending inside the put), one launch, the sum the same (the
 * put's bytes keyed at key_off as one range). Fails with
 * WSYNC_ERR_UNSUPPORTED, launching nothing, as launch_sum does, and when
 * the parts do not fit the plan (wsync_pack_parts_check, pack_task.h). */
wsync_status_t wsync_pack_cuda_launch_sum_parts(const wsync_pack_plan_t *plan, const wsync_pack_part_t *parts,
                                                size_t n, const void *src_dev_base, uint64_t key_off,
                                                uint64_t *dacc, unsigned int *dcount, uint64_t *hout, void *stream);

/* A packed put of a batch: the plan, where its bytes land (nparts parts as
 * wsync_pack_cuda_launch_sum_parts takes them; one part: at 0, the put's
 * first byte), the source base, its digest key offset and where its sum
 * goes. */
typedef struct wsync_pack_sum_put {
    const wsync_pack_plan_t *plan;
    const wsync_pack_part_t *parts;
    size_t nparts;
    const void *src_base;
    uint64_t key_off;
    uint64_t *hout;
} wsync_pack_sum_put_t;
#define WSYNC_PACK_SUM_BATCH 16
#define WSYNC_PACK_SUM_BATCH_PARTS 64 /* the parts of a batch's puts, in all */

/* Would wsync_pack_cuda_launch_sum_parts take this put (n parts)? WSYNC_OK,
 * or the error it would fail with (WSYNC_ERR_UNSUPPORTED: narrower than
 * 8-byte words, no task, or parts the plan cannot land in;
 * WSYNC_ERR_INVALID: misaligned bases, another device), saying why.
 * Launches nothing. */
wsync_status_t wsync_pack_cuda_sum_check(const wsync_pack_plan_t *plan, const wsync_pack_part_t *parts, size_t n,
                                         const void *src_dev_base);
/* n (1..WSYNC_PACK_SUM_BATCH) puts, each one sum_check took, their parts
 * WSYNC_PACK_SUM_BATCH_PARTS at most in all, as one launch (fewer, bigger
 * launches: the local transport batches the packed puts handed while its
 * stream is busy): each put's bytes and sum as
 * wsync_pack_cuda_launch_sum_parts gives them. dacc and dcount: n device
 * words each at 0, put back to 0 (launches in one stream share them). */
wsync_status_t wsync_pack_cuda_launch_sum_batch(const wsync_pack_sum_put_t *puts, size_t n, uint64_t *dacc,
                                                unsigned int *dcount, void *stream);

/* Frees a plan (NULL: no-op). No job launched from it may still be
 * running. Synchronises the device (cudaFree). */
void wsync_pack_cuda_plan_free(wsync_pack_plan_t *plan);

/* Is the job finished? Sets *done without waiting (0 = still running). */
wsync_status_t wsync_pack_cuda_poll(wsync_pack_job_t *job, int *done);
/* Waits for the job and ends it (also after an error; NULL: no-op returning
 * WSYNC_OK). Returns the kernel's error, if it had one. */
wsync_status_t wsync_pack_cuda_wait(wsync_pack_job_t *job);

#endif
