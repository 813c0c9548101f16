/* put_list.h: what one pull request makes this trainer rank put, and the one
 * loop that puts it (put_list.c). Both kinds of request reduce to a list of
 * puts, each a contiguous range of the asking rank's image with a tag id and
 * a chunk, read either straight from the slot or from the stage of packed
 * puts; the loop does not know which kind of request it serves. */
#ifndef WSYNC_TRAINER_PUT_LIST_H
#define WSYNC_TRAINER_PUT_LIST_H

#include "trainer_side/publisher_internal.h"

#define PUB_PUT_FROM_SLOT UINT32_MAX

typedef struct pub_put {
    uint64_t src;     /* image offset of its bytes in the slot (from the slot) */
    uint64_t dst_off; /* where it lands in the asking rank's image */
    uint64_t len;
    uint32_t id;    /* low half of its tag: piece id (whole image) or node-plan put id */
    uint32_t chunk; /* the request's chunk (in_order puts go chunk by chunk) */
    uint32_t stage; /* PUB_PUT_FROM_SLOT, or its index in the stage of packed puts */
} pub_put_t;

typedef struct pub_put_list {
    /* Whole image: my pieces (pieces[0 .. npieces), in offset order, which
     * is chunk order too), each a put when its chunk lands on the asker (q's
     * chunk map); not listed, made as the loop reaches them: a request of a
     * rank with 100k pieces starts putting at once. */
    const wsync_plan_t *plan;
    const uint32_t *pieces;
    size_t npieces;
    const wsync_pull_request_t *q;
    /* Targets: the puts, in the order they go out. */
    pub_put_t *puts;
    size_t n;
    /* Engine layouts, packed puts: the node plan (and its cache entry, the
     * stage's key) and the put ids the stage gathers, in stage order. */
    const void *stage_key;
    const wsync_node_plan_t *np;
    uint32_t *packed;
    size_t npacked;
} pub_put_list_t;

/* The puts of a whole-image request: every piece of mine in a chunk that
 * lands on the asker (the request's chunk map), straight from the slot. No
 * lock needed (the plan never changes); l reads q until it is cleared. */
wsync_status_t pub_put_list_pieces(const wsync_publisher_t *p, const wsync_pull_request_t *q, pub_put_list_t *out);
/* The puts of a request naming targets: every put of the node plan `tr`
 * that I own landing on the asker in a chunk it asks for, packed when its
 * source is not one contiguous range. No lock needed. */
wsync_status_t pub_put_list_targets(const wsync_publisher_t *p, const pub_treq_t *tr,
                                    const wsync_pull_request_t *q, pub_put_list_t *out);
void pub_put_list_clear(pub_put_list_t *l);
/* The list's candidates are 0 .. pub_put_list_len(l) - 1, in the order they
 * go out; candidate k is a put when pub_put_list_at returns 1 (*e set). */
size_t pub_put_list_len(const pub_put_list_t *l);
int pub_put_list_at(const pub_put_list_t *l, size_t k, pub_put_t *e);

/* Puts every put of l into the asker's region (key q->key) over connection
 * conn of transport ti, from slot s: each as soon as the pieces under it are
 * copied into the slot, the packed ones from their stage (r->stage, packed
 * when the first of them goes, which needs my whole share copied); with
 * q->in_order chunk by chunk, one put in flight at a time. Counts them in r
 * (r->outstanding, r->nput, r->bput). Called with p->lock held (dropped
 * while waiting and packing; s is pinned); a failure is recorded in r,
 * naming the put and why. */
void pub_put_list_run(wsync_publisher_t *p, pub_slot_t *s, const pub_put_list_t *l, const wsync_pull_request_t *q,
                      pub_request_t *r, int ti, pub_conn_t *conn, uint64_t deadline);
/* What r got through of l, for a failure's message: "3 of 8 puts (12.00 MiB
 * of 48.00 MiB) handed to the transport, 1 of them not confirmed sent". */
const char *pub_put_list_progress(const pub_put_list_t *l, const pub_request_t *r, char *buf, size_t len);

#endif
