/* util.c: sizes, clocks and the deterministic fill pattern. */
#include "common/base/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/status.h"

wsync_status_t wsync_parse_size(const char *s, const char *what, uint64_t *out)
{
    char *end = NULL;
    double v;
    double mult = 1;

    if (s == NULL || *s == '\0' || *s == '-')
        return wsync_error(WSYNC_ERR_INVALID, "%s: expected a size such as 4096, 64M or 1G, got '%s'", what,
                           s ? s : "");
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v) || v < 0)
        return wsync_error(WSYNC_ERR_INVALID, "%s: expected a size such as 4096, 64M or 1G, got '%s'", what, s);
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (mult > 1 && (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0))
        end += strlen(end);
    else if (mult == 1 && strcasecmp(end, "B") == 0)
        end++;
    if (*end != '\0' || v * mult > 9.0e18)
        return wsync_error(WSYNC_ERR_INVALID, "%s: expected a size such as 4096, 64M or 1G, got '%s'", what, s);
    *out = (uint64_t)(v * mult);
    return WSYNC_OK;
}

const char *wsync_fmt_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

uint64_t wsync_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void wsync_abstime_after_ms(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

double wsync_now_s(void)
{
    return (double)wsync_now_ns() / 1e9;
}
