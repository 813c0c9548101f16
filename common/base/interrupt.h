/* interrupt.h: stopping blocking waits from a signal handler or another
 * thread (issue 26.2). A wait checks two flags: the process-wide one
 * wsync_interrupt() sets (the command line's SIGINT/SIGTERM handler: every
 * object of a process about to exit), and its object's own (a receiver's,
 * wsync_receiver_cancel). Both are plain ints read and written with atomic
 * builtins, so setting one is async-signal-safe. Waits that sleep do so in
 * slices of at most WSYNC_INTERRUPT_SLICE_MS, so a flag set is seen within
 * that. */
#ifndef WSYNC_COMMON_INTERRUPT_H
#define WSYNC_COMMON_INTERRUPT_H

#include "common/wsync.h"

#define WSYNC_INTERRUPT_SLICE_MS 20

/* 1 when wsync_interrupt() was called or `flag` (may be NULL) is set. */
int wsync_cancelled(const int *flag);

/* Sleeps `ms`, in slices; 1 (early) when wsync_cancelled(flag). */
int wsync_sleep_cancellable(long ms, const int *flag);

/* WSYNC_ERR_CANCELLED with "<what>: interrupted (SIGINT/SIGTERM or a cancel)". */
wsync_status_t wsync_cancel_error(const char *what);

#endif
