/* log.h: leveled logging to stderr, one line per message, thread-safe. */
#ifndef WSYNC_COMMON_LOG_H
#define WSYNC_COMMON_LOG_H

#include "common/wsync.h"

void wsync_log(wsync_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int wsync_log_enabled(wsync_log_level_t level);

/* Phase timestamps for finding where a pull's time goes: with WSYNC_TRACE=1
 * each call prints "TRACE <monotonic seconds> [pid] <message>" to stderr
 * (CLOCK_MONOTONIC is one clock for every process of a host, so lines of the
 * trainer and engine processes sort into one timeline). Otherwise a no-op. */
void wsync_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define LOG_ERROR(...) wsync_log(WSYNC_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) wsync_log(WSYNC_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) wsync_log(WSYNC_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) wsync_log(WSYNC_LOG_DEBUG, __VA_ARGS__)

#endif
