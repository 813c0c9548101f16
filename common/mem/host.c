/* host.c: the host memory backend: page-aligned anonymous memory, streamed
 * bulk copies (host_copy.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/mem/host_copy.h"
#include "common/mem/mem.h"
#include "common/base/util.h"

#ifdef MADV_POPULATE_WRITE
#define WSYNC_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define WSYNC_MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* The size of each mapping, kept just before it, so free needs no length. */
#define HOST_HDR 4096

static wsync_status_t host_init(int device)
{
    return WSYNC_OK;
}

static wsync_status_t host_alloc(size_t len, void **out)
{
    char *p = mmap(NULL, len + HOST_HDR, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return wsync_error(WSYNC_ERR_NOMEM, "cannot allocate %zu bytes of host memory: %s", len, strerror(errno));
    /* Huge pages where THP is on "madvise", then every page faulted in now
     * (best effort: kernels before 5.14 lack MADV_POPULATE_WRITE), so the
     * first version is not charged for faulting its slot or image in. */
    madvise(p, len + HOST_HDR, MADV_HUGEPAGE);
    if (madvise(p, len + HOST_HDR, WSYNC_MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
        int e = errno;
        munmap(p, len + HOST_HDR);
        return wsync_error(WSYNC_ERR_NOMEM, "cannot populate %zu bytes of host memory: %s", len, strerror(e));
    }
    memcpy(p, &len, sizeof(len));
    *out = p + HOST_HDR;
    return WSYNC_OK;
}

static void host_free(void *ptr)
{
    size_t len;
    if (ptr == NULL)
        return;
    memcpy(&len, (char *)ptr - HOST_HDR, sizeof(len));
    munmap((char *)ptr - HOST_HDR, len + HOST_HDR);
}

static wsync_status_t host_copy(void *dst, const void *src, size_t len)
{
    wsync_host_copy(dst, src, len);
    return WSYNC_OK;
}

static wsync_status_t host_copy_many(const wsync_copy_t *c, size_t n, int wait)
{
    size_t i;
    (void)wait;
    for (i = 0; i < n; i++)
        wsync_host_copy(c[i].dst, c[i].src, c[i].len);
    return WSYNC_OK;
}

static wsync_status_t host_fill(void *dst, size_t len, uint64_t off, uint64_t seed)
{
    wsync_fill_pattern(dst, len, off, seed);
    return WSYNC_OK;
}

static wsync_status_t host_digest_sum(const void *ptr, size_t len, uint64_t off, uint64_t *sum)
{
    *sum = wsync_digest_sum(ptr, len, off);
    return WSYNC_OK;
}

static wsync_status_t host_digest_many(const wsync_digest_range_t *r, size_t n, uint64_t *sums)
{
    size_t i;
    for (i = 0; i < n; i++)
        sums[i] = wsync_digest_sum(r[i].ptr, r[i].len, r[i].off);
    return WSYNC_OK;
}

/* The host has no background engine: the job is done when it is started. */
struct wsync_mem_job {
    size_t n;
    uint64_t sums[];
};

static wsync_status_t host_copy_digest_start(void *dst, const void *src, size_t len, const wsync_digest_range_t *r,
                                             size_t n, wsync_mem_job_t **job)
{
    wsync_mem_job_t *j = malloc(sizeof(*j) + n * sizeof(uint64_t));
    WSYNC_CHECK_ALLOC(j);
    j->n = n;
    wsync_host_copy(dst, src, len);
    host_digest_many(r, n, j->sums);
    *job = j;
    return WSYNC_OK;
}

static wsync_status_t host_job_poll(wsync_mem_job_t *job, int wait, uint64_t *sums, int *done)
{
    (void)wait;
    memcpy(sums, job->sums, job->n * sizeof(uint64_t));
    *done = 1;
    return WSYNC_OK;
}

static void host_job_free(wsync_mem_job_t *job)
{
    free(job);
}

const wsync_mem_ops_t wsync_mem_host = {
    .name = "host",
    .kind = WSYNC_MEM_HOST,
    .init = host_init,
    .alloc = host_alloc,
    .free = host_free,
    .copy = host_copy,
    .copy_many = host_copy_many,
    .fill = host_fill,
    .digest_sum = host_digest_sum,
    .digest_many = host_digest_many,
    .copy_digest_start = host_copy_digest_start,
    .job_poll = host_job_poll,
    .job_free = host_job_free,
};
