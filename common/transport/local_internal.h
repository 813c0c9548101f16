/* local_internal.h: what the local transport's files share: the bytes one
 * side hands the other (address, key, hello, notice), its objects (the
 * transport, a region, a sender's connection and its queue of launches), and
 * the ops each file implements. CUDA builds only. */
#ifndef WSYNC_COMMON_TRANSPORT_LOCAL_INTERNAL_H
#define WSYNC_COMMON_TRANSPORT_LOCAL_INTERNAL_H

#if WSYNC_HAVE_CUDA
#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/mem/copy_digest_cuda.h"
#include "common/base/cuda_checks.h"
#include "common/net/auth.h"
#include "common/pack/pack.h"
#include "common/transport/cqueue.h"
#include "common/transport/transport.h"

#define LO_MAGIC 0x6c61636f6c5f7973ULL /* "sy_local" */
#define LO_NAME 96
#define LO_SUMS 1024 /* puts with a fused digest in flight per connection; more go without */

typedef struct lo_addr {
    uint64_t magic, pid, nonce;
    char name[LO_NAME];
} lo_addr_t;

/* The key: the receiver's allocation and where the region sits in it. The
 * handle names the whole allocation (CUDA maps allocations, not ranges), so
 * the region's offset inside it travels along. `gen`: the region's redirect
 * (local_redirect.c), 0 none; a sender fetches its spans once per gen. */
typedef struct lo_key {
    uint64_t magic, pid, id, len, alloc_off;
    uint64_t base; /* the allocation's address in the receiver (used when that is this process) */
    uint64_t gen;
    int32_t device, pad;
    cudaIpcMemHandle_t handle;
} lo_key_t;

typedef struct lo_hello {
    uint64_t magic, nonce;
    int32_t id, pad;
} lo_hello_t;

typedef struct lo_notice {
    uint64_t tag, len;
    int32_t status, has_sum;
    uint64_t sum; /* with has_sum: the word sum of the bytes written, keyed at their region offset */
    char message[128];
} lo_notice_t;

/* A sender's notice.status asking the receiver for a region's redirect
 * (tag: the region's id): not a status (those are <= 0). */
#define LO_ASK_SPANS 0x5350414e

typedef struct lo_map {
    cudaIpcMemHandle_t handle;
    char *ptr;
    uint64_t pid; /* the receiver process whose allocation it is */
} lo_map_t;

/* A redirect as it travels (local_redirect.c): an allocation of the
 * receiver's, and a span of the region landing inside one of them. */
typedef struct lo_wire_alloc {
    cudaIpcMemHandle_t handle;
    uint64_t base; /* its address in the receiver (used when that is this process) */
} lo_wire_alloc_t;

typedef struct lo_wire_span {
    uint64_t off, len, alloc_off; /* [off, off+len) of the region lands at alloc_off of allocs[alloc] */
    uint32_t alloc, pad;
} lo_wire_span_t;

typedef struct lo_wire_table {
    uint64_t magic, id, gen, nallocs, nspans;
    int32_t status, pad; /* WSYNC_OK, or why there is none (the region is gone) */
} lo_wire_table_t;

/* A sender's copy of one region's redirect, each span at its address here. */
typedef struct lo_span {
    uint64_t off, len;
    char *ptr;
} lo_span_t;

typedef struct lo_table {
    struct lo_table *next;
    uint64_t pid, id, gen;
    size_t n;
    lo_span_t *s;
} lo_table_t;

/* One part of a put: `len` bytes at region offset `off`, written to `dst`. */
typedef struct lo_part {
    char *dst;
    uint64_t off, len;
} lo_part_t;

/* Receiver: one accepted sender. */
typedef struct lo_reader {
    struct lo_reader *next;
    struct lo_transport *t;
    int fd, peer;
    pthread_t th;
} lo_reader_t;

typedef struct lo_transport {
    wsync_transport_t base;
    int device, timeout_ms;
    wsync_auth_t auth;
    wsync_cqueue_t cq;
    pthread_mutex_t lock;
    uint64_t next_region;
    /* receiver */
    int lfd;
    uint64_t nonce;
    char name[LO_NAME];
    pthread_t acceptor;
    int accepting, stopping;
    lo_reader_t *readers;
    struct lo_region *regions; /* receiver: registered, for the senders' asks (under lock) */
    /* sender: the receivers' allocations mapped here, and the open
     * connections (under lock): a receiver process's maps close with its
     * last connection (lo_unmap_unused) */
    lo_map_t *maps;
    int nmaps, capmaps;
    struct lo_conn *conns;
} lo_transport_t;

typedef struct lo_region {
    wsync_region_t base;
    struct lo_region *next;
    lo_key_t key;
    /* its redirect as senders fetch it (under the transport's lock) */
    lo_wire_alloc_t *allocs;
    lo_wire_span_t *spans;
    size_t nallocs, nspans;
} lo_region_t;

#define LO_BATCH WSYNC_CD_BATCH_MAX /* fused (or packed) puts per kernel launch, at most */
_Static_assert(WSYNC_CD_BATCH_MAX <= WSYNC_PACK_SUM_BATCH,
               "a batch of packed puts holds as many as one of fused puts");
#define LO_MAX_SPANS (1 << 22) /* of a redirect table a sender accepts */
#define LO_FLIGHT 2            /* launches in flight before fused puts wait to go together */

typedef struct lo_item {
    uint64_t tag, len;
    int sum;  /* its first slot in the connection's sums, -1: copied without */
    int nsum; /* slots from sum on (mod LO_SUMS): a part each, their sums add up to the put's */
} lo_item_t;

/* One launch on the stream and its event: a device copy of one put, a
 * batch of fused puts (one kernel, a sum for each part), or a batch of
 * packed puts gathered straight into the receiver's window (one kernel, a
 * sum for each put). */
enum { LO_OP_FUSED, LO_OP_GATHER };
typedef struct lo_op {
    struct lo_op *next;
    cudaEvent_t ev;
    cudaEvent_t ev0; /* with WSYNC_TRACE: recorded before the launch, so the trace gives its time (else NULL) */
    uint64_t bytes;  /* its puts' bytes, for that trace line */
    int n;           /* puts it completes */
    int np;          /* pieces of its kernel */
    int kind;        /* of a batch: LO_OP_FUSED (pc) or LO_OP_GATHER (g) */
    lo_item_t it[LO_BATCH];
    wsync_cd_piece_t pc[LO_BATCH];                        /* the fused puts' copies */
    wsync_pack_sum_put_t g[LO_BATCH];                     /* the packed puts */
    wsync_pack_part_t gparts[WSYNC_PACK_SUM_BATCH_PARTS]; /* their parts, ngparts of them */
    int ngparts;
} lo_op_t;

typedef struct lo_conn {
    wsync_conn_t base;
    struct lo_conn *next_conn; /* the transport's open connections (its lock) */
    uint64_t peer_pid;         /* the receiver's process */
    int fd, id;
    char peer_name[LO_NAME];
    cudaStream_t stream;
    pthread_mutex_t lock;      /* orders puts and the op queue */
    pthread_mutex_t send_lock; /* one writer at a time on fd (notices, asks) */
    pthread_mutex_t span_lock; /* the receiver's redirects known here, and reading fd */
    lo_table_t *tables;
    pthread_cond_t cond;
    lo_op_t *head, *tail;
    int stopping, broken;
    pthread_t progress;
    lo_op_t *free_ops; /* done ops with their events, for the next puts (under lock) */
    /* Fused puts go together, and packed puts of one part likewise: while
     * LO_FLIGHT launches are in flight the next ones of a kind gather in
     * `pend`, launched as one kernel when it is full, when a launch
     * completes, when a put of another kind comes, or at put_flush (under
     * lock). */
    lo_op_t *pend;
    int nflight;
    /* fused puts: a device accumulator and block counter per piece of a
     * launch (the kernel's last block of each puts them back to 0, so
     * launches in stream order share them) and a ring of LO_SUMS words of
     * mapped pinned memory the kernels write the sums into, taken in put
     * order, given back in completion order */
    uint64_t *dacc;
    unsigned int *dcount;
    uint64_t *hsums, *hsums_dev;    /* the ring, as the host and as the device address it */
    uint64_t sums_taken, sums_done; /* sums_done: written by the progress thread */
    uint64_t nqueued, ncopied;      /* puts, for the trace (under lock; the progress thread's) */
} lo_conn_t;

/* Make the transport's device current for a CUDA call, restoring the
 * caller's afterwards (the caller's thread may drive another GPU). Always
 * set: a thread that made no runtime call yet has no current context, and
 * the driver call in lo_reg needs one (cudaGetDevice alone binds none; the
 * first GPU run failed exactly so, from the trainer's request threads). */
static inline wsync_status_t enter_device(int device, int *prev)
{
    CUDA_CHECK(cudaGetDevice(prev));
    CUDA_CHECK(cudaSetDevice(device));
    return WSYNC_OK;
}

static inline void leave_device(int device, int prev)
{
    if (prev != device)
        cudaSetDevice(prev);
}

/* local_conn.c: the receiver's socket and readers, the sender's connection. */
wsync_status_t lo_listen(wsync_transport_t *tr, wsync_blob_t *addr);
wsync_status_t lo_connect(wsync_transport_t *tr, const wsync_blob_t *addr, int self_id, wsync_conn_t **out);
void lo_disconnect(wsync_conn_t *cn);
void lo_conn_sums_free(lo_conn_t *c);

/* local.c: the allocation under ptr (its base and size), on the current
 * device; WSYNC_ERR_CUDA when there is none. */
wsync_status_t lo_alloc_of(const void *ptr, uint64_t *base, size_t *size);
/* The receiver's allocation `handle` (at `base` in process `pid`) mapped
 * here, once per handle. */
wsync_status_t lo_map(lo_transport_t *t, uint64_t pid, const cudaIpcMemHandle_t *handle, uint64_t base, char **out);
/* Close the maps of every receiver process no open connection leads to
 * any more (a restarted engine's old window and tensors, which the mapping
 * would keep alive on the GPU). Called without the lock, on the device,
 * after the closed connection's copies drained. */
void lo_unmap_unused(lo_transport_t *t);

/* local_redirect.c: the receiver's redirect (the op), its answer to a
 * sender's ask, and the sender's split of a put by the spans it fetched. */
wsync_status_t lo_redirect(wsync_region_t *r, const wsync_redirect_t *spans, size_t n, wsync_blob_t *key);
void lo_region_spans_free(lo_region_t *r);
wsync_status_t lo_spans_answer(lo_transport_t *t, int fd, uint64_t id);
/* The put [dst_off, dst_off+len) of the region under key k (its bytes at
 * `image` here) cut where the redirect lands bytes elsewhere: *parts (the
 * caller frees), in region order. lo_split: the same by spans sp[0..nsp)
 * (sorted, disjoint; no GPU call, unit-tested on its own). */
wsync_status_t lo_split(const lo_span_t *sp, size_t nsp, char *image, uint64_t dst_off, uint64_t len,
                        lo_part_t **parts, size_t *nparts);
/* The parts of a put start on whole words of it, so their sums, part i
 * keyed at lo_part_key(ps, i) (its word of the put, digest_key.h), add up
 * to the put's sum (keyed at its first byte's offset); a put cut off its
 * word grid goes without a sum (the receiver digests it). */
int lo_parts_summable(const lo_part_t *ps, size_t n);
uint64_t lo_part_key(const lo_part_t *ps, size_t i);
wsync_status_t lo_put_parts(lo_conn_t *c, const lo_key_t *k, char *image, uint64_t dst_off, uint64_t len,
                            lo_part_t **parts, size_t *nparts);
void lo_conn_tables_free(lo_conn_t *c);
/* Send a notice-sized message on the connection (under send_lock). */
wsync_status_t lo_conn_send(lo_conn_t *c, const void *msg, size_t len);

/* local_put.c: the put path and the sender's progress thread. */
wsync_status_t lo_put(wsync_conn_t *cn, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                      size_t dst_off, size_t len, uint64_t tag);
void lo_put_flush(wsync_conn_t *cn);
wsync_status_t lo_put_gather(wsync_conn_t *cn, wsync_region_t *src, size_t src_off,
                             const struct wsync_pack_plan *plan, const wsync_blob_t *dst_key, size_t dst_off,
                             size_t len, uint64_t tag);
void *lo_progress_main(void *arg);

#endif
#endif
