/* interrupt.c: the process-wide interrupt flag and cancellable sleeps (see
 * interrupt.h). */
#include "common/base/interrupt.h"

#include <time.h>

#include "common/base/checks.h"
#include "common/base/util.h"

static int process_interrupted; /* atomic; set once, never cleared */

void wsync_interrupt(void)
{
    __atomic_store_n(&process_interrupted, 1, __ATOMIC_RELEASE);
}

int wsync_interrupted(void)
{
    return __atomic_load_n(&process_interrupted, __ATOMIC_ACQUIRE);
}

int wsync_cancelled(const int *flag)
{
    return wsync_interrupted() || (flag != NULL && __atomic_load_n(flag, __ATOMIC_ACQUIRE));
}

int wsync_sleep_cancellable(long ms, const int *flag)
{
    while (ms > 0) {
        long part = ms < WSYNC_INTERRUPT_SLICE_MS ? ms : WSYNC_INTERRUPT_SLICE_MS;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = part * 1000000L};
        if (wsync_cancelled(flag))
            return 1;
        nanosleep(&ts, NULL);
        ms -= part;
    }
    return wsync_cancelled(flag);
}

wsync_status_t wsync_cancel_error(const char *what)
{
    return wsync_error(WSYNC_ERR_CANCELLED, "%s: interrupted (SIGINT/SIGTERM, or a cancel); not retried", what);
}
