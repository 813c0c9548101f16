/* host_copy.h: the bulk copy between host buffers that wsync's data path
 * uses (publish snapshots, chunks copied out of a peer's shm window). */
#ifndef WSYNC_COMMON_MEM_HOST_COPY_H
#define WSYNC_COMMON_MEM_HOST_COPY_H

#include <stddef.h>

/* memcpy's contract (no overlap). Ranges of 256 KiB and more are streamed:
 * the source is prefetched several pages ahead and the destination written
 * with non-temporal stores (AVX2 where the CPU has it, else memcpy). */
void wsync_host_copy(void *dst, const void *src, size_t len);

#endif
