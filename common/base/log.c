/* log.c: stderr logging with a level set by the log setting (WSYNC_LOG) or
 * the API. */
#include "common/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/base/settings.h"

static int log_level = -1;

/* The level: set by the API, else the log setting, read at first use. An
 * error recorded while settings are being resolved logs before the setting
 * is known: that message is judged by the default level, nothing cached. */
static int current_level(void)
{
    int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED), unset = -1;
    if (l >= 0)
        return l;
    if (wsync_settings_resolving())
        return WSYNC_LOG_WARN;
    /* The setting's choices are in level order: error|warn|info|debug. */
    l = (int)wsync_setting_int(WSYNC_SET_LOG);
    __atomic_compare_exchange_n(&log_level, &unset, l, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void wsync_log_set_level(wsync_log_level_t level)
{
    __atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

int wsync_log_enabled(wsync_log_level_t level)
{
    return (int)level <= current_level();
}

void wsync_log(wsync_log_level_t level, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[2048];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    int n;

    if (!wsync_log_enabled(level))
        return;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03d wsync[%d] %-5s ", tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)(tv.tv_usec / 1000), (int)getpid(), names[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* One write per line keeps lines from different processes whole. */
    strcat(line, "\n");
    fputs(line, stderr);
}

void wsync_trace(const char *fmt, ...)
{
    static int on = -1;
    char line[512];
    struct timespec ts;
    va_list ap;
    int n;

    if (on < 0)
        __atomic_store_n(&on, (int)wsync_setting_int(WSYNC_SET_TRACE), __ATOMIC_RELAXED);
    if (!__atomic_load_n(&on, __ATOMIC_RELAXED))
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(line, sizeof(line), "TRACE %ld.%06ld [%d] ", (long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid());
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fputs(line, stderr);
}
