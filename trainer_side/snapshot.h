/* snapshot.h: a version's digests and its copy into a publish slot, read
 * from the caller's extents (snapshot.c); both on the publishing thread,
 * threaded for host memory. */
#ifndef WSYNC_TRAINER_SNAPSHOT_H
#define WSYNC_TRAINER_SNAPSHOT_H

#include "common/mem/mem.h"
#include "trainer_side/slots.h"

/* sums[i] = the digest sum of my piece i (p->share.my_pieces[i]). */
wsync_status_t pub_digest(wsync_publisher_t *p, uint64_t *sums);
/* The same in two steps (late digests): start queues it on a GPU (*job;
 * NULL on the host, where finish does it all), finish waits for the sums
 * and frees the job; both on the publishing thread. */
wsync_status_t pub_digest_start(wsync_publisher_t *p, wsync_mem_job_t **job);
wsync_status_t pub_digest_finish(wsync_publisher_t *p, wsync_mem_job_t *job, uint64_t *sums);
/* Copies the caller's extents into slot s in my_pieces order, on threads for
 * host memory, each piece marked in s->copied (under p->lock, waking the pull
 * server) once it is there. pub_copy_finish does what is left on the caller's
 * thread (GPU memory) or stops what is not started yet (abandon), waits for
 * the threads, frees the job and returns the first failure. */
typedef struct pub_work pub_work_t;
wsync_status_t pub_copy_start(wsync_publisher_t *p, pub_slot_t *s, pub_work_t **out);
wsync_status_t pub_copy_finish(pub_work_t *w, int abandon);
/* Threads a digest or copy uses: `asked` if > 0, else env
 * WSYNC_PUBLISH_THREADS, else one per online CPU; at most 8. */
int pub_snapshot_threads(int asked);

#endif
