/* cuda_stream.h: the calling thread's dedicated copy stream on its device
 * (shared by the CUDA backends, so a thread owns one stream per device).
 * Only with WSYNC_HAVE_CUDA. */
#ifndef WSYNC_COMMON_MEM_CUDA_STREAM_H
#define WSYNC_COMMON_MEM_CUDA_STREAM_H

#include <cuda_runtime.h>

#include "common/wsync.h"

/* Makes the device chosen by wsync_mem_cuda.init (in this thread, else the
 * last one chosen in any thread) current, and gives its stream and an event
 * for blocking waits. Outputs may be NULL except stream_out. */
wsync_status_t wsync_cuda_stream(int *device_out, cudaStream_t *stream_out, cudaEvent_t *event_out);

/* Per-thread CUDA resources (streams, events, sums, job lists) are freed when
 * their thread exits: a module calls this with its cleanup (which frees the
 * calling thread's resources of that module) whenever a thread first takes
 * some. A trainer serves every pull request on a thread of its own; before,
 * each request left a stream, events and buffers behind. */
void wsync_cuda_at_thread_exit(void (*cleanup)(void));

#endif
