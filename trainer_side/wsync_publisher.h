/* wsync_publisher.h: the trainer side of wsync. Each trainer rank creates one
 * publisher over the extents of the image it owns; publish(v) digests them,
 * tells the control endpoint, snapshots them while engines already pull, and
 * serves engine pulls of v from a background thread until v is superseded and
 * no engine is pulling it. */
#ifndef WSYNC_PUBLISHER_H
#define WSYNC_PUBLISHER_H

#include "common/wsync.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wsync_publisher wsync_publisher_t;

/* How the image is split among the trainer ranks; every party derives the
 * same extents from (manifest, kind, world). */
typedef enum wsync_layout_kind {
    WSYNC_LAYOUT_EVEN = 0, /* W contiguous shards of the image */
    WSYNC_LAYOUT_FSDP = 1, /* every tensor split along dim 0 */
} wsync_layout_kind_t;

/* One extent this rank owns: image bytes [offset, offset+len) live at ptr. */
typedef struct wsync_owned {
    uint64_t offset;
    uint64_t len;
    const void *ptr;
} wsync_owned_t;

typedef struct wsync_publisher_config {
    const char *control_url; /* required, e.g. "http://10.0.0.1:8470" */
    const char *token;       /* bearer token or NULL (then env WSYNC_TOKEN) */
    int rank, world;
    const char *manifest_json; /* the image layout (manifest JSON); copied */
    wsync_layout_kind_t layout;
    uint64_t chunk_size; /* 0: 64 MiB */
    /* Where this rank's bytes are: either `image` (a full image-shaped buffer;
     * only the owned extents are read) or `owned`/`nowned` (one pointer per
     * owned extent, in offset order; see wsync_publisher_owned_extents). */
    const void *image;
    const wsync_owned_t *owned;
    int nowned;
    const char *device;         /* "host" (default) or "cuda:N": where the bytes live */
    int zero_copy;              /* 1: every publish is single-copy (see
                                   wsync_publisher_publish_opts) and no publish
                                   slot is allocated */
    const char *listen;         /* pull server "HOST:PORT" ("0.0.0.0:0" default) */
    const char *advertise_host; /* address engines dial (default: listen's host when
                                 * it names one address, else the primary IPv4) */
    const char *host_id;        /* hosts with the same id use the local transport;
                                   default env WSYNC_HOST_ID, else the hostname */
    int slot_wait_ms;           /* publish waits this long for a slot still being
                                   pulled (default 60000) */
    const char *serve;          /* "HOST:PORT": this rank (rank 0) also runs the
                                   control endpoint; control_url may then be NULL */
    const char *serve_state;    /* its state file, or NULL */
    int threads;                /* threads that copy and digest a version held in
                                   host memory (0: env WSYNC_PUBLISH_THREADS, else
                                   one per online CPU; at most 8) */
} wsync_publisher_config_t;

/* Registers with the control endpoint and starts the pull server. Blocking. */
WSYNC_API wsync_status_t wsync_publisher_create(const wsync_publisher_config_t *cfg, wsync_publisher_t **out);

/* Publish the owned extents as `version` (must grow): digest them where they
 * are, report to the control endpoint (the version is published when all W
 * ranks have reported, and engines start pulling at once), then copy them into
 * a publish slot (unless zero_copy) while this rank already serves the pieces
 * copied so far. Returns once the report is accepted and the copy is done: the
 * caller must not write its extents until publish() returns; afterwards it
 * may. With zero_copy = 1 the version is single-copy: see
 * wsync_publisher_publish_opts and wsync_publisher_wait_held.
 * If the copy fails after the report, publish() fails and the version is
 * withdrawn on this rank: engines' pulls of it fail naming the failed copy and
 * they keep the version they hold. The control endpoint still lists it as the
 * latest version until a newer one is published (engines that retry fail the
 * same way meanwhile), so publish a newer version; the same number is refused
 * (409). Not thread-safe against itself (one publishing thread per
 * publisher). */
WSYNC_API wsync_status_t wsync_publisher_publish(wsync_publisher_t *p, uint64_t version);

/* Per-publish choices (wsync_publisher_publish_opts). Zeroed: the
 * publisher's default (single copy with zero_copy = 1, else a slot). */
#define WSYNC_PUBLISH_SINGLE_COPY 1u /* serve this version straight from the caller's extents */
#define WSYNC_PUBLISH_SLOT 2u        /* copy it into a publish slot (not with zero_copy = 1) */
typedef struct wsync_publish_opts {
    unsigned flags; /* WSYNC_PUBLISH_* */
} wsync_publish_opts_t;

/* wsync_publisher_publish with a choice of route (opts NULL: the default).
 * Single copy (the colocated route): no snapshot; engines copy the version
 * straight out of the caller's extents (on a shared GPU one device-to-device
 * copy end to end, instead of the slot's copy and then the engine's). The
 * contract: the caller does not write its extents until
 * wsync_publisher_wait_held(p, version, ...) returns (whatever it returns);
 * it returns when the engines on this host hold the version, or at its
 * timeout. publish() returns after the digest and the report, without a
 * copy. The next publish (of either route) also releases a single-copy
 * version wait_held did not: engines still pulling it then fail it (their
 * digests catch the bytes the caller wrote) and keep what they held. */
WSYNC_API wsync_status_t wsync_publisher_publish_opts(wsync_publisher_t *p, uint64_t version,
                                                      const wsync_publish_opts_t *opts);

/* For a single-copy `version` (this rank's last): blocks until every engine
 * node registered from this rank's host id (host_id, which engines and
 * trainers on one host share: they read the caller's memory directly)
 * reports `version` ready at the control endpoint (read as each pull served
 * here ends, every 1 ms for 30 ms after, backing off to every 50 ms) and no
 * pull of it is in flight on this rank, or until timeout_ms. Then, whatever
 * the outcome, this rank stops serving the version (later pulls of it are
 * refused, naming why) and the caller may write its extents. Returns
 * WSYNC_OK (held), WSYNC_ERR_TIMEOUT (not held in time: the message names
 * each engine node not holding it and its state), WSYNC_ERR_PEER (an engine
 * node failed the version), WSYNC_ERR_INVALID (version was not published
 * single-copy by this rank). A version already released (by an earlier
 * wait_held or a publish failure) returns WSYNC_OK at once. Engine nodes of
 * other hosts are not waited for: the ones pulling when the wait ends are
 * waited for up to the timeout; one asking later is refused and pulls the
 * next version. No engine node on this host: returns once no pull is in
 * flight. Call it from the publishing thread. */
WSYNC_API wsync_status_t wsync_publisher_wait_held(wsync_publisher_t *p, uint64_t version, int timeout_ms);

/* Waits until `version` (this rank's last publish) is published, i.e. every
 * rank reported it, for up to timeout_ms: for trainers whose ranks step
 * together. While it waits it checks every 2 s that the control endpoint
 * still holds this rank's report and registration, and sends them again if
 * it lost them (a restart while the version waited for other ranks). Call it
 * from the publishing thread (not concurrently with publish). An endpoint
 * away for longer than the grace period (WSYNC_CONTROL_GRACE_MS, default
 * 60 s) fails it, naming the endpoint and how long it tried. */
WSYNC_API wsync_status_t wsync_publisher_wait_published(wsync_publisher_t *p, uint64_t version, int timeout_ms);

/* The control endpoint's URL this publisher uses (its own with `serve`). */
WSYNC_API const char *wsync_publisher_control_url(const wsync_publisher_t *p);

/* Bytes this rank owns and the number of extents. */
WSYNC_API uint64_t wsync_publisher_owned_bytes(const wsync_publisher_t *p);

/* Stops serving (in-flight pulls fail on the engine side), frees everything.
 * NULL is fine. */
WSYNC_API void wsync_publisher_destroy(wsync_publisher_t *p);

/* The extents rank `rank` of `world` owns under a layout, without creating a
 * publisher: fills up to `max` entries of out (ptr = NULL) and returns the
 * count in *n. */
WSYNC_API wsync_status_t wsync_publisher_owned_extents(const char *manifest_json, wsync_layout_kind_t layout,
                                                       int world, int rank, wsync_owned_t *out, int max, int *n);

/* Building config.manifest_json without writing JSON by hand: tensors are
 * added in image order, each at the next 256-byte boundary (where
 * wsync_receiver_tensor will find it). Not thread-safe; the builder owns
 * nothing of the caller's. Typical use:
 *
 *   wsync_manifest_builder_t *b;
 *   int64_t shape[2] = {4096, 4096};
 *   uint64_t off, size;
 *   char *json;
 *   wsync_manifest_builder_create(&b);
 *   wsync_manifest_builder_add(b, "layers.0.mlp.up_proj.weight", "BF16", 2, shape, &off, &size);
 *   ... one call per tensor ...
 *   wsync_manifest_builder_json(b, &json);          // config.manifest_json; free(json) after create
 *   image = malloc(wsync_manifest_builder_image_size(b)); // tensor i at image + its off
 *   wsync_manifest_builder_destroy(b);
 */
typedef struct wsync_manifest_builder wsync_manifest_builder_t;
WSYNC_API wsync_status_t wsync_manifest_builder_create(wsync_manifest_builder_t **out);
/* Appends tensor `name` (copied) of safetensors dtype `dtype` ("BF16", "F32",
 * "I64", ...) and `ndim` dimensions (0: a scalar; at most WSYNC_MAX_DIMS).
 * *offset gets its offset in the image and *size its bytes (either may be
 * NULL). A duplicate name, an unknown dtype, a negative dimension or a size
 * that overflows is refused naming the tensor; the builder is unchanged. */
WSYNC_API wsync_status_t wsync_manifest_builder_add(wsync_manifest_builder_t *b, const char *name,
                                                    const char *dtype, int ndim, const int64_t *shape,
                                                    uint64_t *offset, uint64_t *size);
/* Bytes of the image the tensors so far make (padded to 256). */
WSYNC_API uint64_t wsync_manifest_builder_image_size(const wsync_manifest_builder_t *b);
/* The manifest JSON of the tensors so far, in *out: a string the caller frees
 * with free(). */
WSYNC_API wsync_status_t wsync_manifest_builder_json(const wsync_manifest_builder_t *b, char **out);
WSYNC_API void wsync_manifest_builder_destroy(wsync_manifest_builder_t *b);

#ifdef __cplusplus
}
#endif
#endif
