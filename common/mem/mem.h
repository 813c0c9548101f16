/* mem.h: memory backends. Where image bytes live (host RAM or a GPU) and the
 * few operations the data path needs on them, so the publisher and receiver
 * never branch on the kind. One ops table per backend; wsync_mem_get picks. */
#ifndef WSYNC_COMMON_MEM_H
#define WSYNC_COMMON_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

typedef enum wsync_mem_kind {
    WSYNC_MEM_HOST = 0,
    WSYNC_MEM_CUDA = 1,
} wsync_mem_kind_t;

/* One range to digest: `len` bytes at `ptr`, placed at image offset `off`. */
typedef struct wsync_digest_range {
    const void *ptr;
    size_t len;
    uint64_t off;
} wsync_digest_range_t;

/* One copy of copy_many. */
typedef struct wsync_copy {
    void *dst;
    const void *src;
    size_t len;
} wsync_copy_t;

/* A copy-and-digest running in the background (see copy_digest_start). */
typedef struct wsync_mem_job wsync_mem_job_t;

typedef struct wsync_mem_ops {
    const char *name; /* "host", "cuda" */
    wsync_mem_kind_t kind;
    /* Select device `device` for the calling thread (host: no-op). Fails with
     * WSYNC_ERR_UNSUPPORTED and a clear message where there is no such device. */
    wsync_status_t (*init)(int device);
    wsync_status_t (*alloc)(size_t len, void **out);
    void (*free)(void *ptr);
    /* Copies of `len` bytes; any of dst/src may be host or this kind's memory
     * (a GPU backend handles H2D/D2H/D2D/peer). Blocking: returns when done. */
    wsync_status_t (*copy)(void *dst, const void *src, size_t len);
    /* n copies queued in order on the calling thread's stream, as copy does
     * one; with `wait`, returns once they are done, else at once: a later
     * blocking op of this backend on the same thread (copy, digest_sum,
     * digest_many, copy_many with wait) runs after them, and copy_many(NULL,
     * 0, 1) waits for them. The host does the copies before returning. */
    wsync_status_t (*copy_many)(const wsync_copy_t *c, size_t n, int wait);
    wsync_status_t (*fill)(void *dst, size_t len, uint64_t off, uint64_t seed); /* wsync_fill_pattern */
    /* wsync_digest_sum of `len` bytes at `ptr` placed at image offset `off`. */
    wsync_status_t (*digest_sum)(const void *ptr, size_t len, uint64_t off, uint64_t *sum);
    /* digest_sum of each of `n` ranges into sums[i], waiting once for all of
     * them (a GPU runs them back to back and synchronises once: a chunk's
     * pieces cost one round trip, not one each). */
    wsync_status_t (*digest_many)(const wsync_digest_range_t *r, size_t n, uint64_t *sums);
    /* Copy `len` bytes src -> dst, then digest the n ranges (lying in dst)
     * after it, without waiting: a GPU queues both on streams of the calling
     * thread kept for jobs, so several jobs keep the copy engines busy back
     * to back (where the source is on the same GPU and the ranges lie in
     * the copied bytes, in order, the copy computes their digests as it
     * writes them: one pass, copy_digest_cuda.h); the host does the work
     * before returning. job_poll sets *done (and fills
     * sums[0..n)) once finished, waiting for it if `wait`; job_free ends a
     * job (finished or not: it waits). Jobs belong to the thread that
     * started them. */
    wsync_status_t (*copy_digest_start)(void *dst, const void *src, size_t len, const wsync_digest_range_t *r,
                                        size_t n, wsync_mem_job_t **job);
    wsync_status_t (*job_poll)(wsync_mem_job_t *job, int wait, uint64_t *sums, int *done);
    void (*job_free)(wsync_mem_job_t *job);
} wsync_mem_ops_t;

extern const wsync_mem_ops_t wsync_mem_host;
extern const wsync_mem_ops_t wsync_mem_cuda; /* stub without CUDA */

/* CUDA devices usable here: 0 without CUDA, without a driver or without a
 * GPU (never fails; the reason is not recorded). */
int wsync_cuda_device_count(void);

/* "host" or "cuda"/"cuda:N" -> backend and device (0 for host). */
wsync_status_t wsync_mem_get(const char *spec, const wsync_mem_ops_t **ops, int *device);

#endif
