/* shm.c: host windows: a memfd mapped shared; its descriptor travels to the
 * other local ranks over a Unix socket, so no name exists in /dev/shm and
 * nothing outlives the processes. A sparse window (wsync_shm_alloc_sparse)
 * holds pages only where bytes were written and not released since. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/window/window.h"

#define SHM_MAGIC 0x6d68735f6e797377ULL /* "wsyn_shm" */

typedef struct shm_blob {
    uint64_t magic;
    uint64_t len;
    uint64_t sparse; /* 1: map without populating (it would fill every page) */
} shm_blob_t;

static wsync_status_t shm_make(size_t len, int sparse, wsync_window_t *out)
{
    int fd = memfd_create("wsync-image", MFD_CLOEXEC);
    void *p;
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "memfd_create: %s", strerror(errno));
    if (ftruncate(fd, (off_t)len) != 0) {
        int e = errno;
        close(fd);
        return wsync_error(WSYNC_ERR_NOMEM, "cannot size a %zu-byte shared image: %s", len, strerror(e));
    }
    /* Reserve every page now: a memfd only sized by ftruncate would be
     * filled on first touch, and a host out of memory would then kill the
     * rank with SIGBUS in the middle of a pull instead of failing here. It
     * also takes the page faults out of the first version's time. A sparse
     * window skips both: its pages come and go with every version. */
    if (len && !sparse && fallocate(fd, 0, 0, (off_t)len) != 0 && errno != EOPNOTSUPP) {
        int e = errno;
        close(fd);
        return wsync_error(WSYNC_ERR_NOMEM,
                           "cannot reserve %zu bytes of shared memory for the image: %s "
                           "(free memory, or use a smaller image per node)",
                           len, strerror(e));
    }
    p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED | (sparse ? 0 : MAP_POPULATE), fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return wsync_error(WSYNC_ERR_NOMEM, "cannot map a %zu-byte shared image: %s", len, strerror(e));
    }
    /* Huge pages where the host allows them for shmem (shmem_enabled=advise):
     * fewer TLB misses when the other ranks copy out of it. Best effort. */
    madvise(p, len ? len : 1, MADV_HUGEPAGE);
    *out = (wsync_window_t){.ptr = p, .len = len, .fd = fd, .priv = NULL, .sparse = sparse};
    return WSYNC_OK;
}

static wsync_status_t shm_alloc(size_t len, wsync_window_t *out)
{
    return shm_make(len, 0, out);
}

wsync_status_t wsync_shm_alloc_sparse(size_t len, wsync_window_t *out)
{
    return shm_make(len, 1, out);
}

void wsync_window_release(const wsync_window_t *w, uint64_t off, uint64_t len)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t s = (off + page - 1) / page * page, e = (off + len) / page * page;
    if (w == NULL || !w->sparse || w->fd < 0 || e <= s || e > w->len)
        return;
    /* Best effort: a kernel that cannot punch keeps the pages. */
    (void)fallocate(w->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)s, (off_t)(e - s));
}

static void shm_free(wsync_window_t *w)
{
    if (w->ptr)
        munmap(w->ptr, w->len ? w->len : 1);
    if (w->fd >= 0)
        close(w->fd);
    w->ptr = NULL;
    w->fd = -1;
}

static wsync_status_t shm_export(const wsync_window_t *w, wsync_blob_t *blob)
{
    shm_blob_t b = {SHM_MAGIC, w->len, (uint64_t)w->sparse};
    memset(blob, 0, sizeof(*blob)); /* blobs travel whole: no stray bytes */
    memcpy(blob->data, &b, sizeof(b));
    blob->len = sizeof(b);
    return WSYNC_OK;
}

static wsync_status_t shm_map(const wsync_blob_t *blob, int fd, size_t len, void **out)
{
    shm_blob_t b;
    void *p;
    if (blob->len != sizeof(b) || fd < 0)
        return wsync_error(WSYNC_ERR_FORMAT, "shm window: bad blob or no descriptor");
    memcpy(&b, blob->data, sizeof(b));
    if (b.magic != SHM_MAGIC || b.len < len)
        return wsync_error(WSYNC_ERR_FORMAT, "shm window: not a wsync window, or smaller than %zu bytes", len);
    /* Populated now: a window is mapped once and read every version, so its
     * page faults belong to set-up, not to the first fan-out. Measured on
     * 1 GiB (bench/shm_fanout_bench): first copy 3.5 -> 6.2 GB/s, and map +
     * first copy 0.31 -> 0.25 s, since one populate beats 16-page fault-around. */
    p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED | (b.sparse ? 0 : MAP_POPULATE), fd, 0);
    if (p == MAP_FAILED)
        return wsync_error(WSYNC_ERR_IO, "cannot map a peer's %zu-byte window: %s", len, strerror(errno));
    *out = p;
    return WSYNC_OK;
}

static void shm_unmap(void *ptr, size_t len)
{
    if (ptr)
        munmap(ptr, len ? len : 1);
}

const wsync_window_ops_t wsync_window_shm = {
    .name = "shm",
    .kind = WSYNC_MEM_HOST,
    .alloc = shm_alloc,
    .free = shm_free,
    .export_blob = shm_export,
    .map = shm_map,
    .unmap = shm_unmap,
};
