/* gzip.h: compressed answers for clients that say they take them. GET
 * /v1/status with 1000 engine nodes is ~260 KB of JSON that differs per
 * node only in names and numbers; gzip makes it ~10x smaller, and the bytes
 * per request (not the building, which is cached) were what held its rate
 * to a third of /healthz's (bench/RESULTS.md, control_bench). */
#ifndef WSYNC_CONTROL_GZIP_H
#define WSYNC_CONTROL_GZIP_H

#include <stddef.h>

/* 1 when an Accept-Encoding header value lists gzip (or "*") with a
 * quality above 0 (RFC 9110 12.5.3); NULL or anything else: 0. */
int ctl_accepts_gzip(const char *accept_encoding);

/* text[0 .. len) as one gzip member (level 1: the answer is built again on
 * every change of the model, so speed matters more than the last few
 * percent). A malloc'd buffer of *out_len bytes, or NULL (no memory). */
char *ctl_gzip(const char *text, size_t len, size_t *out_len);

#endif
