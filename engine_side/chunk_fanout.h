/* chunk_fanout.h: the fan-out ring of a pull (the fetch's, pull.h): the
 * copies of chunks that landed on another local rank, out of its window into
 * this rank's image, each queued as a job (a copy and, where the fetch
 * verifies the chunk here, its units' digests: mem.h copy_digest_start),
 * RECV_FAN_INFLIGHT at a time so the copy engine runs them back to back,
 * reaped oldest first. A chunk may take several jobs (a node of targets
 * copies several ranges of one chunk); the last one says so. Jobs belong to
 * the thread that started them (the attempt's). */
#ifndef WSYNC_ENGINE_CHUNK_FANOUT_H
#define WSYNC_ENGINE_CHUNK_FANOUT_H

#include <stdint.h>

#include "common/mem/mem.h"

#define RECV_FAN_INFLIGHT 4 /* fan-out copy jobs queued at once */

typedef struct recv_fan {
    struct {
        wsync_mem_job_t *job;
        uint32_t chunk;
        int last; /* the chunk's last job */
    } q[RECV_FAN_INFLIGHT];
    int h, n; /* the oldest job, and how many are queued */
} recv_fan_t;

/* Jobs that may still be queued. */
static inline int recv_fan_room(const recv_fan_t *f)
{
    return RECV_FAN_INFLIGHT - f->n;
}

/* Queue a copy of `len` bytes src -> dst for chunk c (`last`: its last job),
 * then the digests of the n ranges `rg` (lying in dst; n may be 0). Needs
 * room (recv_fan_room). */
wsync_status_t recv_fan_start(recv_fan_t *f, const wsync_mem_ops_t *mem, uint32_t c, int last, void *dst,
                              const void *src, size_t len, const wsync_digest_range_t *rg, size_t n);
/* The oldest job, if it finished: *done 1, its chunk and `last`, its sums
 * (as many as it had ranges) in sums; *done 0 while it runs or none is
 * queued. */
wsync_status_t recv_fan_reap(recv_fan_t *f, const wsync_mem_ops_t *mem, uint32_t *c, int *last, uint64_t *sums,
                             int *done);
/* Every job ended (waits: no copy outlives the attempt). */
void recv_fan_end(recv_fan_t *f, const wsync_mem_ops_t *mem);

#endif
