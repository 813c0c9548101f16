/* args.c: numeric command-line options (args.h). atoi/atol read "abc" as 0
 * and "12Q" as 12, so a typo used to start a job with the wrong number;
 * every numeric option of the wsync binary comes through here instead. */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/settings.h"
#include "common/base/util.h"

/* Whole decimal numbers only: strtoll alone would take " 7", "+7" and "0x7". */
static int whole_number(const char *s, long long *out)
{
    const char *p = s;
    char *end = NULL;
    if (*p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return 0;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno == 0 && *end == '\0';
}

int cli_parse_long(const char *cmd, const char *opt, const char *text, long lo, long hi, long *out)
{
    long long v = 0;
    if (text == NULL || !whole_number(text, &v) || v < lo || v > hi) {
        fprintf(stderr, "wsync %s: %s: expected a whole number from %ld to %ld, got '%s'\n", cmd, opt, lo, hi,
                text ? text : "");
        return 2;
    }
    *out = (long)v;
    return 0;
}

int cli_parse_int(const char *cmd, const char *opt, const char *text, int lo, int hi, int *out)
{
    long v = 0;
    if (cli_parse_long(cmd, opt, text, lo, hi, &v) != 0)
        return 2;
    *out = (int)v;
    return 0;
}

/* 4096 -> "4K", 1<<30 -> "1G": the way a user writes the bound. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%llu", (unsigned long long)v);
    else
        snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
    return buf;
}

int cli_parse_size(const char *cmd, const char *opt, const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    char a[32], b[32];
    if (text == NULL || wsync_parse_size(text, opt, &v) != WSYNC_OK || v < lo || v > hi) {
        fprintf(stderr, "wsync %s: %s: expected a size such as 4096, 64M or 1G, from %s to %s, got '%s'\n", cmd,
                opt, size_text(lo, a, sizeof(a)), size_text(hi, b, sizeof(b)), text ? text : "");
        return 2;
    }
    *out = v;
    return 0;
}

int cli_set_plan(const char *cmd, const char *text)
{
    if (wsync_settings_set_flag("plan", text) != WSYNC_OK) {
        fprintf(stderr, "wsync %s: --plan: %s\n", cmd, wsync_last_error());
        return 2;
    }
    return 0;
}

int cli_parse_fraction(const char *cmd, const char *opt, const char *text, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end != text && strcmp(end, "%") == 0)
        v /= 100, end++;
    if (end != text && *end == '\0' && v >= 0 && v <= 1) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "wsync %s: %s: expected a fraction from 0 to 1 (0.02, or 2%%), got '%s'\n", cmd, opt, text);
    return 2;
}

int cli_parse_duration(const char *cmd, const char *opt, const char *text, double *out)
{
    static const struct {
        const char *unit;
        double s;
    } units[] = {{"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"h", 3600}, {"d", 86400}};
    char *end = NULL;
    double v = strtod(text, &end);
    size_t i;
    for (i = 0; end != text && i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(end, units[i].unit) == 0 && v > 0 && v * units[i].s <= 10 * 365 * 86400.0) {
            *out = v * units[i].s;
            return 0;
        }
    fprintf(stderr,
            "wsync %s: %s '%s' is not a duration: give a positive number with s, ms, m, h or d (e.g. 30s, "
            "10m, 2h)\n",
            cmd, opt, text);
    return 1;
}
