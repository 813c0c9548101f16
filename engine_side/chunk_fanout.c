/* chunk_fanout.c: the fan-out ring of copy (and digest) jobs (chunk_fanout.h). */
#include "engine_side/chunk_fanout.h"

#include "common/base/checks.h"

wsync_status_t recv_fan_start(recv_fan_t *f, const wsync_mem_ops_t *mem, uint32_t c, int last, void *dst,
                              const void *src, size_t len, const wsync_digest_range_t *rg, size_t n)
{
    const int at = (f->h + f->n) % RECV_FAN_INFLIGHT;
    if (f->n == RECV_FAN_INFLIGHT)
        return wsync_error(WSYNC_ERR_INTERNAL, "fan-out ring full (chunk %u)", c);
    WSYNC_CHECK(mem->copy_digest_start(dst, src, len, rg, n, &f->q[at].job));
    f->q[at].chunk = c;
    f->q[at].last = last;
    f->n++;
    return WSYNC_OK;
}

wsync_status_t recv_fan_reap(recv_fan_t *f, const wsync_mem_ops_t *mem, uint32_t *c, int *last, uint64_t *sums,
                             int *done)
{
    *done = 0;
    if (f->n == 0)
        return WSYNC_OK;
    WSYNC_CHECK(mem->job_poll(f->q[f->h].job, 0, sums, done));
    if (!*done)
        return WSYNC_OK;
    mem->job_free(f->q[f->h].job);
    f->q[f->h].job = NULL;
    *c = f->q[f->h].chunk;
    *last = f->q[f->h].last;
    f->h = (f->h + 1) % RECV_FAN_INFLIGHT;
    f->n--;
    return WSYNC_OK;
}

void recv_fan_end(recv_fan_t *f, const wsync_mem_ops_t *mem)
{
    for (; f->n > 0; f->n--, f->h = (f->h + 1) % RECV_FAN_INFLIGHT) {
        mem->job_free(f->q[f->h].job); /* waits: the copy must not outlive the attempt */
        f->q[f->h].job = NULL;
    }
}
