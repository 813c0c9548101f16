/* log.c: stderr logging with a level set by WSYNC_LOG or the API. */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int log_level = -1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init(void)
{
    const char *env = getenv("WSYNC_LOG");
    if (log_level >= 0)
        return;
    log_level = WSYNC_LOG_WARN;
    if (env == NULL)
        return;
    if (strcmp(env, "error") == 0) log_level = WSYNC_LOG_ERROR;
    else if (strcmp(env, "warn") == 0) log_level = WSYNC_LOG_WARN;
    else if (strcmp(env, "info") == 0) log_level = WSYNC_LOG_INFO;
    else if (strcmp(env, "debug") == 0) log_level = WSYNC_LOG_DEBUG;
}

void wsync_log_set_level(wsync_log_level_t level)
{
    pthread_once(&log_once, log_init);
    __atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

int wsync_log_enabled(wsync_log_level_t level)
{
    pthread_once(&log_once, log_init);
    return (int)level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
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
    n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03d wsync[%d] %-5s ", tm.tm_hour, tm.tm_min,
                 tm.tm_sec, (int)(tv.tv_usec / 1000), (int)getpid(), names[level]);
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

    if (on < 0) {
        const char *env = getenv("WSYNC_TRACE");
        __atomic_store_n(&on, env && strcmp(env, "1") == 0, __ATOMIC_RELAXED);
    }
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
