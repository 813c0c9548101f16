/* dests.h: the caller's destination tensors (config.dests) for one layout:
 * where each lies in this rank's image, the checks before any byte moves,
 * and the two ways bytes reach them. Staged: every destination tensor is
 * copied out of the verified image once the node verified. In place: each
 * chunk's destination bytes are copied into the caller's tensors as soon as
 * the chunk is complete in this rank's image (write-through), and
 * verification digests the caller's bytes where a destination holds them
 * (recv_parts_split: a digest range is cut between the caller's memory and
 * the image so that the part sums add up to the range's sum). */
#ifndef WSYNC_ENGINE_DESTS_H
#define WSYNC_ENGINE_DESTS_H

#include "common/model/manifest.h"
#include "common/mem/digest_key.h"
#include "common/mem/mem.h"
#include "common/targets/target.h"
#include "common/targets/target_plan.h"
#include "common/transport/transport.h"
#include "common/window/window.h"
#include "engine_side/wsync_receiver.h"

typedef struct recv_dest {
    uint64_t off, size; /* in this rank's image */
    char *ptr;          /* the caller's memory */
    const char *name;   /* the caller's string */
} recv_dest_t;

typedef struct recv_span {
    char *ptr;
    uint64_t len;
} recv_span_t;

typedef struct recv_dests {
    int in_place;   /* the receiver's mode: write-through during the pull */
    int word_edges; /* every digest range starts at a multiple of 8 in the image (recv_dests_words) */
    size_t n;
    recv_dest_t *d; /* by image offset; disjoint */
    size_t ngaps;
    recv_span_t *gaps; /* caller bytes no block writes (a target's padding): zeroed before an in-place pull */
} recv_dests_t;

/* The caller's destinations against the tensors this rank holds: the
 * manifest's (t NULL: the whole image) or target t's destination tensors,
 * whose verification segments `seg` tell the bytes blocks write. First the
 * config's check_dests callback (when set) sees the tensors; then every
 * destination must name one of them, once, with its byte count. *out NULL
 * when there are no destinations. Nothing is written. */
wsync_status_t recv_dests_build(const wsync_receiver_config_t *cfg, const wsync_manifest_t *m,
                                const wsync_target_t *t, const wsync_node_plan_t *seg, recv_dests_t **out);
void recv_dests_free(recv_dests_t *ds);
/* Sets ds->word_edges: whether every digest range this rank verifies
 * starts at a multiple of 8 in its image (the segments of a target, seg;
 * else the plan's pieces). Then a destination edge on the 8-byte grid cuts
 * no digest word, and the bytes next to it may land straight in the
 * caller's tensor (recv_dests_direct). Nothing when ds is NULL. */
void recv_dests_words(recv_dests_t *ds, const wsync_plan_t *plan, const wsync_node_plan_t *seg);
/* qsort's order of spans by offset. */
int recv_span_cmp(const void *a, const void *b);
/* The first of n sorted, disjoint spans that ends after `at` (n if none). */
size_t recv_span_after(const wsync_redirect_t *r, size_t n, uint64_t at);
/* The first destination that ends after image offset `off` (ds->n if none;
 * 0 when ds is NULL). */
size_t recv_dests_after(const recv_dests_t *ds, uint64_t off);
/* Bytes [*s, *e) of destination d that may skip the image: all but the
 * digest words that cross its edges, which are read out of the image
 * (recv_parts_split). With word_edges (every digest range starts at a
 * multiple of 8 in the image) those are the partial words at an edge off
 * the 8-byte grid, none at an edge on it; else its 8 bytes at either end.
 * 0 when nothing is left. */
int recv_dest_interior(const recv_dest_t *d, int word_edges, uint64_t *s, uint64_t *e);
/* The caller's memory of the destination at image offset `off`, or NULL. */
char *recv_dests_ptr(const recv_dests_t *ds, uint64_t off);

/* Digest ranges cut between the caller's memory and the image. */
typedef struct recv_parts {
    size_t n, cap;
    wsync_digest_range_t *rg;
    uint32_t *of; /* the range (piece, segment) each part belongs to */
    long *dest;   /* the destination it lies in, or -1 (the image) */
} recv_parts_t;

/* Append the parts of the digest range of image bytes [off, off+len) keyed at
 * `key` (its digest offset), belonging to range `of`: whole words of it that
 * lie in a destination, in the caller's memory, the rest at `image` (image
 * offset 0), each keyed so that the sum of the part sums is the range's sum. */
wsync_status_t recv_parts_split(recv_parts_t *p, const recv_dests_t *ds, const char *image, uint64_t off,
                                uint64_t len, uint64_t key, uint32_t of);
void recv_parts_free(recv_parts_t *p);

/* digest_many of n image ranges (rg[i].ptr inside `image`, rg[i].off their
 * keys; image offsets ptr - image), in place reading the caller's bytes
 * where a destination holds them; without destinations or staged, the
 * image's. One wait for the image's ranges, one for the caller's. */
wsync_status_t recv_dests_digest_many(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const char *image,
                                      const wsync_digest_range_t *rg, size_t n, uint64_t *sums);

/* In place: copy the destination bytes of image range [off, off+len) from
 * `image` into the caller's tensors (blocking); nothing without ds or staged. */
wsync_status_t recv_dests_write(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const char *image,
                                uint64_t off, uint64_t len);
/* In place: the bytes target chunk c brought to local rank `me` (its puts
 * when it landed here, the copies into `me`), written through: queued on
 * this thread's stream (a GPU) without waiting; the digests of the
 * caller's bytes come after them on that stream. The one call
 * fetch.c makes when a chunk is complete on this rank; bytes in
 * direct[0..ndirect) (recv_dests_direct, sorted) landed or were copied in
 * the caller's tensors already and are not copied. */
wsync_status_t recv_dests_chunk_in(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const wsync_node_plan_t *np,
                                   uint32_t c, int me, const char *image, const wsync_redirect_t *direct,
                                   size_t ndirect);
/* In place: the bytes puts bring to local rank `me` under node plan np that
 * may land straight in the caller's tensors (a transport's redirect, so
 * they skip the image and the write-through): every destination's bytes
 * but the digest words that cross its edges (verification reads them out of
 * the image: with word_edges the partial words at an edge off the 8-byte
 * grid, else 8 bytes at either end) and those the plan's copies read out of this
 * rank's image or write into it (np NULL: none). Sorted by offset; *out
 * (freed by the caller) NULL when none. */
wsync_status_t recv_dests_direct(const recv_dests_t *ds, const wsync_node_plan_t *np, int me,
                                 wsync_redirect_t **out, size_t *nout);
/* In place, verified by put with bytes landing direct (target_puts.h): the
 * bytes recv_dests_chunk_in wrote through for every chunk of rank `me`
 * compared with the image's, whose puts' sums verified them (the same
 * digest of both sides of each copy, after the copies on this thread's
 * stream). WSYNC_ERR_DIGEST naming the tensor when one differs. */
wsync_status_t recv_dests_verify_writes(const wsync_mem_ops_t *mem, const recv_dests_t *ds,
                                        const wsync_node_plan_t *np, int me, const char *image,
                                        const wsync_redirect_t *direct, size_t ndirect);
/* In place: wait for the write-through copies recv_dests_chunk_in queued
 * on this thread (a fetch that ends before its verification calls it). */
wsync_status_t recv_dests_drain(const wsync_mem_ops_t *mem, const recv_dests_t *ds);
/* In place, before a pull: zero the caller's bytes no block writes. */
wsync_status_t recv_dests_zero_gaps(const wsync_mem_ops_t *mem, const recv_dests_t *ds);
/* In place, the image a sparse window (window.h): free its pages of image
 * range [off, off+len) inside destinations, whose bytes the caller's
 * tensors now hold (the pages at a destination's ends stay: verification
 * reads the words that cross them out of the image); nothing otherwise. */
void recv_dests_release(const recv_dests_t *ds, const wsync_window_t *w, uint64_t off, uint64_t len);
/* Staged, once the node verified: every destination tensor out of `image`. */
wsync_status_t recv_dests_copy_all(const wsync_mem_ops_t *mem, const recv_dests_t *ds, const char *image);

/* One whole-image chunk written through in place, as mem jobs that overlap
 * the rest of the pull: for each destination the chunk touches, a copy from
 * `src` (this rank's image when the chunk landed here, the landing rank's
 * window when it fans out) into the caller's tensor and the digests of the
 * caller's parts; one more for the image (the fan-out copy into it, and the
 * digests of the bytes no destination holds). The copies read `src` only,
 * so the jobs have no order among them. */
typedef struct recv_dgroup {
    uint32_t chunk;
    int landed; /* the chunk landed here (else it was copied from a peer) */
    size_t npieces, njobs;
    wsync_mem_job_t **jobs;
    size_t *first;     /* [njobs + 1]: job j digests parts first[j] .. first[j+1] */
    unsigned char *ok; /* [njobs]: finished */
    recv_parts_t parts;
    uint64_t *psums;
} recv_dgroup_t;

/* pieces[k]: the chunk's piece k as an image range (ptr at `image`, off its
 * key); the chunk is image bytes [off, off+len); src at image offset 0.
 * direct (host memory): the destinations' bytes but 8 at either end landed
 * in them already (recv_dests_direct), only those ends are copied. */
wsync_status_t recv_dgroup_start(recv_dgroup_t *g, const wsync_mem_ops_t *mem, const recv_dests_t *ds, char *image,
                                 const char *src, uint64_t off, uint64_t len, const wsync_digest_range_t *pieces,
                                 size_t npieces, int direct);
/* *done once every job finished; then sums[k] is piece k's sum. */
wsync_status_t recv_dgroup_poll(recv_dgroup_t *g, const wsync_mem_ops_t *mem, uint64_t *sums, int *done);
/* Ends the jobs (waiting for those still running) and frees g's memory. */
void recv_dgroup_end(recv_dgroup_t *g, const wsync_mem_ops_t *mem);

#endif
