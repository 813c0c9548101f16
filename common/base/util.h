/* util.h: small helpers shared by every layer: sizes, clocks, strings. */
#ifndef WSYNC_COMMON_UTIL_H
#define WSYNC_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/wsync.h"

/* "64M", "1GiB", "4096", "1.5G" -> bytes (K/M/G/T are powers of 1024).
 * Records a message naming `what` on failure. */
wsync_status_t wsync_parse_size(const char *s, const char *what, uint64_t *out);
/* Formats bytes as "1.00 GiB" into buf. */
const char *wsync_fmt_size(uint64_t bytes, char *buf, size_t len);

/* Monotonic clock in nanoseconds / seconds. */
uint64_t wsync_now_ns(void);
double wsync_now_s(void);
/* *ts = CLOCK_REALTIME now + ms: the absolute time pthread_cond_timedwait
 * takes. */
void wsync_abstime_after_ms(struct timespec *ts, long ms);

static inline uint64_t wsync_align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

#endif
