/* report.h: what a trainer rank tells the control endpoint (report.c): its
 * registration (sent again by the heartbeat), the layout (rank 0), each
 * version's pieces, and the last report kept to send again when the
 * endpoint lost it. On the publishing thread only: no lock. */
#ifndef WSYNC_TRAINER_REPORT_H
#define WSYNC_TRAINER_REPORT_H

#include <jansson.h>

#include "trainer_side/wsync_publisher.h"

typedef struct pub_report {
    json_t *layout_json;      /* what every publish reports (the manifest by digest); built once */
    uint64_t version;         /* the last version reported, and its pieces: */
    json_t *pieces;           /* sent again when the endpoint lost them */
    uint64_t resend_check_ns; /* when wait_published next checks that */
} pub_report_t;

/* Registers this rank (host, pull address, device) and starts the
 * heartbeat that repeats it. */
wsync_status_t pub_report_register(wsync_publisher_t *p);
/* Rank 0: the manifest, under its digest. */
wsync_status_t pub_report_layout(wsync_publisher_t *p);
/* This rank's pieces as a report lists them: id, offset, len and, with
 * `sums`, the digest (piece `bad` given a wrong one: a test hook); NULL
 * out of memory. */
json_t *pub_report_pieces(const wsync_publisher_t *p, uint64_t version, const uint64_t *sums, long bad);
/* Reports `pieces` of `version`; on success keeps them (a reference) to
 * send again. */
wsync_status_t pub_report_send(wsync_publisher_t *p, uint64_t version, json_t *pieces);
/* While wait_published waits for `version`: every 2 s, whether the endpoint
 * lost this rank's registration or report, sending them again if so. */
wsync_status_t pub_report_check(wsync_publisher_t *p, uint64_t version);
void pub_report_free(pub_report_t *r);

#endif
