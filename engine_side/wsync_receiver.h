/* wsync_receiver.h: the engine side of wsync. Every local rank of an engine
 * node creates one receiver; pull() brings the node to a version: pieces land
 * on their landing rank over the network, the other local ranks copy each
 * chunk out of the landing rank's window as soon as it has landed, every rank
 * verifies every piece, and only then is the version held (and reported
 * ready). A version that fails verification is never held. With
 * config.dests a pull also brings the caller's own tensors to the version:
 * staged, copied once the node verified it; in place, written during the
 * pull and verified there (see dests). */
#ifndef WSYNC_RECEIVER_H
#define WSYNC_RECEIVER_H

#include "common/wsync.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wsync_receiver wsync_receiver_t;

typedef enum wsync_mode {
    WSYNC_MODE_STAGED = 0,   /* receive into a second image, then switch: the held
                                version stays readable during a pull */
    WSYNC_MODE_IN_PLACE = 1, /* receive into the one image: no extra memory; the
                                image (and config.dests) is invalid while a pull
                                runs and after a failure */
} wsync_mode_t;

/* The longest engine id: it names the node's local socket (with the host
 * id, within the 107 bytes a socket name has) and goes into URLs. */
#define WSYNC_ENGINE_ID_MAX 64

/* One destination tensor in the caller's memory (see config.dests). */
typedef struct wsync_dest_tensor {
    const char *name; /* a tensor the rank holds: its target's ("...qkv_proj.weight") or the manifest's */
    void *ptr;        /* host memory, or device memory of config.device */
    uint64_t nbytes;  /* its size: must equal the target's (or the manifest's) */
} wsync_dest_tensor_t;

typedef struct wsync_receiver_config {
    const char *control_url; /* required */
    const char *token;       /* or NULL (then env WSYNC_TOKEN) */
    const char *engine_id;   /* required: names the node; its ranks share it;
                              * 1 to WSYNC_ENGINE_ID_MAX characters */
    int local_rank, local_world;
    const char *device; /* "host" (default) or "cuda:N" */
    wsync_mode_t mode;
    const char *transport; /* "auto" (default), "tcp", "nccl", "verbs", "local" (same-host GPU peers get "local" anyway unless WSYNC_LOCAL_TRANSPORT=0) */
    const char *bind_host; /* address trainers put to (default: primary IPv4) */
    const char *host_id;   /* see wsync_publisher_config_t.host_id */
    /* Optional image memory: for "cuda", any device memory of image_len bytes;
     * for "host", memory from wsync_image_alloc (peers must be able to map it).
     * In staged mode a second image is allocated by wsync. */
    void *image;
    size_t image_len;
    /* Engine layouts (docs/ENGINE_LAYOUTS.md); all zero: every rank holds the
     * whole image, as the trainer lays it out. With a target, the rank holds
     * only its destination tensors (a TP rank's qkv_proj rows, o_proj
     * columns, vocabulary slice, experts...), verified byte for byte against
     * digests the trainer computed for that target. Every local rank of a
     * node gives the same tp_size and rules (each derives every rank's
     * target). */
    const char *target_json; /* this rank's target (docs/TARGETS.md), or NULL */
    int tp_size;             /* > 1 with target_json NULL: the rules' target, TP rank = local_rank % tp_size */
    const char *rules_json;  /* rules for tp_size (docs/TARGETS.md); NULL: the built-in vLLM rules */
    /* Optional caller memory: one entry per destination tensor the caller
     * owns (with a target, its destination tensors, "...qkv_proj.weight";
     * without, the manifest's tensors), any subset of them. Every pull that
     * meets a new layout checks them, before any byte moves: each name must
     * be one of the rank's tensors, given once, with its byte count (else
     * WSYNC_ERR_INVALID naming the tensor, nothing written).
     *   staged:   the pull lands in wsync's images as without dests; once
     *             every local rank verified the version, each destination
     *             tensor is copied out of the verified image (each rank
     *             after local rank 0 reported it ready). On a failed pull
     *             the caller's tensors keep the version they had (a copy
     *             that fails, a device error, leaves them invalid).
     *   in place: written during the pull: as soon as a chunk is complete in
     *             this rank's image (landed here, or copied out of the
     *             landing rank's window), its bytes that belong to caller
     *             tensors are copied into them (a GPU queues the copies and
     *             their digests as jobs, so they overlap the rest of the
     *             pull), and verification digests the caller's bytes, what
     *             the engine will use. Bytes no block covers (vocabulary
     *             padding) are zeroed in the caller's tensors. While a pull
     *             runs, and after one that failed, the caller's tensors are
     *             invalid, as the image is.
     * wsync's image is the landing memory (the node's other ranks copy out
     * of its window), so a rank holds its image plus the caller's tensors
     * (but in place on the host: below). Staged keeps a second image (the held version stays
     * readable while the next lands) unless the caller's tensors hold every
     * tensor of the rank: then the held version lives in them, one image
     * suffices (when every local rank of the node gives all its tensors; a
     * rank that gives fewer makes the node keep two), and the image, like
     * wsync_receiver_image's pointer, is invalid while a pull runs. In
     * place in host memory over tcp, a destination's bytes no other local
     * rank reads land straight in the caller's tensor (but its 8 at either
     * end), skipping the image; with every tensor of the rank given, the
     * image is sparse (setting sparse_image, default 1): its pages are
     * freed chunk by chunk, so a rank holds its tensors plus the chunks in
     * flight. In place into GPU tensors with a target over tcp, every byte
     * lands or is copied straight in them and the image holds memory only
     * under the digest words that cross destination edges off the 8-byte
     * grid (setting sparse_image; docs/ENGINE_LAYOUTS.md): the rest of
     * wsync_receiver_image's range is then not memory at all. In place
     * into GPU tensors over the local transport (trainer ranks on the same
     * GPU host), the bytes of a node of targets land straight in the
     * caller's tensors (not yet those of a whole image) when CUDA can export the
     * allocations under them (cudaMalloc'd memory, not expandable segments
     * nor cudaMallocAsync pools: those are copied on, with one warning); the
     * image keeps its memory. Either way
     * the image does not hold those bytes after a pull:
     * read the version from the caller's tensors (where
     * wsync_receiver_tensor* point; docs/ENGINE_LAYOUTS.md). The
     * memory must stay valid and unmoved while the receiver lives. */
    const wsync_dest_tensor_t *dests;
    int ndests;
    /* Optional: called on the pulling thread when a pull meets a new layout,
     * before any byte of it moves and before dests are checked, with the
     * tensors this rank will hold (the manifest's, or the target's
     * destination tensors; valid during the call). Anything but WSYNC_OK
     * refuses the pull with that status, nothing written (a language binding
     * checks its tensors' dtypes and shapes here). */
    wsync_status_t (*check_dests)(void *arg, const wsync_tensor_info_t *tensors, size_t n);
    void *check_dests_arg;
    /* Optional: stops wsync_receiver_create. Its waits -- the control
     * endpoint while it is down (up to its grace period), local rank 0's
     * node board for a rank > 0 (up to 30 s) -- return WSYNC_ERR_CANCELLED
     * within about 20 ms once *cancel is nonzero (set it from another thread
     * or a signal handler), leaving nothing behind. Read only while create
     * runs; a pull is stopped with wsync_receiver_cancel. NULL: only
     * wsync_interrupt() stops it. */
    const int *cancel;
} wsync_receiver_config_t;

WSYNC_API wsync_status_t wsync_receiver_create(const wsync_receiver_config_t *cfg, wsync_receiver_t **out);

/* Bring the node to `version`, or with version 0 to the newest published
 * version newer than the one held (waiting for one up to timeout_ms; on
 * local rank 0 of a node where a local rank was replaced by a new process,
 * the held version again, so that rank holds it too and the node is ready). A
 * version not published yet is waited for too (up to timeout_ms:
 * WSYNC_ERR_TIMEOUT); one older than the oldest the control endpoint retains
 * fails at once (WSYNC_ERR_NOT_FOUND, naming the retained ones). Every local
 * rank calls it; local rank 0 decides the version for the node. Returns
 * WSYNC_OK with *got set when every local rank holds it verified; on failure
 * the node keeps (staged) the version it held and reports failed. A peer
 * that is gone (closed, refused, or replaced by a new registration of its
 * rank) fails the pull at once, naming it and what was missing; timeout_ms
 * bounds the wait for silent ones. */
WSYNC_API wsync_status_t wsync_receiver_pull(wsync_receiver_t *r, uint64_t version, int timeout_ms, uint64_t *got);

/* Stop a pull from another thread or a signal handler (async-signal-safe:
 * one atomic store). The pull in flight -- waiting for a version, for the
 * other local ranks, or landing -- returns WSYNC_ERR_CANCELLED within about
 * 20 ms, the node keeping the version it held (the other local ranks see
 * this rank's attempt fail, as with any failure); so does every later pull
 * until wsync_receiver_cancel_clear(r). wsync_interrupt() (wsync.h) does
 * this for every object of the process at once. */
WSYNC_API void wsync_receiver_cancel(wsync_receiver_t *r);
WSYNC_API void wsync_receiver_cancel_clear(wsync_receiver_t *r);

/* The version held (0 before the first pull). */
WSYNC_API uint64_t wsync_receiver_version(const wsync_receiver_t *r);

/* A number that changes whenever the held version's tensor list (names,
 * dtypes, shapes, offsets in the image) may have changed. Versions of one
 * training run share it: a caller that keeps views built from
 * wsync_receiver_tensor_at may reuse them while this number and
 * wsync_receiver_image's pointer stay the same (the Python package does,
 * instead of asking for every tensor after every pull). */
WSYNC_API uint64_t wsync_receiver_layout_generation(const wsync_receiver_t *r);

/* Tensors of the held version: by name, or by index < count. *ptr points into
 * the image (device memory for "cuda"), or into the caller's memory for a
 * tensor config.dests gives; valid until the next pull. With a target these
 * are the rank's destination tensors (names like qkv_proj). */
WSYNC_API size_t wsync_receiver_tensor_count(const wsync_receiver_t *r);
WSYNC_API wsync_status_t wsync_receiver_tensor_at(const wsync_receiver_t *r, size_t i, void **ptr,
                                                  wsync_tensor_info_t *info);
WSYNC_API wsync_status_t wsync_receiver_tensor(const wsync_receiver_t *r, const char *name, void **ptr,
                                               wsync_tensor_info_t *info);
/* The whole held image (in place into the caller's tensors on the host it
 * does not hold their bytes: see config.dests). */
WSYNC_API wsync_status_t wsync_receiver_image(const wsync_receiver_t *r, void **ptr, size_t *len);

/* Where this rank's pull stands, for a progress display; callable from any
 * thread while a pull runs. Phases: "idle"; "setup" (the first pull only:
 * the image slots are reserved and mapped, every page, before a version is
 * chosen, so set-up neither counts in the pull's time nor lets the trainers
 * move past the chosen version); "landing" (bytes of the image verified
 * here, landed or copied from a local peer, of `total`). */
typedef struct wsync_pull_progress {
    const char *phase;    /* "idle", "setup" or "landing" */
    uint64_t version;     /* being pulled (for "setup": the one that sized the images) */
    uint64_t done, total; /* bytes */
    double elapsed_s;     /* in this phase */
    double last_setup_s;  /* how long the set-up took (0 before it ran) */
} wsync_pull_progress_t;
WSYNC_API void wsync_receiver_progress(const wsync_receiver_t *r, wsync_pull_progress_t *out);

/* What this rank's last pull received as delta wires (docs/DELTA.md): all
 * zero after a full pull (a first pull, a base the trainers no longer keep,
 * delta=off). Call between pulls. */
typedef struct wsync_pull_delta_stats {
    uint64_t version;     /* the version held */
    uint64_t pieces;      /* pieces applied as delta wires and verified */
    uint64_t wire_bytes;  /* the bytes of their wires */
    uint64_t piece_bytes; /* the bytes of those pieces (saved: piece_bytes - wire_bytes) */
    uint64_t refetched;   /* pieces that failed their check and came again in full */
} wsync_pull_delta_stats_t;
WSYNC_API void wsync_receiver_last_delta(const wsync_receiver_t *r, wsync_pull_delta_stats_t *out);

/* Host memory that other local processes can map (for config.image). */
WSYNC_API void *wsync_image_alloc(size_t len);
WSYNC_API void wsync_image_free(void *ptr, size_t len);

WSYNC_API void wsync_receiver_destroy(wsync_receiver_t *r);

#ifdef __cplusplus
}
#endif
#endif
