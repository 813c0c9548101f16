/* transport.h: how a piece crosses hosts. A put is one-sided: the sender
 * writes `len` bytes of a local registered region into a remote registered
 * region at an offset, tagged; the receiver learns of it by a LANDED
 * completion carrying the tag. Backends: tcp, nccl, verbs (one ops table
 * each, picked by name or by can_use in priority order).
 *
 * Roles. The receiver (engine rank) opens a transport, registers its image,
 * and calls listen() to get an address blob; it sends address and region key
 * to the sender in its pull request. The sender (trainer rank) connect()s to
 * the address once (connections are cached by the caller and reused across
 * versions) and put()s pieces. Two-sided backends (nccl) also need the
 * receiver to expect() each piece from its source, in the same order as the
 * sender's puts; one-sided backends treat expect() as a no-op.
 *
 * Threads: every op may be called from any thread; put() and expect() do not
 * block on the network (they queue); poll() returns completions. Buffers stay
 * owned by the caller and must stay valid until the completion is polled. */
#ifndef WSYNC_COMMON_TRANSPORT_H
#define WSYNC_COMMON_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/blob.h"
#include "common/mem/mem.h"
#include "common/wsync.h"

typedef struct wsync_transport wsync_transport_t;
struct wsync_pack_plan; /* common/pack/pack.h */
typedef struct wsync_region wsync_region_t;
typedef struct wsync_conn wsync_conn_t;

typedef enum wsync_completion_kind {
    WSYNC_COMPLETION_SENT = 1,   /* sender: a put's bytes are handed to the network; src reusable */
    WSYNC_COMPLETION_LANDED = 2, /* receiver: a put's bytes are in the destination region */
    WSYNC_COMPLETION_ERROR = 3,  /* either side: a connection or put failed (tag may be ~0) */
} wsync_completion_kind_t;

typedef struct wsync_completion {
    wsync_completion_kind_t kind;
    wsync_status_t status; /* WSYNC_OK unless kind == ERROR */
    uint64_t tag;
    uint64_t len;
    int peer; /* sender id (receiver side) or -1 */
    /* LANDED, where the backend computed it on the way (local, inside one
     * GPU): has_sum = 1 and sum = wsync_digest_sum of the bytes as written,
     * keyed at their offset in the destination region. */
    int has_sum;
    uint64_t sum;
    char message[160]; /* for ERROR: what failed, which peer */
} wsync_completion_t;

typedef struct wsync_transport_config {
    const char *bind_host; /* address to listen on / to advertise; NULL = auto */
    int conns_per_peer;    /* tcp: parallel connections per peer pair (default 4) */
    int device;            /* GPU ordinal for GPU-aware backends, -1 none */
    int timeout_ms;        /* connect / handshake timeout (default 10000) */
    /* The token's keys (common/net/auth.h), or NULL: no token. Copied at
     * open: every connection then proves it (common/net/handshake.h). */
    const struct wsync_auth *auth;
} wsync_transport_config_t;

/* Bytes of a registered region that land elsewhere (ops->redirect). */
typedef struct wsync_redirect {
    uint64_t off, len; /* in the region */
    void *ptr;         /* where they land instead: memory of the region's kind */
} wsync_redirect_t;

typedef struct wsync_transport_ops {
    const char *name;
    /* 1 if this backend can run here; otherwise 0 with the reason recorded. */
    int (*can_use)(const wsync_transport_config_t *cfg);
    wsync_status_t (*open)(const wsync_transport_config_t *cfg, wsync_transport_t **out);
    /* Register memory once (never per version). `key` lets a peer put into it. */
    wsync_status_t (*reg)(wsync_transport_t *t, void *ptr, size_t len, wsync_mem_kind_t kind, wsync_region_t **out,
                          wsync_blob_t *key);
    void (*dereg)(wsync_region_t *r);
    /* Receiver: the address senders connect to. */
    wsync_status_t (*listen)(wsync_transport_t *t, wsync_blob_t *addr);
    /* Sender: connect to a receiver's address; `self_id` identifies the sender
     * to the receiver (the trainer rank), reported as completion.peer. Blocks
     * up to the configured timeout. */
    wsync_status_t (*connect)(wsync_transport_t *t, const wsync_blob_t *addr, int self_id, wsync_conn_t **out);
    /* Receiver, two-sided backends: a put tagged `tag` of `len` bytes from
     * sender `src_id` will land at `off` of `dst`. */
    wsync_status_t (*expect)(wsync_transport_t *t, int src_id, wsync_region_t *dst, size_t off, size_t len,
                             uint64_t tag);
    wsync_status_t (*put)(wsync_conn_t *c, wsync_region_t *src, size_t src_off, const wsync_blob_t *dst_key,
                          size_t dst_off, size_t len, uint64_t tag);
    /* Optional (NULL: nothing to do). The caller's batch is complete: the
     * sender's puts on `c` for one request, or the receiver's expects from
     * `src_id` for one request. Backends that issue ops in groups (nccl)
     * close a group here, so both sides group the same ops the same way;
     * every caller of put/expect calls these after its batch. */
    void (*put_flush)(wsync_conn_t *c);
    void (*expect_flush)(wsync_transport_t *t, int src_id);
    /* Optional (NULL: not offered). Sender, GPU memory: a put whose `len`
     * bytes are gathered from strided bytes of `src` by `plan` (a prepared
     * GPU pack, common/pack/pack.h: the put's runs, source offsets from
     * src_off, destination offsets from the put's first byte) and written
     * straight into the receiver's region at dst_off, with no packed copy
     * of it first; LANDED carries its sum (has_sum, keyed at dst_off) where
     * the backend offers sums. Completes as put does. Returns
     * WSYNC_ERR_UNSUPPORTED, queuing nothing, when this put cannot go so
     * (the receiver on another GPU, the bases aligned otherwise than the
     * plan, its sums all in use): the caller packs it and puts it. */
    wsync_status_t (*put_gather)(wsync_conn_t *c, wsync_region_t *src, size_t src_off,
                                 const struct wsync_pack_plan *plan, const wsync_blob_t *dst_key, size_t dst_off,
                                 size_t len, uint64_t tag);
    /* Optional (NULL: not offered). Receiver: from now on the bytes of
     * region r in each span [off, off+len) land at the span's ptr instead of
     * the region's memory (spans sorted by off, disjoint, inside the region;
     * copied); n 0: every byte in the region again. A put crossing span
     * edges is split; a LANDED sum (has_sum) is still the sum of the put's
     * bytes keyed at their region offsets, wherever each part landed.
     * `key` is the region's key as reg gave it: a backend whose senders
     * write the receiver's memory themselves (local) rewrites it, and puts
     * made with the rewritten key land by these spans (the receiver sends
     * that key from now on; puts under an older one land as that one said).
     * tcp waits until no put is being read into the region. local: the
     * span's memory must be CUDA memory it can export over CUDA IPC (not
     * memory of virtual memory management: expandable segments,
     * cudaMallocAsync pools), else WSYNC_ERR_UNSUPPORTED, nothing changed:
     * the caller keeps landing in the region. */
    wsync_status_t (*redirect)(wsync_region_t *r, const wsync_redirect_t *spans, size_t n, wsync_blob_t *key);
    /* Up to `max` completions into `out`, waiting up to timeout_ms for the first. */
    wsync_status_t (*poll)(wsync_transport_t *t, wsync_completion_t *out, int max, int *n, int timeout_ms);
    void (*disconnect)(wsync_conn_t *c);
    void (*close)(wsync_transport_t *t);
} wsync_transport_ops_t;

/* Every backend's object starts with this (backend structs embed it first). */
struct wsync_transport {
    const wsync_transport_ops_t *ops;
};
struct wsync_region {
    wsync_transport_t *transport;
    void *ptr;
    size_t len;
    wsync_mem_kind_t kind;
};
struct wsync_conn {
    wsync_transport_t *transport;
};

/* A backend this build left out (nccl without CUDA and NCCL, verbs without
 * libibverbs, local without CUDA) keeps its table: can_use() says no and
 * open() fails, both with the one message of not_built.h naming the
 * transport, what the build lacked and what to install or rebuild. The
 * cases every backend must pass: tests/unit/common/transport/conformance.h. */
extern const wsync_transport_ops_t wsync_transport_tcp;
extern const wsync_transport_ops_t wsync_transport_nccl;
extern const wsync_transport_ops_t wsync_transport_verbs;
/* Same host, GPU memory only: CUDA IPC device-to-device copies; chosen by
 * name only (never by "auto"). Offers put_gather and redirect. */
extern const wsync_transport_ops_t wsync_transport_local;

/* By name ("tcp", "nccl", "verbs"), or "auto": the first of verbs, nccl, tcp
 * whose can_use() says yes. Unknown names fail listing the valid ones. */
wsync_status_t wsync_transport_get(const char *name, const wsync_transport_config_t *cfg,
                                   const wsync_transport_ops_t **out);

/* A redirect span [off, off+len) that is empty, not inside a region of
 * region_len bytes, or starts before prev_end (the span before it ends
 * there; 0 for the first): the rule wsync_redirect_check applies, and a
 * sender to the spans it is told. */
static inline int wsync_redirect_span_bad(uint64_t off, uint64_t len, uint64_t region_len, uint64_t prev_end)
{
    return len == 0 || len > region_len || off > region_len - len || off < prev_end;
}

/* For redirect's implementations: spans non-empty, inside region r,
 * sorted and disjoint, else WSYNC_ERR_INVALID naming the first bad one. */
wsync_status_t wsync_redirect_check(const wsync_region_t *r, const wsync_redirect_t *spans, size_t n,
                                    const char *backend);

#endif
